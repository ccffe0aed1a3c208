#!/usr/bin/env bash
# Set up .venv with ndgrad and the demo's packages, then train the handwritten-digits demo
# (an MLP, then a small CNN; each reaches >= 97% test accuracy). Extra args go to both runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -e ".[examples]"
.venv/bin/python examples/digits.py --model mlp "$@"
.venv/bin/python examples/digits.py --model cnn "$@"
