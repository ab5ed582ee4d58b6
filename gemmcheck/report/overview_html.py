"""The kernel overview as HTML, placed in the built Allure report as its first screen.

Allure 3 has no view for a table of our own rows (its plugins show tests, categories, charts
of test statuses and the environment), and an HTML attachment is shown in a sandboxed frame
whose links cannot open a test. So the overview is a panel of the report's own page: shown
when the report opens (its URL without a fragment), hidden while a test or any Allure view is
open, one button away from every view. Being part of index.html, the single-file report carries it
too, and its links are the report's own ``#<test result id>`` fragments.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import re

from gemmcheck.report import overview_history

PANEL_ID = "gemmcheck-overview"
ALL_TESTS = "#/"              # Allure's tree (its empty route)

# environment.properties keys shown on the first screen, with the words a reviewer reads
HEADLINE = (("runs_on", "runs on"), ("gpu", "card"), ("driver", "driver"), ("cuda_driver", "CUDA driver"),
            ("cuda_runtime", "CUDA runtime"), ("cupy", "CuPy"), ("nvrtc", "NVRTC"), ("nvcc", "nvcc"),
            ("g++", "g++"), ("profile", "profile"), ("catalog", "catalogs"))
STATUS_WORDS = {"unexpected": "not as declared", "symptoms_only": "symptoms only",
                "as_expected": "as declared", "not_checked": "not checked"}

STYLE = """
#gemmcheck-overview{position:fixed;inset:0;z-index:2147483000;overflow:auto;background:#f6f7f9;color:#1d2430;
 font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;padding:20px 28px 60px}
#gemmcheck-overview[hidden]{display:none}
#gemmcheck-overview *{box-sizing:border-box}
#gemmcheck-overview .gco-head{display:flex;justify-content:space-between;align-items:flex-start;gap:16px}
#gemmcheck-overview h1{font-size:22px;margin:0 0 2px}
#gemmcheck-overview h2{font-size:16px;margin:22px 0 8px}
#gemmcheck-overview .gco-sub,#gemmcheck-overview .gco-note{color:#5b6472;margin:2px 0}
#gemmcheck-overview .gco-counts{font-size:15px;margin:10px 0 4px}
#gemmcheck-overview .gco-env{display:flex;flex-wrap:wrap;gap:4px 18px;margin:8px 0 0;padding:8px 12px;
 background:#fff;border:1px solid #dde1e7;border-radius:6px}
#gemmcheck-overview .gco-env span{white-space:nowrap}
#gemmcheck-overview .gco-env b{font-weight:600;color:#5b6472;margin-right:4px}
#gemmcheck-overview table{border-collapse:collapse;background:#fff;border:1px solid #dde1e7;width:100%;margin:0}
#gemmcheck-overview th,#gemmcheck-overview td{text-align:left;vertical-align:top;padding:5px 9px;
 border-bottom:1px solid #eceff3}
#gemmcheck-overview th{background:#eef1f5;font-weight:600;font-size:13px;white-space:nowrap}
#gemmcheck-overview td.gco-num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
#gemmcheck-overview code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace}
#gemmcheck-overview a{color:#1f5fbf;text-decoration:none}
#gemmcheck-overview a:hover{text-decoration:underline}
#gemmcheck-overview .gco-button{display:inline-block;padding:7px 14px;border-radius:6px;background:#1f5fbf;
 color:#fff;font-weight:600;white-space:nowrap}
#gemmcheck-overview .gco-badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;
 font-weight:600;white-space:nowrap}
#gemmcheck-overview .gco-unexpected{background:#fde2e1;color:#a3150f}
#gemmcheck-overview .gco-symptoms_only{background:#fff0d6;color:#8a5300}
#gemmcheck-overview .gco-as_expected{background:#ddf5e3;color:#146c2e}
#gemmcheck-overview .gco-not_checked{background:#e8eaee;color:#4a5260}
#gemmcheck-overview .gco-changed{background:#fff0d6;color:#8a5300}
#gemmcheck-overview .gco-cause{margin:0 0 2px}
#gemmcheck-overview ul{margin:0;padding:0;list-style:none}
#gemmcheck-overview summary{cursor:pointer}
#gemmcheck-overview pre{background:#fff;border:1px solid #dde1e7;padding:8px;overflow:auto;font-size:12px}
#gemmcheck-overview img{max-width:100%;border:1px solid #dde1e7;background:#fff}
#gemmcheck-overview-open{position:fixed;right:18px;bottom:18px;z-index:2147483000;padding:8px 14px;
 border-radius:18px;background:#1f5fbf;color:#fff;font:600 13px system-ui,sans-serif;text-decoration:none;
 box-shadow:0 2px 8px rgba(0,0,0,.25)}
