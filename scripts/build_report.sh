#!/usr/bin/env bash
# Build gemmcheck's HTML report from allure results, offline, with the pinned Allure 3 CLI.
#
#   scripts/build_report.sh                       # reports/allure-results -> reports/allure-report/index.html
#   scripts/build_report.sh --single-file         # -> reports/allure-single/index.html (one self-contained file)
#   scripts/build_report.sh --results DIR --output DIR --history FILE
#
# History (trends) is kept in reports/allure-history.jsonl and grows by one entry per build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/allure ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
exec "${PYTHON:-python}" -m gemmcheck.report html "$@"
