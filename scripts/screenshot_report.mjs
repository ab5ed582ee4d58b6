#!/usr/bin/env node
// Screenshot a built Allure 3 report with headless Chromium (Debian's `chromium`), driving it
// over the DevTools protocol so collapsed attachments can be opened, and check that each view
// shows what a reviewer needs. No network: the report is served from 127.0.0.1.
//
//   node --experimental-websocket scripts/screenshot_report.mjs REPORT_DIR OUT_DIR
//
// EXPECT_SUITES=correctness,hazards (default: all four) and EXPECT_GPU=0 (a run without a GPU)
// relax the checks for partial or local runs.
//
// Writes OUT_DIR/{overview,environment,categories,failing-test}.png and OUT_DIR/checks.json;
// exits 1 if a check fails (the file says which).

import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, existsSync, writeFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, extname, resolve, normalize } from "node:path";

const [reportDir, outDir] = process.argv.slice(2).map((p) => p && resolve(p));
if (!reportDir || !outDir) {
  console.error("usage: node --experimental-websocket scripts/screenshot_report.mjs REPORT_DIR OUT_DIR");
  process.exit(2);
}
if (typeof WebSocket === "undefined") {
  console.error("this Node has no WebSocket: run it with `node --experimental-websocket` (Node >= 20.10)");
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });
const browser = process.env.CHROMIUM ?? "chromium";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// -- a static server for the report ----------------------------------------------------------
const types = { ".html": "text/html", ".js": "text/javascript", ".json": "application/json",
  ".css": "text/css", ".png": "image/png", ".svg": "image/svg+xml", ".txt": "text/plain",
  ".csv": "text/csv", ".woff": "font/woff", ".woff2": "font/woff2" };