#gemmcheck-overview-open[hidden]{display:none}
"""

# Shown while the report's URL has no fragment (as it opens); hidden on any route of Allure's
# (a test's #<id>, the tree at #/, its tabs). The opener drops the fragment without a reload
# (a single-file report is large) and without a route Allure would try to load as a test.
SCRIPT = """
(function () {
  var panel = document.getElementById("%(panel)s");
  var open = document.getElementById("%(panel)s-open");
  function sync() {
    var shown = !location.hash || location.hash === "#";
    panel.hidden = !shown;
    open.hidden = shown;
  }
  open.addEventListener("click", function (event) {
    event.preventDefault();
    history.pushState(null, "", location.pathname + location.search);
    sync();
    panel.scrollTop = 0;
  });
  window.addEventListener("hashchange", sync);
  window.addEventListener("popstate", sync);
  sync();
})();
""" % {"panel": PANEL_ID}


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(status: str) -> str:
    return f'<span class="gco-badge gco-{_e(status)}">{_e(STATUS_WORDS.get(status, status))}</span>'


def _link(href: str | None, text: str, title: str = "") -> str:
    title_attr = f' title="{_e(title)}"' if title else ""
    return f'<a href="{_e(href)}"{title_attr}>{text}</a>' if href else f"<span{title_attr}>{text}</span>"


def _spread(measurement: dict) -> str:
    """A measurement's interquartile range / median, as the suite's table shows it ("n/a" in a
    perf.json written before it was recorded)."""
    spread = measurement.get("spread")
    return f"{100 * spread:.2f}%" if spread is not None else "n/a"


def _cell(content: str, *, numeric: bool = False) -> str:
    return f'<td class="gco-num">{content}</td>' if numeric else f"<td>{content}</td>"


def _long(text: str, shown: int = 140) -> str:
    """A text that can run to a paragraph (a kill-matrix row's why): its start, the rest on a click."""
    if len(text) <= shown:
        return _e(text)
    cut = text.rfind(" ", 0, shown)
    cut = cut if cut > shown // 2 else shown
    return f"<details><summary>{_e(text[:cut])} &hellip;</summary>{_e(text[cut:])}</details>"


def _when(iso: str) -> str:
    """``2026-12-04T17:23:09+00:00`` as ``2026-12-04 17:23 UTC`` (any other text as it is)."""
    try:
        moment = _dt.datetime.fromisoformat(iso).astimezone(_dt.timezone.utc)
    except (TypeError, ValueError):
        return str(iso or "")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _causes(overview, row: dict) -> str:
    causes = row.get("causes") or []
    if not causes:
        if row.get("defects"):   # a verdicts.json without causes: the defect counts
            return ", ".join(f"{_e(d)} &times;{n}" for d, n in row["defects"].items())
        if row.get("verdict") == "correct":
            return '<span class="gco-note">none</span>'
        return '<span class="gco-note">no check ran (each test skipped, with its reason)</span>'

    items = []
    for cause in causes:
        name = _link(overview.link(cause.get("test")), f"<b>{_e(cause['defect'])}</b>", cause.get("test") or "")
        items.append(f'<li class="gco-cause">{name} at <code>{_e(cause.get("shape"))}</code> '
                     f'&middot; explains {_plural(int(cause.get("checks", 0)), "check")}</li>')
    return f"<ul>{''.join(items)}</ul>"


def _rate(perf: dict | None) -> str:
    return f"{perf['tflops']:.2f} <span class='gco-note'>N={perf['n']}</span>" if perf else ""


def _previous(overview, row: dict) -> str:
    before = (overview.previous or {}).get("rows", {}).get(row["instance"])
    now = overview_history.entry_row(row)
    flags = overview_history.changes(now, before)
    cells = []
    if before is not None:
        cells.append(_e(overview_history.describe(before)))
        if before.get("tflops") is not None:
            cells.append(f"{before['tflops']:.2f} TFLOP/s")
    flagged = "".join(f' <span class="gco-badge gco-changed">{_e(f)}</span>' for f in flags)
    return "<br>".join(cells) + flagged


def kernels_table(overview) -> str:
    rows = overview.rows
    timed = any(r.get("performance") for r in rows)
    history = overview.previous is not None
    head = ["status", "kernel", "C++ name", "dtype", "expect", "verdict", "root causes (shape, checks explained)"]
    head += ["TFLOP/s"] if timed else []
    head += [f"previous run ({_e(_when(overview.previous.get('generated', '')))})"] if history else []
    body = []
    for row in rows:
        cells = [_badge(row.get("status", "")), f"<b>{_e(row.get('kernel'))}</b><br>"
                 f"<span class='gco-note'>{_e(row.get('instance'))}</span>",
                 f"<code>{_e(row.get('name_expression'))}</code>", _e(row.get("dtype")), _e(row.get("expect")),
                 _e(str(row.get("verdict", "")).replace("_", " ")), _causes(overview, row)]
        if timed:
            cells.append(_rate(row.get("performance")))
        if history:
            cells.append(_previous(overview, row))
        body.append(f'<tr data-instance="{_e(row.get("instance"))}" data-status="{_e(row.get("status"))}">'
                    + "".join(_cell(c, numeric=head[n] == "TFLOP/s") for n, c in enumerate(cells)) + "</tr>")
    return (f"<table id=\"gco-kernels\"><thead><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def counts_line(overview) -> str:
    rows = overview.rows
    checked = [r for r in rows if r.get("status") != "not_checked"]
    correct = sum(1 for r in checked if r.get("verdict") == "correct")
    unexpected = sum(1 for r in checked if r.get("status") == "unexpected")
    symptoms = sum(1 for r in checked if r.get("status") == "symptoms_only")
    parts = [f"{_plural(len(rows), 'instantiation')}: {correct} correct, {len(checked) - correct} defective"]
    if len(rows) > len(checked):
        parts[0] += f", {len(rows) - len(checked)} not checked"
    parts.append(f"<b>{unexpected} not as the catalog declares</b>" if unexpected else "all as the catalog declares"
                 if not symptoms else "")
    if symptoms:
        parts.append(f"{symptoms} showing only symptoms of the declared defect")
    return " &middot; ".join(p for p in parts if p)


def environment_line(environment: dict[str, str]) -> str:
    items = []
    for key, words in HEADLINE:
        if key not in environment:
            continue
        value = environment[key]
        shown, why = value, ""
        found = re.match(r"^(none|not found on PATH|unavailable) \((.*)\)$", value)
        if found:
            shown, why = found.group(1), found.group(2)
        title = f' title="{_e(why)}"' if why else ""
        items.append(f"<span{title}><b>{_e(words)}</b>{_e(shown)}</span>")
    return f'<div class="gco-env">{"".join(items)}</div>' if items else ""


def matrix_section(overview) -> str:
    from gemmcheck.judge.kill_matrix.rows import COLUMN_TITLES

    matrix = overview.matrix
    if not matrix or not matrix.get("rows"):
        why = (f"{', '.join(overview.earlier)} left by an earlier run; this run did not run the hazards suite"
               if any("kill_matrix" in e for e in overview.earlier) else "no kill matrix in this run (suites/hazards)")
        return f'<h2 id="gco-matrix">Kill matrix</h2><p class="gco-note">{_e(why)}</p>'
    settings = matrix.get("settings", {})
    first = COLUMN_TITLES.get(settings.get("detectors", ""), "plain detectors")
    rows = []
    for row in matrix["rows"]:
        status = "as_expected" if row.get("status") == "pass" else "unexpected"
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            _link(overview.matrix_link(row["instance"]), _e(row["instance"])), _e(row.get("declared")),
            _e(row.get("plain", {}).get("label")), _e(row.get("with_sanitizer", {}).get("label")),
            f'<span class="gco-badge gco-{status}">{_e(row.get("status"))}</span>', _long(row.get("why") or "")))
            + f'<td class="gco-num">{float(row.get("seconds", 0)):.1f}</td></tr>')
    head = ("instantiation", "declared", first, "with sanitizer", "result", "why", "s")
    note = f"on {_e(settings.get('backend'))}; with sanitizer: {_e(settings.get('sanitizer'))}"
    return (f'<h2 id="gco-matrix">Kill matrix</h2><p class="gco-note">{note}</p>'
            f"<table><thead><tr>{''.join(f'<th>{_e(h)}</th>' for h in head)}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def performance_section(overview) -> str:
    perf = overview.perf
    if not perf:
        why = (f"{', '.join(overview.earlier)} left by an earlier run; this run did not time kernels"
               if any("perf" in e for e in overview.earlier) else
               "not measured in this run (suites/performance times kernels on a GPU)")
        return f'<h2 id="gco-performance">Performance</h2><p class="gco-note">{_e(why)}</p>'
    dtype_of = {r["instance"]: r.get("dtype") for r in overview.rows}
    ceilings = perf.get("cublas", {})   # the library's GEMM per combination and size (named by "ceiling")
    rows = []
    for key, data in sorted((perf.get("kernels") or {}).items()):
        instance, _, size = key.rpartition("-N")
        peak = data.get("unit_peak_tflops")
        unit = f"{data['unit']} {peak:.1f}" if data.get("unit") and peak else (data.get("unit") or "")
        if data.get("tflops") is None:
            cells = (_e(instance), _e(size), "wrong on its first launch", "", "", _e(data.get("ceiling") or ""), "", _e(unit))
        else:
            base = data.get("interleaved_cublas_tflops") or ceilings.get(f"{dtype_of.get(instance)}-N{size}", {}).get("tflops")
            refused = data.get("impossible") or data.get("last_check_nans") or (data.get("last_check_ratio") or 0) > 1
            cells = (_e(instance), _e(size), "refused" if refused else f"{data['tflops']:.2f}",
                     _spread(data), f"{100 * data['tflops'] / base:.1f}" if base else "n/a",
                     _e(data.get("ceiling") or "cuBLAS"), f"{100 * data['tflops'] / peak:.1f}" if peak else "n/a", _e(unit))
        rows.append("<tr>" + "".join(_cell(c, numeric=n in (1, 2, 3, 4, 6)) for n, c in enumerate(cells)) + "</tr>")
    for key, data in sorted(ceilings.items()):
        label = data.get("ceiling") or f"cuBLAS {key.rpartition('-N')[0]}"
        rows.append(f'<tr><td>{_e(label)}</td><td class="gco-num">{_e(key.rpartition("-N")[2])}'
                    f'</td><td class="gco-num">{data["tflops"]:.2f}</td><td class="gco-num">'
                    f'{_spread(data)}</td><td class="gco-num">100.0</td><td></td><td></td><td></td></tr>')
    head = ("instantiation", "N", "TFLOP/s", "spread", "% ceiling", "ceiling (the vendor library's GEMM)",
            "% unit peak", "unit (peak TFLOP/s)")
    images = "".join(f'<p class="gco-note">{_e(name)}</p><img alt="{_e(name)}" '
                     f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
                     for name, png in overview.rooflines)
    table_text = (f"<details><summary>the suite's table (reports/performance/summary.txt)</summary>"
                  f"<pre>{_e(overview.perf_table)}</pre></details>" if overview.perf_table else "")
    return (f'<h2 id="gco-performance">Performance</h2><p class="gco-note">{_e(perf.get("device"))}</p>'
            f"<table><thead><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{table_text}{images}")


def environment_section(environment: dict[str, str]) -> str:
    if not environment:
        return ('<h2 id="gco-environment">Environment</h2><p class="gco-note">no environment.properties '
                "in the results</p>")
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in environment.items())
    return f'<h2 id="gco-environment">Environment</h2><table>{rows}</table>'


