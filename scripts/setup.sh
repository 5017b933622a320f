#!/usr/bin/env bash
# Create .venv and install dispatchprof (editable) with its test extras.
#
#   scripts/setup.sh          torch==2.13.0 from the default package index (pip's usual choice for this
#                             machine; on a Linux machine with the default index that can be the CUDA build)
#   scripts/setup.sh --cpu    torch==2.13.0 from PyTorch's CPU wheel index
#                             (https://download.pytorch.org/whl/cpu): no CUDA libraries are downloaded
#   DISPATCHPROF_TORCH_INDEX=URL scripts/setup.sh   the same with another index (a mirror)
#
# dispatchprof itself needs no GPU: counting and simulation run on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
INDEX=${DISPATCHPROF_TORCH_INDEX:-}
for arg in "$@"; do
  case "$arg" in
    --cpu) INDEX=https://download.pytorch.org/whl/cpu ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "scripts/setup.sh: unknown option '$arg'; allowed: --cpu, --help" >&2; exit 2 ;;
  esac
done
if [ -x .venv/bin/python ]; then
  echo "dispatchprof: updating .venv (setup.cfg or .ci/constraints.txt changed; about a minute)..."
else
  echo "dispatchprof: first run: creating .venv and installing torch, transformers and the test tools"
  echo "              (a few minutes, once; later runs skip this step)..."
  "$PY" -m venv .venv
fi
if [ -n "$INDEX" ]; then
  echo "dispatchprof: torch 2.13.0 from $INDEX"
  .venv/bin/pip install -q --disable-pip-version-check --index-url "$INDEX" torch==2.13.0
else
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
fi
.venv/bin/pip install -q --disable-pip-version-check -c .ci/constraints.txt -e '.[test]'
# timm for the zoo's timm rows, without its torchvision dependency: no CPU torchvision is built for
# torch 2.13, and timm's classification models run without it (scripts/torchvision_absent.py)
.venv/bin/pip install -q --disable-pip-version-check --no-deps -c .ci/constraints.txt timm
echo "dispatchprof: .venv is ready."
