#!/usr/bin/env bash
# Create .venv and install dispatchprof (editable) with its test extras.
# torch is pinned to 2.13.0: that CPU build installs from the machine's local wheel in
# seconds, where an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then
  echo "dispatchprof: updating .venv (setup.cfg or .ci/constraints.txt changed; about a minute)..."
else
  echo "dispatchprof: first run: creating .venv and installing torch, transformers and the test tools"
  echo "              (a few minutes, once; later runs skip this step)..."
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/pip install -q --disable-pip-version-check -c .ci/constraints.txt -e '.[test]'
echo "dispatchprof: .venv is ready."
