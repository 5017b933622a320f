"""Prefill attention kernels against AIConfigurator's measured ones: grouped-query attention, and
multi-head latent attention in both prefill forms.

    python scripts/attention_kernels.py [--aic-python PYTHON]

AIConfigurator (Apache-2.0) ships, per system and engine, the measured latency of one layer's
context (prefill) attention kernel alone, in aiconfigurator-core's
``systems/data/<system>/{attention,mla}/<engine>/<version>/``:

- ``context_attention_perf.parquet``: causal attention of head dim 128 (no sliding window, bf16,
  the KV cache in bf16) over query and key/value heads per GPU, batch and prompt length; compared at
  `GQA_HEADS` as a one-layer Llama-3.1 with those heads counts it;
- ``context_mla_perf.parquet``: DeepSeek-V3's context MLA kernel (TensorRT-LLM's and SGLang's FMHA
  over heads of qk_nope 128 + rope 64 with values of 128: the expanded, MHA form) over heads per GPU
  (128 / tp); compared at `MLA_HEADS` as a one-layer DeepSeek-V3 with those heads counts it, in both
  prefill forms of `dispatchprof.llm.mla`: ``expanded`` (what the catalog builds) and ``absorbed``.

Each point's fused attention op (one forward of batch x prompt tokens) is simulated under the
serving runtime on the bundled profile (a causal flash kernel: the score tiles its mask leaves),
at prompts of 1,024 to 8,192 tokens and batches 1 and 4.

**Implied efficiency** (fitted on the grouped-query points only): per point, the simulator's compute
time of the attention op at efficiency 1 over the measured time less the rest of its simulated time
(memory, launch); the first tables give its median per system and engine and pooled per system
over every engine: rounded to two places, each NVIDIA profile's ``attention_efficiency`` (bf16 and
fp16, devices/nvidia.yaml); the third, per system, the work curve the points imply (`work_curve`:
per band of the op's work on one GPU, the median work and the median implied efficiency), the
points a profile's ``attention_work_curve`` takes (dispatchprof.sim.timing.work_fraction; no
bundled profile sets one). The next table checks, per system and engine, median |error| and
signed median error of the simulated time against the measured kernel as bundled: grouped-query
attention (the fit points) and MLA in both forms (held out: no MLA point chose a figure).

**Decode.** The third table checks decode attention as bundled (``generation_attention_perf`` and
``generation_mla_perf``: one new token per sequence after 1,023 to 8,191 cached ones, batches 8 and
64, the same heads): each point counted as one decode step of the same one-layer model after its
cached tokens (MLA absorbed, as FlashMLA runs it), its fused attention op simulated as above.

**FP8** (held out): the same prefill and decode shapes with the KV cache in fp8 (the engines'
fp8-KV kernels; TensorRT-LLM's and SGLang's FP8 attention beside them), each simulated as a
``kv_dtype="fp8"`` run is: the KV bytes narrowed, attention at the bf16 figure. Last, the measured
decode time with the KV cache in fp8 over bf16 on the same shapes, median per engine; and the fit
points' implied efficiency by prompt length and heads per GPU (it grows with the kernel's work).

The data come from the validation environment (``bash scripts/setup_validation.sh``); nothing
here is a dependency of dispatchprof.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import glob
import math
import os
import statistics
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aic_env import AIC_PYTHON, aic_path  # noqa: E402
from gemm_efficiency import SYSTEMS, implied_share  # noqa: E402

import torch  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from dispatchprof.count.counter import OpCounter  # noqa: E402
from dispatchprof.llm.mla import set_mla_prefill  # noqa: E402
from dispatchprof.llm.catalog import load_config  # noqa: E402
from dispatchprof.llm.models import build_model, token_ids  # noqa: E402
from dispatchprof.sim.catalog import load_device  # noqa: E402
from dispatchprof.sim.placement import scenarios_of  # noqa: E402
from dispatchprof.sim.simulate import simulate  # noqa: E402

#: (query, key/value) heads per GPU of the grouped-query points: Llama-3.1-70B's 64 / 8 over tp 1..8
GQA_HEADS = ((64, 8), (32, 4), (16, 2), (8, 1))
#: Heads per GPU of the MLA points: DeepSeek-V3's 128 over tp 1..8
MLA_HEADS = (128, 64, 32, 16)
BATCHES, PROMPTS = (1, 4), (1024, 4096, 8192)
#: Decode points: batches and cached tokens (the tables' ``step``)
DECODE_BATCHES, CONTEXTS = (8, 64), (1023, 4095, 8191)


def counted_attention(kind: str, heads: tuple[int, int] | int, batch: int, prompt: int, context: int = 0):
    """The profile of one forward of batch x prompt tokens through one decoder layer: Llama-3.1's
    with ``heads`` (query, key/value) heads of 128 (``kind`` "gqa"), or DeepSeek-V3's with ``heads``
    heads, prefilled in the MLA form ``kind``; after ``context`` cached tokens (counted apart) where
    given."""
    if kind == "gqa":
        config = copy.deepcopy(load_config("llama-3.1-8b"))
        config.num_attention_heads, config.num_key_value_heads = heads
        config.head_dim, config.hidden_size = 128, 128 * heads[0]
    else:
        config = copy.deepcopy(load_config("deepseek-v3"))
        config.first_k_dense_replace = 1
        config.num_attention_heads = config.num_key_value_heads = heads
    config.num_hidden_layers, config.intermediate_size, config.vocab_size = 1, 256, 1024   # not compared
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(config, dtype=torch.bfloat16)
        if kind != "gqa":
            set_mla_prefill(model, kind)
        cache = DynamicCache(config=model.config) if context else None
        with torch.no_grad():
            if context:
                model(input_ids=token_ids(model, batch, context), past_key_values=cache, use_cache=True)
            with OpCounter() as c:
                model(input_ids=token_ids(model, batch, prompt), past_key_values=cache, use_cache=bool(context))
    return c.profile


def attention_time(profile, device, kv_dtype: str | None = None) -> tuple[float, float, float]:
    """(simulated seconds of the profile's fused attention op under the serving runtime, the KV
    cache stored in ``kv_dtype`` (None: the model's bf16), of which its compute time; its work in
    FLOP on one device, the score tiles a causal flash kernel computes)."""
    sim = simulate(profile, scenarios_of(device)[device.name], runtime="serving", kv_dtype=kv_dtype)
    (op,) = [o for o, r in zip(sim.ops, sim.records) if r.op == "aten.scaled_dot_product_attention"]
    return op.time_s, op.t_compute, op.work


def kernel_tables(folder: str, phase: str, batches: tuple[int, ...], length: str, lengths: tuple[int, ...],
                  kv: str = "bfloat16", attn: str = "bfloat16"):
    """(system, "engine version", table, rows) of every measured ``phase`` ("context" or
    "generation") attention or MLA table of `SYSTEMS`, its rows at the compared shapes: ``batches``,
    ``lengths`` of column ``length``, the KV cache in ``kv`` ("bfloat16" or "fp8"), head dim 128
    and no sliding window (attention, its kernel in ``attn``) at `GQA_HEADS`, or `MLA_HEADS` (MLA
    in bf16: the tables hold no other)."""
    import pandas as pd
    for system in SYSTEMS:
        for path in sorted(glob.glob(os.path.join(folder, system, "*", "*", "*", f"{phase}_*_perf.parquet"))):
            table, engine, version = os.path.relpath(path, folder).split(os.sep)[1:4]
            if table not in ("attention", "mla"):
                continue
            f = pd.read_parquet(path)
            f = f[f.batch_size.isin(batches) & f[length].isin(lengths) & (f.kv_cache_dtype == kv)]
            if table == "attention":
                full = f.window_size == 0 if "window_size" in f else True          # older tables: no windows
                f = f[(f.head_dim == 128) & full & (f.attn_dtype == attn)]
                f = f[[pair in set(GQA_HEADS) for pair in zip(f.num_heads, f.num_key_value_heads)]]
            elif attn == "bfloat16":
                f = f[(f.mla_dtype == "bfloat16") & f.num_heads.isin(MLA_HEADS)]
            else:
                continue
            if len(f):
                yield system, f"{engine} {version}", table, f


def measured_points(folder: str, kv: str = "bfloat16", attn: str = "bfloat16"):
    """(system, "engine version", kinds, heads, batch, prompt, measured seconds) of every measured
    prefill kernel at the compared shapes (`kernel_tables`, ``kv`` and ``attn`` as there); kinds:
    what it is compared with ("gqa", or MLA's "absorbed" and "expanded")."""
    for system, engine, table, f in kernel_tables(folder, "context", BATCHES, "isl", PROMPTS, kv, attn):
        for r in f.itertuples():
            gqa = table == "attention"
            yield (system, engine, ("gqa",) if gqa else ("absorbed", "expanded"),
                   (int(r.num_heads), int(r.num_key_value_heads)) if gqa else int(r.num_heads),
                   int(r.batch_size), int(r.isl), float(r.latency) * 1e-3)


def decode_points(folder: str, kv: str = "bfloat16"):
    """(system, "engine version", kind, heads, batch, context, measured seconds) of every measured
    bf16 decode kernel at the compared shapes (`kernel_tables`: one new token per sequence after
    ``step`` cached ones, the KV cache in ``kv``); kind: "gqa" or "mla" (absorbed)."""
    for system, engine, table, f in kernel_tables(folder, "generation", DECODE_BATCHES, "step", CONTEXTS, kv):
        for r in f.itertuples():
            gqa = table == "attention"
            yield (system, engine, "gqa" if gqa else "mla",
                   (int(r.num_heads), int(r.num_key_value_heads)) if gqa else int(r.num_heads),
                   int(r.batch_size), int(r.step), float(r.latency) * 1e-3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aic-python", default=AIC_PYTHON, help="the validation environment's python")
    args = ap.parse_args()
    folder = aic_path(args.aic_python, "systems", "data")
    points = list(measured_points(folder))
    systems = sorted({p[0] for p in points})
    count = functools.cache(counted_attention)
    device = functools.cache(lambda system: load_device(SYSTEMS[system]))
    bundled = {s: device(s) for s in systems}
    one = {s: dataclasses.replace(d, attention_efficiency={"bf16": 1.0}, attention_work_curve={})
           for s, d in bundled.items()}
    shapes = sorted({(kind, p[3], p[4], p[5]) for p in points for kind in p[2]}, key=str)
    profiles = {shape: count(*shape) for shape in shapes}
    sims = {(s, *shape): (attention_time(profiles[shape], bundled[s]), attention_time(profiles[shape], one[s]))
            for shape in shapes for s in systems}

    by_engine: dict[tuple[str, str], list[float]] = {}
    by_shape: dict[tuple[str, int, int], list[float]] = {}
    by_work: dict[str, list[tuple[float, float]]] = {}
    for system, engine, kinds, heads, batch, prompt, seconds in points:
        if kinds == ("gqa",):
            total, compute, work = sims[system, "gqa", heads, batch, prompt][1]
            share = implied_share(total, compute, seconds)
            if share is not None:
                by_engine.setdefault((system, engine), []).append(share)
                by_shape.setdefault((system, prompt, heads[0]), []).append(share)
                by_work.setdefault(system, []).append((work * 1e-9, share))
    pooled = {s: statistics.median(v for (system, _), vs in by_engine.items() if system == s for v in vs)
              for s in systems if any(system == s for system, _ in by_engine)}
    print("implied attention efficiency (bf16), grouped-query points\n"
          f"{'system':10} {'engine':18} {'efficiency':>10} {'points':>6}")
    for (system, engine), values in sorted(by_engine.items()):
        print(f"{system:10} {engine:18} {statistics.median(values):10.3f} {len(values):6d}")
    print(f"\nevery engine pooled\n{'system':10} {'profile':18} {'efficiency':>10}")
    for system, value in sorted(pooled.items()):
        print(f"{system:10} {SYSTEMS[system]:18} {value:10.3f}")
    print("\nwork curve (bf16): per band of work on one GPU (GFLOP from 2 x 4^k to 2 x 4^(k+1)), the median "
          "work and the median implied efficiency of its points, every engine pooled: the points of a"
          " profile's attention_work_curve\n" f"{'profile':18} points (GFLOP: efficiency, points)")
    for system, pairs in sorted(by_work.items()):
        print(f"{SYSTEMS[system]:18} " + "  ".join(f"{g:.3g}: {e:.2f} ({n})" for g, e, n in work_curve(pairs)))

    columns = ("gqa", "expanded", "absorbed")
    errors: dict[tuple[str, str], dict[str, list[float]]] = {}
    for system, engine, kinds, heads, batch, prompt, seconds in points:
        cell = errors.setdefault((system, engine), {})
        for kind in kinds:
            cell.setdefault(kind, []).append(sims[system, kind, heads, batch, prompt][0][0] / seconds - 1)
    print("\nsimulated against measured: points, median |error| / signed\n"
          f"{'system':10} {'engine':18}" + "".join(f"{c:>30}" for c in columns))
    _table(errors, columns)

    decode = ("gqa", "mla")
    print("\ndecode (one token after 1,023 to 8,191 cached, batches 8 and 64): points, median |error| / signed\n"
          f"{'system':10} {'engine':18}" + "".join(f"{c:>30}" for c in decode))
    _table(decode_errors(folder, "bfloat16", count, device), decode)

    print("\nheld out, the KV cache in fp8 (simulated with kv_dtype fp8; attention timed at the bf16 figure)\n"
          "prefill: points, median |error| / signed\n"
          f"{'system':10} {'engine':18}" + "".join(f"{c:>30}" for c in FP8_PREFILL))
    errors = {}
    for attn, suffix in (("bfloat16", ", fp8 KV"), ("fp8", ", fp8 FMHA")):
        for system, engine, kinds, heads, batch, prompt, seconds in measured_points(folder, "fp8", attn):
            for kind in kinds:
                t = attention_time(count(kind, heads, batch, prompt), device(system), "fp8")[0]
                errors.setdefault((system, engine), {}).setdefault(kind + suffix, []).append(t / seconds - 1)
    _table(errors, FP8_PREFILL)
    print(f"decode: points, median |error| / signed\n{'system':10} {'engine':18}"
          + "".join(f"{c:>30}" for c in decode))
    _table(decode_errors(folder, "fp8", count, device), decode)
    print("measured decode time with the KV cache in fp8 over bf16 (the same system, engine version and shape):"
          f" median, points\n{'engine':10}" + "".join(f"{c:>16}" for c in decode))
    ratios = fp8_kv_ratios(folder)
    for engine in sorted({e for e, _ in ratios}):
        print(f"{engine:10}" + "".join(f"{statistics.median(ratios[engine, c]):10.2f} {len(ratios[engine, c]):5d}"
                                        if (engine, c) in ratios else f"{'-':>16}" for c in decode))

    sizes = [(prompt, heads) for prompt in PROMPTS for heads in (GQA_HEADS[0][0], GQA_HEADS[-1][0])]
    print("\nimplied attention efficiency (bf16) by prompt and query heads per GPU, grouped-query points, every"
          f" engine and both batches: median\n{'system':10}" + "".join(f"{f'{n} x {h}':>12}" for n, h in sizes))
    for system in sorted({s for s, _, _ in by_shape}):
        print(f"{system:10}" + "".join(f"{statistics.median(by_shape[system, n, h]):12.2f}"
                                        if (system, n, h) in by_shape else f"{'-':>12}" for n, h in sizes))


#: The work curve's bands: GFLOP from BAND_BASE x 4^k up to the next (module docstring)
BAND_BASE, BAND_RATIO = 2.0, 4.0


def work_curve(pairs: list[tuple[float, float]]) -> list[tuple[float, float, int]]:
    """(median GFLOP, median implied efficiency, points) per band of work (`BAND_BASE` x
    `BAND_RATIO`^k .. x `BAND_RATIO`^(k + 1) GFLOP) of ``pairs`` (GFLOP, implied efficiency), the
    bands holding points in rising order: the points of a profile's attention_work_curve."""
    bands: dict[int, list[tuple[float, float]]] = {}
    for gflop, share in pairs:
        bands.setdefault(math.floor(math.log(gflop / BAND_BASE, BAND_RATIO)), []).append((gflop, share))
    return [(statistics.median(g for g, _ in band), statistics.median(e for _, e in band), len(band))
            for _, band in sorted(bands.items())]


def fp8_kv_ratios(folder: str) -> dict[tuple[str, str], list[float]]:
    """{(engine, kind): [measured decode seconds with the KV cache in fp8 / in bf16]} over the
    bf16 decode kernels at the compared shapes (`kernel_tables`) measured both ways on the same
    system, engine version, kernel source, tp and shape; kind: "gqa" or "mla"."""
    measured = {}
    for kv in ("bfloat16", "fp8"):
        for system, engine, table, f in kernel_tables(folder, "generation", DECODE_BATCHES, "step", CONTEXTS, kv):
            source, tp = ([""] * len(f) if c not in f else f[c] for c in ("kernel_source", "tp_size"))
            heads = f.num_key_value_heads if table == "attention" else f.num_heads
            for key in zip(source, tp, f.num_heads, heads, f.batch_size, f.step, f.latency):
                measured[kv, system, engine, table, *key[:-1]] = float(key[-1])
    ratios: dict[tuple[str, str], list[float]] = {}
    for (kv, system, engine, table, *shape), seconds in measured.items():
        bf16 = measured.get(("bfloat16", system, engine, table, *shape))
        if kv == "fp8" and bf16:
            ratios.setdefault((engine.split()[0], "gqa" if table == "attention" else "mla"), []).append(seconds / bf16)
    return ratios


#: The fp8 prefill table's columns: the kernel (MLA's compared in both forms) and what is in fp8
FP8_PREFILL = ("gqa, fp8 KV", "gqa, fp8 FMHA", "expanded, fp8 KV", "absorbed, fp8 KV")


def decode_errors(folder: str, kv: str, count, device) -> dict:
    """{(system, engine): {kind: [relative errors]}} of the decode points with the KV cache in
    ``kv`` (`decode_points`), each counted (``count``: `counted_attention`, memoised) as one decode
    step after its cached tokens (MLA absorbed) and simulated on its system's bundled profile
    (``device``: system -> Device) with the KV cache in ``kv``."""
    errors: dict = {}
    for system, engine, kind, heads, batch, context, seconds in decode_points(folder, kv):
        profile = count("gqa" if kind == "gqa" else "absorbed", heads, batch, 1, context)
        t = attention_time(profile, device(system), None if kv == "bfloat16" else kv)[0]
        errors.setdefault((system, engine), {}).setdefault(kind, []).append(t / seconds - 1)
    return errors


def _table(errors: dict, columns: tuple[str, ...]) -> None:
    """Print one line per (system, engine) of ``errors`` ({kind: [relative errors]}) and one over all."""
    every: dict[str, list[float]] = {}
    for (system, engine), cell in sorted(errors.items()):
        for c, e in cell.items():
            every.setdefault(c, []).extend(e)
        print(f"{system:10} {engine:18}" + "".join(_line(cell.get(c, [])) for c in columns))
    print(f"{'every':10} {'':18}" + "".join(_line(every.get(c, [])) for c in columns))


def _line(errors: list[float]) -> str:
    if not errors:
        return f"{'-':>30}"
    return f"{len(errors):>10d} {statistics.median(abs(e) for e in errors):8.1%} / {statistics.median(errors):+7.1%}"


if __name__ == "__main__":
    main()
