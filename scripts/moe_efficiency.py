"""How much of each dtype's matrix peak engines' grouped expert GEMMs reach on NVIDIA GPUs, from
AIConfigurator's measured mixture-of-experts kernels.

    python scripts/moe_efficiency.py [--aic-python PYTHON] [--min-rows N] [--models NAME,...]

AIConfigurator (Apache-2.0) ships, per system and engine, the measured latency of one MoE layer's
routed experts (``systems/data/<system>/moe/<engine>/<version>/moe_perf.parquet`` in
aiconfigurator-core: routing, permutation, the grouped gate/up and down GEMMs, activation and
combine, with each engine's own kernels) over token counts, expert shapes, dtypes and routing
distributions. Every bundled mixture-of-experts model whose (hidden, expert intermediate, top-k,
experts) the tables hold is counted as dispatchprof counts it (one forward of T tokens through the
model cut to its first MoE layer, `dispatchprof.llm.layer_repeat.shallow_model`; balanced routing)
and simulated under the serving runtime on the bundled profile, and its routed experts' time
(`dispatchprof.sim.runtime.is_routed_expert`) is set beside the measured layer: expert
parallelism and expert tensor parallelism 1, AIConfigurator's default routing (``power_law``
with alpha 1.01, `aiconfigurator_core.sdk.config`), dtypes whose GEMMs compute in the dtype the
simulator times them at (bf16; fp8: per-tensor and block-scaled; fp4: NVFP4; the weight-only
w4a8 kernels are left out; gpt-oss's w4a16 MXFP4 experts are checked, never in a figure).

**Implied efficiency.** At a point with at least ``--min-rows`` token rows per expert (T x top-k /
experts: a grouped GEMM's tiles full), the simulator's compute time of the experts' GEMMs at
efficiency 1 (shape efficiency, memory and launch terms as shipped) over the measured time less
the simulator's time of everything else in the routed experts (their other ops, launches). The
first table gives its median per system, dtype and engine; the second, per system and simulated
dtype, the median over every engine's and model's points pooled: the figure devices/nvidia.yaml's
``expert_matrix_efficiency`` quotes. The third checks the profiles as bundled: median |error| and
signed error of the simulated routed experts' time against the measured one, at every point with
at least 8 rows per expert, with and without ``expert_matrix_efficiency``.

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
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aic_env import AIC_PYTHON, aic_path  # noqa: E402
from gemm_efficiency import SYSTEMS, implied_share  # noqa: E402

import torch  # noqa: E402

from dispatchprof.count.counter import OpCounter  # noqa: E402
from dispatchprof.llm.catalog import catalog  # noqa: E402
from dispatchprof.llm.layer_repeat import prefix_layers, shallow_model  # noqa: E402
from dispatchprof.llm.models import build_model, token_ids  # noqa: E402
from dispatchprof.serving.layout import moe_of  # noqa: E402
from dispatchprof.sim.catalog import load_device  # noqa: E402
from dispatchprof.sim.placement import scenarios_of  # noqa: E402
from dispatchprof.sim.runtime import is_routed_expert  # noqa: E402
from dispatchprof.sim.simulate import simulate  # noqa: E402

#: AIConfigurator MoE dtype -> the simulator's weight dtype (None: the model's bf16)
DTYPES = {"bfloat16": None, "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
#: Weight-only kernels, checked but never in a figure: gpt-oss's MXFP4 experts with bf16 activations
#: (the simulator's ``weight_dtype="mxfp4"``)
WEIGHT_ONLY = {"w4a16_mxfp4": "mxfp4"}
#: AIConfigurator's default routing (sdk/config.py workload_distribution "power_law", alpha 1.01)
DISTRIBUTION = "power_law_1.01"
#: Token counts counted and looked up in the tables
TOKENS = (256, 512, 1024, 2048, 4096, 8192, 16384)
#: Rows per expert from which the check table compares (below it few experts run at all)
CHECK_ROWS = 8


def expert_shape(config) -> tuple[int, int, int, int] | None:
    """(hidden, expert intermediate, top-k, experts) of a catalog config, or None without routed experts."""
    moe = moe_of(config)
    if moe is None:
        return None
    inter = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    return config.hidden_size, inter, moe[1], moe[0]


def counted_layers(model, tokens: tuple[int, ...]) -> dict[int, object]:
    """Per token count, the profile of one forward through ``model`` cut after its first MoE layer."""
    model = shallow_model(model, prefix_layers(model.config) + 1)
    out = {}
    for t in tokens:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.no_grad(), OpCounter() as c:
                model(input_ids=token_ids(model, 1, t), use_cache=False)
        out[t] = c.profile
    return out


def expert_times(profile, device, weight_dtype) -> tuple[float, float]:
    """(simulated seconds of the routed experts, of which the GEMMs' compute at the profile's
    efficiency) under the serving runtime on ``device``."""
    sim = simulate(profile, scenarios_of(device)[device.name], weight_dtype=weight_dtype, runtime="serving")
    ops = [(o, r) for o, r in zip(sim.ops, sim.records) if is_routed_expert(r.scope)]
    total = sum(o.time_s for o, _ in ops)
    compute = sum(o.t_compute for o, r in ops if r.cost.macs)
    return total, compute


def kernel_points(folder: str, system: str, shape: tuple[int, int, int, int]):
    """(engine version, kernel, AIC dtype, tokens, measured seconds) of ``system``'s measured MoE
    layers of ``shape`` (expert TP and EP 1, `DISTRIBUTION`, dtypes in `DTYPES` and `WEIGHT_ONLY`)."""
    import pandas as pd
    h, inter, k, e = shape
    for path in sorted(glob.glob(os.path.join(folder, system, "moe", "*", "*", "moe_perf.parquet"))):
        engine, version = os.path.relpath(path, folder).split(os.sep)[2:4]
        f = pd.read_parquet(path)
        f = f[(f.hidden_size == h) & (f.inter_size == inter) & (f.topk == k) & (f.num_experts == e)
              & (f.moe_tp_size == 1) & (f.moe_ep_size == 1) & (f.distribution == DISTRIBUTION)
              & f.moe_dtype.isin([*DTYPES, *WEIGHT_ONLY]) & f.num_tokens.isin(list(TOKENS))]
        for r in f.itertuples():
            yield f"{engine} {version}", r.kernel_source, r.moe_dtype, int(r.num_tokens), float(r.latency) * 1e-3


def collect(folder: str, models: list[str]) -> list[dict]:
    """One entry per measured point of a counted model: the simulated times at efficiency 1 and as bundled."""
    seen, points = set(), []
    for name in models:
        model = build_model(name)
        shape = expert_shape(model.config)
        if shape is None or shape in seen:                         # DeepSeek-R1 is DeepSeek-V3's shape
            continue
        seen.add(shape)
        measured = {s: list(kernel_points(folder, s, shape)) for s in SYSTEMS}
        tokens = tuple(sorted({p[3] for ps in measured.values() for p in ps}))
        if not tokens:
            continue
        profiles = counted_layers(model, tokens)
        for system, rows in measured.items():
            bundled = load_device(SYSTEMS[system])
            devices = {"one": dataclasses.replace(bundled, compute_efficiency=1.0, matrix_efficiency={},
                                                  expert_matrix_efficiency={}),
                       "dense": dataclasses.replace(bundled, expert_matrix_efficiency={}), "bundled": bundled}
            sims = {}
            for engine, kernel, dtype, t, seconds in rows:
                weight = DTYPES[dtype] if dtype in DTYPES else WEIGHT_ONLY[dtype]
                if dtype in DTYPES and weight and weight not in bundled.matrix_tflops:
                    continue                                # no peak of its own to take a figure
                if (t, weight) not in sims:
                    sims[t, weight] = {k: expert_times(profiles[t], d, weight) for k, d in devices.items()}
                s = sims[t, weight]
                points.append(dict(system=system, profile=SYSTEMS[system], model=name, engine=engine, kernel=kernel,
                                   dtype=dtype, simulated=(weight or "bf16") if dtype in DTYPES else dtype, tokens=t,
                                   rows=t * shape[2] / shape[3], measured=seconds, one=s["one"],
                                   dense=s["dense"][0], bundled=s["bundled"][0]))
    return points


def implied(p: dict) -> float | None:
    """The implied efficiency of one point (module docstring), None where the rest of the experts'
    time already exceeds the measured time."""
    total, compute = p["one"]
    return implied_share(total, compute, p["measured"])


def _median_line(values: list[float]) -> str:
    return f"{statistics.median(values):11.3f}{len(values):8d}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aic-python", default=AIC_PYTHON)
    ap.add_argument("--min-rows", type=float, default=128.0, help="rows per expert of the points the figure uses")
    ap.add_argument("--models", default="", help="comma-separated catalog names (default: every MoE model)")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else sorted(catalog())
    points = collect(aic_path(args.aic_python, "systems", "data"), models)
    by_engine, pooled = {}, {}
    for p in points:
        v = implied(p) if p["rows"] >= args.min_rows and p["dtype"] in DTYPES else None
        if v is not None:
            by_engine.setdefault((p["system"], p["dtype"], p["engine"]), []).append(v)
            pooled.setdefault((p["system"], p["simulated"]), []).append(v)
    print(f"implied efficiency at >= {args.min_rows:g} rows per expert\n"
          f"{'system':12s}{'dtype':11s}{'engine':20s}{'efficiency':>11s}{'points':>8s}")
    for (system, dtype, engine), values in sorted(by_engine.items()):
        print(f"{system:12s}{dtype:11s}{engine:20s}" + _median_line(values))
    print("\nevery engine and model pooled\n"
          + f"{'system':12s}{'profile':11s}{'dtype':6s}{'efficiency':>11s}{'points':>8s}")
    for (system, dtype), values in sorted(pooled.items()):
        print(f"{system:12s}{SYSTEMS[system]:11s}{dtype:6s}" + _median_line(values))
    print(f"\nrouted experts' time against the measured layer, points with >= {CHECK_ROWS} rows per expert\n"
          f"{'profile':11s}{'dtype':12s}{'points':>7s}{'dense |err|':>13s}{'signed':>8s}"
          f"{'bundled |err|':>15s}{'signed':>8s}")
    groups = {}
    for p in points:
        if p["rows"] >= CHECK_ROWS:
            groups.setdefault((p["profile"], p["simulated"]), []).append(p)
            groups.setdefault(("every", "w4a16_mxfp4" if p["dtype"] in WEIGHT_ONLY else "bf16/fp8/fp4"), []).append(p)
    for (profile, dtype), ps in sorted(groups.items(), key=lambda g: (g[0][0] == "every", g[0])):
        cells = []
        for key in ("dense", "bundled"):
            errors = [p[key] / p["measured"] - 1 for p in ps]
            cells.append(f"{statistics.median(map(abs, errors)):12.1%} {statistics.median(errors):+7.1%}")
        print(f"{profile:11s}{dtype:12s}{len(ps):7d}" + "  ".join(cells))


if __name__ == "__main__":
    main()
