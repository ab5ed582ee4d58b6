"""The HTML report: allure-results -> Allure 3 CLI -> index.html, offline, analytics stripped,
the kernel overview (gemmcheck.report.overview) as its first screen."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from gemmcheck.report import overview as _overview, overview_history, overview_html
from gemmcheck.report.categories import allure3_categories

ROOT = Path(__file__).resolve().parents[2]   # the repository (gemmcheck/report/html.py)
ANALYTICS = re.compile(
    r"\s*<script async src=\"https://www\.googletagmanager\.com/[^\"]*\"></script>"
    r"\s*<script>(?:(?!</script>).)*?gtag\((?:(?!</script>).)*?</script>", re.S)


def allure_cli(root: Path = ROOT) -> Path:
    cli = root / "node_modules" / ".bin" / "allure"
    if not cli.exists():
        raise SystemExit(f"{cli} not found: run `npm ci` in {root} first (package.json pins the "
                         "Allure 3 CLI)")
    return cli


def allure_config(output: Path, history: Path, *, single_file: bool, name: str) -> dict:
    return {
        "name": name,
        "output": str(output),
        "historyPath": str(history),
        "categories": allure3_categories(),
        "plugins": {"awesome": {"options": {
            "reportName": name,
            "singleFile": single_file,
            "groupBy": ["feature", "story"],
        }}},
    }


def strip_analytics(html: str) -> str:
    """Remove the Google Analytics tag the Allure 3 report template always adds."""
    return ANALYTICS.sub("", html)


def build_html(results: Path, output: Path, *, history: Path, single_file: bool = False,
               name: str = "gemmcheck", root: Path = ROOT, reports: Path | None = None) -> Path:
    """Build the HTML report from an allure-results directory, offline; return index.html.
    ``reports`` (default: the results directory's parent) holds the run's verdicts.json,
    kill_matrix.json and performance/, from which the kernel overview is made; the overview's
    history is kept beside ``history``."""
    results, output, history = Path(results).resolve(), Path(output).resolve(), Path(history).resolve()
    reports = Path(reports).resolve() if reports is not None else results.parent
    if not results.is_dir() or not any(results.glob("*-result.json")):
        raise SystemExit(f"{results}: no allure results (*-result.json); run pytest first")
    cli = allure_cli(root)
    history.parent.mkdir(parents=True, exist_ok=True)
    config = output.parent / f".allurerc-{output.name}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(allure_config(output, history, single_file=single_file, name=name),
                                 indent=2))
    if output.exists():
        shutil.rmtree(output)
    env = dict(os.environ, NO_UPDATE_NOTIFIER="1", CI=os.environ.get("CI", "true"))
    proc = subprocess.run([str(cli), "generate", str(results), "--config", str(config),
                           "--output", str(output)], cwd=root, env=env, text=True,
                          capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"allure generate failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    index = output / "index.html"
    for page in output.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        cleaned = strip_analytics(text)
        if "googletagmanager" in cleaned:
            raise SystemExit(f"{page}: an analytics script is left after stripping; "
                             "update gemmcheck.report.ANALYTICS for this Allure version")
        if cleaned != text:
            page.write_text(cleaned, encoding="utf-8")
    add_overview(index, results, reports, history, name)
    return index


def add_overview(index: Path, results: Path, reports: Path, history: Path, name: str) -> bool:
    """Make the kernel overview the first screen of ``index``; False when the run left no
    verdicts.json in ``reports`` (then the report opens on Allure's tree, as before)."""
    overview = _overview.collect(results, reports)
    if overview is None:
        return False
    overview.previous = overview_history.record(overview_history.history_path(history),
                                                overview_history.entry(overview))
    index.write_text(overview_html.inject(index.read_text(encoding="utf-8"), overview_html.render(overview, name)),
                     encoding="utf-8")
    return True


