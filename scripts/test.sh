#!/usr/bin/env bash
# Set up .venv (NumPy, pytest, hypothesis and, where pip can find it, torch 2.13.0 as the
# oracle), then run the whole test suite. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -e ".[test]" || {
  echo "torch 2.13.0 could not be installed: oracle tests will skip" >&2
  .venv/bin/python -m pip install -q -e ".[test-no-torch]"
}
exec .venv/bin/python -m pytest -q "$@"
