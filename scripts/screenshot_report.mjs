#!/usr/bin/env node
// Screenshot a built Allure 3 report with headless Chromium (Debian's `chromium`), driving it
// over the DevTools protocol so collapsed attachments can be opened, and check that each view
// shows what a reviewer needs: first the kernel overview, then Allure's views. No network: the
// report is served from 127.0.0.1 (scripts/report_browser.mjs).
//
//   node --experimental-websocket scripts/screenshot_report.mjs REPORT_DIR OUT_DIR
//
// EXPECT_SUITES=correctness,hazards (default: all four) and EXPECT_GPU=0 (a run without a GPU)
// relax the checks for partial or local runs.
//
// Writes OUT_DIR/{kernels,tests,environment,categories,failing-test}.png and OUT_DIR/checks.json;
// exits 1 if a check fails (the file says which).

import { mkdirSync, readFileSync, readdirSync, existsSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { openReport, sleep } from "./report_browser.mjs";

const [reportDir, outDir] = process.argv.slice(2).map((p) => p && resolve(p));
if (!reportDir || !outDir) {
  console.error("usage: node --experimental-websocket scripts/screenshot_report.mjs REPORT_DIR OUT_DIR");
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });
let b;
try {
  b = await openReport(reportDir);
} catch (err) {
  console.error(err.message);
  process.exit(2);
}
const { evaluate, waitFor, go, clickText, text } = b;
const shoot = (name, { full = true } = {}) => b.shoot(join(outDir, `${name}.png`), { tall: full ? 2400 : 0 });

const checks = [];
const check = (view, what, ok, detail = "") => checks.push({ view, what, ok: !!ok, detail });

// 1. The first screen: the kernel overview, one row per instantiation, failing first.
await go("");
const first = await evaluate(`(() => { const p = document.getElementById("gemmcheck-overview");
  return { shown: !!p && !p.hidden, rows: [...document.querySelectorAll("#gco-kernels tbody tr")].map((tr) => tr.dataset.status) }; })()`);
check("kernels", "the kernel overview is the first screen", first.shown);
check("kernels", "one row per instantiation", first.rows.length > 0, `${first.rows.length} rows`);
const rank = { unexpected: 0, symptoms_only: 1 };
check("kernels", "failing rows first", first.rows.every((s, i) => i === 0 || (rank[first.rows[i - 1]] ?? 2) <= (rank[s] ?? 2)));
let page = await text();
for (const part of ["Kill matrix", "Performance", "Environment"]) check("kernels", `'${part}' section`, page.includes(part));
await shoot("kernels", { full: false });

// 2. All tests: every suite's tree, the pie, the counts.
await evaluate(`document.getElementById("gemmcheck-overview-tests").click()`);
await sleep(1200);
page = await text();
// EXPECT_SUITES: the suites the run included (default: all four).
for (const suite of (process.env.EXPECT_SUITES ?? "correctness,hazards,performance,compile").split(",")) {
  check("tests", `suite '${suite}' in the tree`, page.includes(suite));
}
check("tests", "analytics script absent", !(await evaluate(`!!document.querySelector('script[src*="googletagmanager"]')`)));
await shoot("tests");

// 3. Environment: Allure's metadata block, all rows shown.
await clickText("Show more");
await sleep(500);
page = await text();
const gpuKeys = process.env.EXPECT_GPU === "0" ? ["g++"] : ["cuda_driver", "cuda_runtime", "capability", "sm_count", "driver"];
for (const key of ["runs_on", "gpu", ...gpuKeys, "cupy", "nvrtc", "nvcc", "numpy", "python", "hyp_profile", "profile", "backend"]) {
  check("environment", `'${key}' shown`, page.includes(key));
}
await evaluate(`(() => { const h = [...document.querySelectorAll("*")].find((e) => e.children.length === 0 && e.textContent.trim() === "Metadata"); if (h) h.scrollIntoView({ block: "start" }); })()`);
await shoot("environment", { full: false });

// 4. Categories: each broken variant under its defect class.
await go("#categories");
page = await text();
const categories = ["Broken variant not caught", "Crash or hang", "Divergent barrier", "Shared-memory race", "Out-of-bounds access",
  "Unwritten output", "Wrong values", "Performance regression", "Environment problems"];
check("categories", "at least one defect category shown", categories.some((c) => page.includes(c)),
  categories.filter((c) => page.includes(c)).join(", "));
await shoot("categories");

// 5. A failing broken variant with its heatmap: picked from the report's own data.
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
await b.close();
process.exit(checks.every((c) => c.ok) ? 0 : 1);
