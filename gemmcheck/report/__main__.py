"""python -m gemmcheck.report {html, check}: build the HTML report, or validate results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gemmcheck.report.html import ROOT, build_html
from gemmcheck.report.validate import validate_results

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemmcheck.report",
                                     description="gemmcheck reports")
    sub = parser.add_subparsers(dest="command", required=True)
    html = sub.add_parser("html", help="build the allure HTML report (Allure 3 CLI, offline)")
    html.add_argument("--results", type=Path, default=ROOT / "reports" / "allure-results",
                      metavar="DIR", help="allure results (default: reports/allure-results)")
    html.add_argument("--output", type=Path, default=None, metavar="DIR",
                      help="report directory (default: reports/allure-report, or "
                           "reports/allure-single with --single-file)")
    html.add_argument("--history", type=Path, default=ROOT / "reports" / "allure-history.jsonl",
                      metavar="FILE", help="Allure 3 history, appended on every build so trends "
                                           "show; the kernel overview's history is kept beside it "
                                           "(overview-history.jsonl) (default: reports/allure-history.jsonl)")
    html.add_argument("--reports", type=Path, default=None, metavar="DIR",
                      help="the run's verdicts.json, kill_matrix.json and performance/, for the "
                           "kernel overview (default: the results directory's parent)")
    html.add_argument("--single-file", action="store_true",
                      help="one self-contained index.html")
    html.add_argument("--name", default="gemmcheck", help="report name (default: gemmcheck)")
    check = sub.add_parser("check", help="check that an allure-results directory is well formed")
    check.add_argument("results", type=Path, nargs="?", default=ROOT / "reports" / "allure-results")
    args = parser.parse_args(argv)
    if args.command == "check":
        problems = validate_results(args.results)
        for line in problems:
            print(line)
        print(f"{args.results}: {'well formed' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    output = args.output or ROOT / "reports" / ("allure-single" if args.single_file else "allure-report")
    index = build_html(args.results, output, history=args.history, single_file=args.single_file,
                       name=args.name, reports=args.reports)
    if "gemmcheck-overview" not in index.read_text(encoding="utf-8"):
        print(f"no verdicts.json in {args.reports or args.results.parent}: the report has no kernel overview "
              "(pass --reports DIR, the run's reports/ directory)")
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
