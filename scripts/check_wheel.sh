#!/usr/bin/env bash
# Build a wheel, install it into a fresh venv (no repo on the path) and count a small model
# from a directory outside the repository.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$repo/.venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$work/dist" "$repo"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check torch==2.13.0
"$work/venv/bin/pip" install -q --disable-pip-version-check -c "$repo/.ci/constraints.txt" "$work"/dist/dispatchprof-*.whl
cd "$work"
"$work/venv/bin/python" - <<'PY'
import torch, dispatchprof, op_formulas
from dispatchprof import OpCounter, list_devices
assert len(list_devices()) == 37 and "MI250X-GCD" in list_devices(), list_devices()
assert "site-packages" in dispatchprof.__file__ and "site-packages" in op_formulas.__file__, dispatchprof.__file__
import pathlib
assert (pathlib.Path(dispatchprof.__file__).parent / "py.typed").is_file(), "py.typed missing from the wheel"
lin = torch.nn.Linear(8, 4)
with OpCounter(devices="PIM-AI-1chip") as c:
    lin(torch.randn(2, 8))
t = c.total()
assert (t.macs, t.mult, t.add) == (64, 64, 64), t
assert c.simulated().total.time_s > 0
from dispatchprof.flops_profiler import get_model_profile   # a subpackage: listed in setup.cfg
assert get_model_profile(lin, input_shape=(2, 8), print_profile=False) == ("128 ", "64 MACs", "36")
from dispatchprof.serving.datasets import dataset_lengths
from dispatchprof.serving.engines import engine_preset
assert engine_preset("vllm").block_size == 16 and dataset_lengths("azure-conv")[0].quantiles[50] == 1020.0
print(f"wheel ok: dispatchprof {dispatchprof.__version__} from {dispatchprof.__file__}: {t.macs} MACs")
PY
