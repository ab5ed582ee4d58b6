#!/usr/bin/env bash
# Refresh requirements.lock, the exact versions (with hashes) that .ci/run installs:
# every dependency in pyproject.toml plus the docs extra, resolved for CI's Python and
# platform whatever machine runs this. Commit the result (docs/development.md).
#
#   scripts/lock.sh                           # after editing pyproject.toml: keeps every pin still allowed
#   scripts/lock.sh --upgrade                 # every package to the newest version allowed
#   scripts/lock.sh --upgrade-package numpy   # one package; other arguments go to uv pip compile too
set -euo pipefail
cd "$(dirname "$0")/.."
command -v uv >/dev/null 2>&1 || { echo "scripts/lock.sh: needs uv on PATH; install it with: python -m pip install uv" >&2; exit 2; }
exec uv pip compile pyproject.toml --extra docs --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --generate-hashes -o requirements.lock --quiet "$@"
