"""How much of each dtype's matrix peak GEMMs reach on NVIDIA GPUs, from AIConfigurator's measured GEMMs.

    python scripts/gemm_efficiency.py [--aic-python PYTHON] [--min-dim N]

AIConfigurator (Apache-2.0) ships, per system and engine, the measured latency of GEMMs [m, k] x
[k, n] over a grid of m, n, k (``systems/data/<system>/gemm/<engine>/<version>/gemm_perf.parquet``
in aiconfigurator-core, collected with each engine's own GEMM kernels: bf16, per-tensor fp8,
block-scaled fp8 and NVFP4). For every point whose m, n and k are all at least ``--min-dim``, the
simulator times the same GEMM on the bundled profile with ``compute_efficiency`` 1 and no
per-dtype efficiency (shape efficiency, launch and memory terms as shipped); the implied
efficiency is that time over the measured one. The table gives, per system, dtype and engine, the
median implied efficiency over the compute-bound points (the simulator's compute time at least
twice its memory time), and their count; then, per system and simulated dtype (bf16, fp8: per-tensor
and block-scaled, fp4: NVFP4), the median over every engine's points pooled: the figure
devices/nvidia.yaml's ``matrix_efficiency`` quotes (and the check on its bf16 ``compute_efficiency``).

The data come from the validation environment (``bash scripts/setup_validation.sh``); nothing
here is a dependency of dispatchprof.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aic_env import AIC_PYTHON, aic_path  # noqa: E402

from dispatchprof.results.records import OpRecord  # noqa: E402
from dispatchprof.sim.catalog import load_device  # noqa: E402
from dispatchprof.sim.timing import time_op  # noqa: E402
from op_formulas.matmul import matmul_cost  # noqa: E402

#: AIConfigurator system -> bundled profile
SYSTEMS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200", "gb200": "GB200", "b300_sxm": "B300",
           "gb300": "GB300", "a100_sxm": "A100-80GB", "l40s": "L40S"}
#: AIConfigurator GEMM dtype -> (the simulator's weight dtype, bytes per input element)
DTYPES = {"bfloat16": (None, 2), "fp8": ("fp8", 1), "fp8_block": ("fp8", 1), "nvfp4": ("fp4", 0.5)}


def gemm_record(m: int, n: int, k: int, in_bytes: float) -> OpRecord:
    """The record of [m, k] x [k, n] as dispatchprof counts a linear layer (weights [k, n], bf16 output)."""
    cost = matmul_cost(m, k, n).with_bytes(int((m * k + k * n) * in_bytes), m * n * 2)
    return OpRecord("aten.mm", "", "forward", "bfloat16", cost, shapes=((m, k), (k, n)),
                    param_bytes=int(k * n * in_bytes), param_elements=k * n)


def implied(device, m: int, n: int, k: int, dtype: str, latency_ms: float) -> float | None:
    """Simulated seconds at efficiency 1 over measured seconds, for a compute-bound point; else None."""
    weight_dtype, in_bytes = DTYPES[dtype]
    t = time_op(0, gemm_record(m, n, k, in_bytes), [device], set(), weight_dtype, False)
    if t.t_compute < 2 * t.t_memory:
        return None
    return t.time_s / (latency_ms * 1e-3)


def implied_share(total_s: float, compute_s: float, measured_s: float) -> float | None:
    """The share of the peak a measured kernel implies where the simulator times it at efficiency 1
    as ``total_s`` seconds, ``compute_s`` of them its compute: that compute time over the measured
    time less the rest of the simulated time (memory, launch); None where the rest alone exceeds it."""
    left = measured_s - (total_s - compute_s)
    return compute_s / left if left > 0 else None


def table(folder: str, min_dim: int) -> tuple[list[tuple], dict]:
    """(system, dtype, engine/version, median implied efficiency, points) per parquet and dtype, and
    (system, simulated dtype) -> every engine's implied efficiencies."""
    import pandas as pd
    out, pooled = [], {}
    for path in sorted(glob.glob(os.path.join(folder, "*", "gemm", "*", "*", "gemm_perf.parquet"))):
        system, _, engine, version, _ = os.path.relpath(path, folder).split(os.sep)
        if system not in SYSTEMS:
            continue
        base = load_device(SYSTEMS[system])
        device = dataclasses.replace(base, compute_efficiency=1.0, matrix_efficiency={})
        frame = pd.read_parquet(path)
        frame = frame[(frame.m >= min_dim) & (frame.n >= min_dim) & (frame.k >= min_dim)]
        for dtype, rows in frame.groupby("gemm_dtype"):
            if dtype not in DTYPES or (DTYPES[dtype][0] and DTYPES[dtype][0] not in device.matrix_tflops):
                continue
            values = [v for v in (implied(device, int(r.m), int(r.n), int(r.k), dtype, float(r.latency))
                                  for r in rows.itertuples()) if v is not None]
            if values:
                out.append((system, dtype, f"{engine} {version}", statistics.median(values), len(values)))
                pooled.setdefault((system, DTYPES[dtype][0] or "bf16"), []).extend(values)
    return out, pooled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aic-python", default=AIC_PYTHON)
    ap.add_argument("--min-dim", type=int, default=1024)
    args = ap.parse_args()
    rows, pooled = table(aic_path(args.aic_python, "systems", "data"), args.min_dim)
    print(f"{'system':12s}{'dtype':11s}{'engine':22s}{'efficiency':>11s}{'points':>8s}")
    for system, dtype, engine, eff, n in rows:
        print(f"{system:12s}{dtype:11s}{engine:22s}{eff:11.3f}{n:8d}")
    print(f"\nevery engine pooled\n{'system':12s}{'profile':11s}{'dtype':6s}{'efficiency':>11s}{'points':>8s}")
    for (system, dtype), values in sorted(pooled.items()):
        print(f"{system:12s}{SYSTEMS[system]:11s}{dtype:6s}{statistics.median(values):11.3f}{len(values):8d}")


if __name__ == "__main__":
    main()