const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^(\.\.[/\\])+/, "");
  let file = join(reportDir, path);
  if (existsSync(file) && statSync(file).isDirectory()) file = join(file, "index.html");
  if (!file.startsWith(reportDir) || !existsSync(file)) { res.writeHead(404); res.end(); return; }
  res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" });
  res.end(readFileSync(file));
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}/index.html`;

// -- chromium over the DevTools protocol ------------------------------------------------------
const profile = mkdtempSync(join(tmpdir(), "gemmcheck-chromium-"));
const chrome = spawn(browser, ["--headless", "--no-sandbox", "--disable-gpu",
  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
  "--disable-default-apps", "--hide-scrollbars", `--user-data-dir=${profile}`,
  "--remote-debugging-port=0", "--window-size=1440,1000", "about:blank"], { stdio: "ignore", detached: true });
// Debian's `chromium` is a wrapper script: end the whole process group, not just the wrapper.
const stopBrowser = () => { try { process.kill(-chrome.pid, "SIGTERM"); } catch {} };
let port;
for (let i = 0; i < 100 && !port; i++) {
  await sleep(100);
  try { port = readFileSync(join(profile, "DevToolsActivePort"), "utf8").split("\n")[0]; } catch {}
}
if (!port) { console.error(`${browser} did not start (is it installed? apt-get install -y chromium)`); process.exit(2); }
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const ws = new WebSocket(targets.find((t) => t.type === "page").webSocketDebuggerUrl);
await new Promise((r) => ws.addEventListener("open", r, { once: true }));
let nextId = 0;
const pending = new Map();
ws.addEventListener("message", (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
});
const send = (method, params = {}) => new Promise((resolveMsg, reject) => {
  const id = ++nextId;
  pending.set(id, (msg) => (msg.error ? reject(new Error(`${method}: ${msg.error.message}`)) : resolveMsg(msg.result)));
  ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expression) =>
  (await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true })).result.value;
const waitFor = async (expression, ms = 15000) => {
  for (let t = 0; t < ms; t += 200) { if (await evaluate(expression)) return true; await sleep(200); }
  return false;
};
const clickText = (text, selector = "*") => evaluate(`(() => {
  const els = [...document.querySelectorAll(${JSON.stringify(selector)})]
    .filter((e) => e.children.length === 0 && e.textContent.trim() === ${JSON.stringify(text)});
  if (!els.length) return false;
  els[0].scrollIntoView({ block: "center" }); els[0].click(); return true; })()`);
// The report scrolls inside its own container, so a "full page" shot is a tall viewport.
const shoot = async (name, { full = true } = {}) => {
  await send("Emulation.setDeviceMetricsOverride", { width: 1440, height: full ? 2400 : 1000, deviceScaleFactor: 1, mobile: false });
  await sleep(700);
  const { data } = await send("Page.captureScreenshot", { format: "png" });
  await send("Emulation.setDeviceMetricsOverride", { width: 1440, height: 1000, deviceScaleFactor: 1, mobile: false });
  writeFileSync(join(outDir, `${name}.png`), Buffer.from(data, "base64"));
  return join(outDir, `${name}.png`);
};
const go = async (hash) => {
  await send("Page.navigate", { url: `${base}${hash}` });
  await waitFor(`document.readyState === "complete" && !!document.querySelector("#app") && document.querySelector("#app").innerText.length > 50`);
  await sleep(1500);
};
await send("Page.enable");
await send("Runtime.enable");
await send("Emulation.setDeviceMetricsOverride", { width: 1440, height: 1000, deviceScaleFactor: 1, mobile: false });

const checks = [];
const check = (view, what, ok, detail = "") => checks.push({ view, what, ok: !!ok, detail });
const text = () => evaluate("document.body.innerText");

// 1. Overview: every suite's tree, the pie, the counts.
await go("");
await evaluate("window.scrollTo(0, 0)");
let page = await text();
// EXPECT_SUITES: the suites the run included (default: all four).
for (const suite of (process.env.EXPECT_SUITES ?? "correctness,hazards,performance,compile").split(",")) {
  check("overview", `suite '${suite}' in the tree`, page.includes(suite));
}
check("overview", "analytics script absent", !(await evaluate(`!!document.querySelector('script[src*="googletagmanager"]')`)));
await shoot("overview");

// 2. Environment: the metadata block, all rows shown.
await clickText("Show more");
await sleep(500);
page = await text();
const gpuKeys = process.env.EXPECT_GPU === "0" ? [] : ["cuda_driver", "cuda_runtime", "capability", "sm_count", "driver"];
for (const key of ["gpu", ...gpuKeys, "cupy", "numpy", "python", "hyp_profile", "profile", "backend"]) {
  check("environment", `'${key}' shown`, page.includes(key));
}
await evaluate(`(() => { const h = [...document.querySelectorAll("*")].find((e) => e.children.length === 0 && e.textContent.trim() === "Metadata"); if (h) h.scrollIntoView({ block: "start" }); })()`);
await shoot("environment", { full: false });

// 3. Categories: each broken variant under its defect class.
await go("#categories");
page = await text();
const categories = ["Broken variant not caught", "Crash or hang", "Divergent barrier", "Shared-memory race", "Out-of-bounds access",
  "Unwritten output", "Wrong values", "Performance regression", "Environment problems"];
check("categories", "at least one defect category shown", categories.some((c) => page.includes(c)),
  categories.filter((c) => page.includes(c)).join(", "));
await shoot("categories");

// 4. A failing broken variant with its heatmap: picked from the report's own data.
// A multi-file report keeps them in data/test-results; a single-file one embeds them, base64.
const resultsDir = join(reportDir, "data", "test-results");
const results = existsSync(resultsDir)
  ? readdirSync(resultsDir).map((f) => JSON.parse(readFileSync(join(resultsDir, f), "utf8")))
  : [...readFileSync(join(reportDir, "index.html"), "utf8")
      .matchAll(/d\("data\/test-results\/[^"]+\.json","([^"]+)"\)/g)]
      .map((m) => JSON.parse(Buffer.from(m[1], "base64").toString("utf8")));
const label = (tr, name) => (tr.labels ?? []).find((l) => l.name === name)?.value;
const hasHeatmap = (tr) => JSON.stringify(tr.attachments ?? tr.steps ?? []).includes("error / bound heatmap");
// A broken variant first, failed before other statuses, a fixed shape before a hypothesis-shrunk one.
const isHypothesis = (tr) => (tr.labels ?? []).some((l) => l.name === "tag" && l.value === "hypothesis");
const candidates = results.filter((tr) => hasHeatmap(tr))
  .sort((a, b) => (label(a, "expect") === "correct") - (label(b, "expect") === "correct")
    || (a.status === "failed" ? 0 : 1) - (b.status === "failed" ? 0 : 1)
    || isHypothesis(a) - isHypothesis(b));
const chosen = candidates[0];
check("failing-test", "a test with a heatmap exists", chosen, chosen ? `${chosen.name} (${chosen.status})` : "none");
if (chosen) {
  await go(`#${chosen.id}`);
  const opened = await clickText("error / bound heatmap");
  check("failing-test", "heatmap attachment opened", opened);
  await waitFor(`[...document.querySelectorAll("img")].some((i) => i.complete && i.naturalWidth > 300)`);
  await sleep(800);
  check("failing-test", "heatmap image rendered",
    await evaluate(`[...document.querySelectorAll("img")].some((i) => i.complete && i.naturalWidth > 300)`));
  page = await text();
  check("failing-test", "broken variant", label(chosen, "expect") !== "correct", `expect ${label(chosen, "expect")}`);
  check("failing-test", "message starts with a defect class", /^(Failed: |AssertionError: |XFAIL )?[a-z_]+(, [a-z_]+)*: /m.test(chosen.error?.message ?? ""), chosen.error?.message?.slice(0, 120));
  await evaluate("window.scrollTo(0, 0)");
  await shoot("failing-test");
}

writeFileSync(join(outDir, "checks.json"), JSON.stringify(checks, null, 2));
for (const c of checks) console.log(`${c.ok ? "ok  " : "FAIL"} ${c.view}: ${c.what}${c.detail ? ` (${c.detail})` : ""}`);
ws.close();
stopBrowser();
server.close();
await sleep(300);
rmSync(profile, { recursive: true, force: true });
process.exit(checks.every((c) => c.ok) ? 0 : 1);