def render(overview, name: str = "gemmcheck") -> str:
    """The overview panel, its opener, style and script: a fragment for the report's body."""
    run = overview.run
    catalogs = run.get("catalogs") or []
    sub = " &middot; ".join(_e(p) for p in (
        f"run of {_when(overview.generated)}" if overview.generated else "",
        f"profile {run.get('profile')}" if run.get("profile") else "",
        overview.environment.get("runs_on", ""),
        ("catalogs " if len(catalogs) > 1 else "catalog ") + ", ".join(map(str, catalogs)) if catalogs else "",
        f"exit status {run.get('exit_status')}" if "exit_status" in run else "") if p)
    return (
        f"<style>{STYLE}</style>"
        f'<div id="{PANEL_ID}" role="main" aria-label="kernel overview">'
        f'<div class="gco-head"><div><h1>{_e(name)}: kernels</h1><p class="gco-sub">{sub}</p></div>'
        f'<a class="gco-button" id="{PANEL_ID}-tests" href="{ALL_TESTS}">All tests (Allure report) &rarr;</a></div>'
        f'<p class="gco-counts">{counts_line(overview)}</p>'
        f"{environment_line(overview.environment)}"
        f'<h2>Kernels <span class="gco-note">(failing first; a root cause links to the test that '
        f"established it)</span></h2>{kernels_table(overview)}"
        f"{matrix_section(overview)}{performance_section(overview)}{environment_section(overview.environment)}"
        f"</div>"
        f'<a id="{PANEL_ID}-open" href="./" hidden>Kernel overview</a>'
        f"<script>{SCRIPT}</script>")


def inject(page: str, fragment: str) -> str:
    """``page`` (the report's index.html) with the overview as the first thing in its body."""
    found = re.search(r"<body[^>]*>", page)
    if not found:
        raise SystemExit("the report's index.html has no <body>: update gemmcheck.report.overview_html "
                         "for this Allure version")
    # The script needs the panel in the DOM; at the start of <body> it runs before the app.
    return page[:found.end()] + fragment + page[found.end():]
