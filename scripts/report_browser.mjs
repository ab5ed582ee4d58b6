// A built report in headless Chromium (Debian's `chromium`), driven over the DevTools protocol:
// the report is served from 127.0.0.1 (no network beyond it), the browser gets a fresh profile.
// Used by screenshot_report.mjs and overview_in_browser.mjs; needs Node >= 20.10 run with
// --experimental-websocket (Node 22 has WebSocket built in).

import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, readFileSync, existsSync, writeFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, extname, normalize } from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The flags that work in a container without a display, a sandbox or a network.
export const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
  "--hide-scrollbars"];

const types = { ".html": "text/html", ".js": "text/javascript", ".json": "application/json",
  ".css": "text/css", ".png": "image/png", ".svg": "image/svg+xml", ".txt": "text/plain",
  ".csv": "text/csv", ".woff": "font/woff", ".woff2": "font/woff2" };

export async function openReport(reportDir, { width = 1440, height = 1000 } = {}) {
  if (typeof WebSocket === "undefined") {
    throw new Error("this Node has no WebSocket: run it with `node --experimental-websocket` (Node >= 20.10)");
  }
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

  const browser = process.env.CHROMIUM ?? "chromium";
  const profile = mkdtempSync(join(tmpdir(), "gemmcheck-chromium-"));
  const chrome = spawn(browser, [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`, "--remote-debugging-port=0",
    `--window-size=${width},${height}`, "about:blank"], { stdio: "ignore", detached: true });
  // Debian's `chromium` is a wrapper script: end the whole process group, not just the wrapper.
  const stopBrowser = () => { try { process.kill(-chrome.pid, "SIGTERM"); } catch {} };
  let port;
  for (let i = 0; i < 150 && !port; i++) {
    await sleep(100);
    try { port = readFileSync(join(profile, "DevToolsActivePort"), "utf8").split("\n")[0]; } catch {}
  }
  if (!port) {
    stopBrowser(); server.close();
    throw new Error(`${browser} did not start (is it installed? apt-get install -y chromium)`);
  }
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
  const size = (h) => send("Emulation.setDeviceMetricsOverride", { width, height: h, deviceScaleFactor: 1, mobile: false });
  await send("Page.enable");
  await send("Runtime.enable");
  await size(height);

  return {
    base, evaluate, waitFor, send,
    // Load the report at `hash` and wait until Allure's app has drawn something.
    go: async (hash = "") => {
      await send("Page.navigate", { url: `${base}${hash}` });
      await waitFor(`document.readyState === "complete" && !!document.querySelector("#app") && document.querySelector("#app").innerText.length > 50`);
      await sleep(1500);
    },
    text: () => evaluate("document.body.innerText"),
    clickText: (text, selector = "*") => evaluate(`(() => {
      const els = [...document.querySelectorAll(${JSON.stringify(selector)})]
        .filter((e) => e.children.length === 0 && e.textContent.trim() === ${JSON.stringify(text)});
      if (!els.length) return false;
      els[0].scrollIntoView({ block: "center" }); els[0].click(); return true; })()`),
    // The report scrolls inside its own containers, so a "full page" shot is a tall viewport.
    shoot: async (file, { tall = 0 } = {}) => {
      await size(tall || height);
      await sleep(700);
      const { data } = await send("Page.captureScreenshot", { format: "png" });
      await size(height);
      writeFileSync(file, Buffer.from(data, "base64"));
      return file;
    },
    close: async () => {
      ws.close();
      stopBrowser();
      server.close();
      await sleep(300);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
