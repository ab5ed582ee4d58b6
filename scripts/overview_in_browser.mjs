#!/usr/bin/env node
// Open a built report in headless Chromium and record what its first screen, the kernel
// overview, shows and where its links lead: tests/test_report_overview.py judges the record.
//
//   node --experimental-websocket scripts/overview_in_browser.mjs REPORT_DIR OUT.json [SHOT.png]
//
// OUT.json: {opened: {...}, rows: [...], links: [...], allTests: {...}, reopened: {...}}.

import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { openReport, sleep } from "./report_browser.mjs";

const [reportDir, out, shot] = process.argv.slice(2).map((p) => p && resolve(p));
if (!reportDir || !out) {
  console.error("usage: node --experimental-websocket scripts/overview_in_browser.mjs REPORT_DIR OUT.json [SHOT.png]");
  process.exit(2);
}
const b = await openReport(reportDir);
const panel = `document.getElementById("gemmcheck-overview")`;
const state = () => b.evaluate(`(() => {
  const p = ${panel}, r = p && p.getBoundingClientRect();
  return { hash: location.hash, panelShown: !!p && !p.hidden,
    coversViewport: !!r && r.top <= 0 && r.left <= 0 && r.width >= innerWidth - 1 && r.height >= innerHeight - 1,
    openerShown: !document.getElementById("gemmcheck-overview-open").hidden,
    app: document.querySelector("#app").innerText.slice(0, 2000) }; })()`);

const record = {};
await b.go("");
record.opened = await state();
if (shot) await b.shoot(shot);
record.rows = await b.evaluate(`[...document.querySelectorAll("#gco-kernels tbody tr")].map((tr) => ({
  instance: tr.dataset.instance, status: tr.dataset.status, text: tr.innerText,
  causes: [...tr.querySelectorAll("li.gco-cause a")].map((a) => ({ text: a.innerText, href: a.getAttribute("href") })) }))`);
record.links = [];
for (const href of [...new Set(record.rows.flatMap((r) => r.causes.map((c) => c.href)))]) {
  await b.go("");
  await b.evaluate(`document.querySelector('#gco-kernels a[href="${href}"]').click()`);
  await b.waitFor(`location.hash === ${JSON.stringify(href)} && document.querySelector("#app").innerText.includes("[")`);
  await sleep(800);
  record.links.push({ href, ...(await state()) });
}
await b.go("");
await b.evaluate(`document.getElementById("gemmcheck-overview-tests").click()`);
await sleep(1200);
record.allTests = await state();
await b.evaluate(`document.getElementById("gemmcheck-overview-open").click()`);
await sleep(500);
record.reopened = await state();
await b.close();
writeFileSync(out, JSON.stringify(record, null, 2));
