"""Fit the NVFP4 kernel figures of the Blackwell profiles on AIConfigurator's B200 NVFP4 rows.

    python scripts/fp4_fit.py [--split fit|held-out] [--grid EFF:US,...] [--aic-python PYTHON]

The rows: every aggregated Llama-3.1-70B NVFP4 row on B200 of the silicon sample
(scripts/serving_rows.py: vLLM and TensorRT-LLM, TP 1-8, 4-128 clients), of ``--split`` (the
fixed rule of serving_rows.split_of). Each grid point EFF:US simulates them with the B200 profile's
``weight_only_efficiency`` fp4 = EFF and ``weight_only_kernel_us`` fp4 = US (every other field as
shipped) and prints the median |error| and median signed error of mean TPOT and TTFT per engine,
and the signed TPOT median per tensor-parallel size. The point with the least median |TPOT error|
on the fit rows is what devices/nvidia.yaml ships (1.0:0 is the profile without either). Each
grid point counts Llama-3.1-70B again (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import statistics
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import serving_rows  # noqa: E402
import validate_serving  # noqa: E402

from dispatchprof.llm.models import build_model  # noqa: E402
from dispatchprof.serving.repeat import CountMemo  # noqa: E402
from dispatchprof.serving.serve import prepare_serving  # noqa: E402
from dispatchprof.sim.catalog import load_device  # noqa: E402

MODEL, DEVICE = "llama-3.1-70b", "B200"


def grid_point(text: str) -> tuple[float, float]:
    """``EFF:US`` -> (weight_only_efficiency, weight_only_kernel_us) for fp4."""
    try:
        eff, us = (float(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a grid point is EFF:US such as 0.9:2.5, got {text!r}") from None
    if not (0 < eff <= 1 and us >= 0):
        raise argparse.ArgumentTypeError(f"EFF must be in (0, 1] and US >= 0, got {text!r}")
    return eff, us


def predictions(rows: list, eff: float, us: float) -> list[tuple]:
    """(row, {metric: seconds}) of ``rows`` on the B200 profile with fp4 figures ``eff`` and ``us``."""
    base = load_device(DEVICE)
    device = dataclasses.replace(base, weight_only_efficiency={**base.weight_only_efficiency, "fp4": eff},
                                 weight_only_kernel_us={**base.weight_only_kernel_us, "fp4": us})
    memo, setups, out = CountMemo(build_model(MODEL, generator=True)), {}, []
    for r in rows:
        key = (r.tp, r.kv_dtype, r.engine, r.engine_version)
        if key not in setups:
            setups[key] = prepare_serving(memo.model, device, weight_dtype="fp4", kv_dtype=r.kv_dtype,
                                          runtime="serving", tp=r.tp, engine=r.engine,
                                          engine_version=r.engine_version, counts=memo)
        out.append((r, validate_serving.predict_row(r, setups[key])))
    return out


def report(point: tuple[float, float], out: list[tuple]) -> None:
    def errors(metric, keep=lambda r: True):
        return [p[metric] / r.measured[metric] - 1 for r, p in out if keep(r) and metric in p]
    by_tp = collections.defaultdict(list)
    for r, p in out:
        by_tp[r.tp].append(p["tpot_mean"] / r.measured["tpot_mean"] - 1)
    print(f"{point[0]}:{point[1]}  TPOT signed by tp: "
          + ", ".join(f"tp{tp} {100 * statistics.median(e):+.1f}%" for tp, e in sorted(by_tp.items())))
    for engine in ("vllm", "trtllm", "all"):
        for metric in ("tpot_mean", "ttft_mean"):
            e = errors(metric, lambda r: engine == "all" or r.engine == engine)
            print(f"  {engine:6} {metric:9} rows {len(e):3}  median |error| {100 * statistics.median(map(abs, e)):5.1f}%"
                  f"  median error {100 * statistics.median(e):+5.1f}%")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", choices=("fit", "held-out"), default="fit")
    p.add_argument("--grid", type=lambda s: [grid_point(t) for t in s.split(",")],
                   default=[grid_point(t) for t in "1.0:0,0.9:2,0.9:2.5,1.0:2.5,0.8:3".split(",")])
    p.add_argument("--aic-python", default=validate_serving.AIC_PYTHON)
    args = p.parse_args()
    rows, _ = serving_rows.aic_rows(validate_serving.silicon_sample(args.aic_python))
    rows = [r for r in rows if r.device == DEVICE and r.model == MODEL and r.weight_dtype == "fp4"
            and r.split == args.split and r.disagg is None]
    print(f"{len(rows)} {args.split} rows: {MODEL} NVFP4 on {DEVICE}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for point in args.grid:
            report(point, predictions(rows, *point))


if __name__ == "__main__":
    main()
