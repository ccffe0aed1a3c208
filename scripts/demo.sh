#!/usr/bin/env bash
# Set up .venv with ndgrad and run the training demo.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -e .
exec .venv/bin/python examples/fit_demo.py "$@"
