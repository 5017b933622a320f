"""Where a mixture-of-experts decode step's time goes, module by module, beside the modules
NVIDIA's AIConfigurator measured on the same system with the same engine (the per-op tables in its
wheel: ``systems/data/<system>/{mla,moe,gemm,comm}/<engine>/<version>/*.parquet``, Apache-2.0;
install them with ``bash scripts/setup_validation.sh``).

    python scripts/decode_modules.py ROW_ID [ROW_ID ...] [--setups DIR] [--batch B] [--context C]

For each silicon-sample row (an aggregated row, or a disaggregated row's decode side) it builds the
counted model of the row as `validate_serving.py` does, times one pure decode step of ``B``
sequences per attention group (default: the row's decode batch size, or its batch size) at cache
length ``C`` (default: the prompt plus half the output) with `LayoutCost.breakdown`, and sums its
ops into modules by scope, per step on one GPU (ms):

- attention: the ops under ``self_attn`` (the all-reduce after ``o_proj`` apart);
- router: the ops under ``mlp.gate``; routed experts: under ``mlp.experts``; shared experts: under
  ``mlp.shared_experts``; dense MLP: the other ``mlp`` ops of the first dense layers;
- all-reduce: every op's tensor-parallel all-reduce (``t_comm``); LM head and embedding; the rest
  (norms, residual adds).

Beside them, AIConfigurator's measured module per layer times the layers that run it: the MLA
module (``mla_generation_module_perf``: its projections, the absorbed BMMs and the attention;
TensorRT-LLM and vLLM only), the MoE layer (``moe_perf``: routing and routed experts, the fastest
kernel it measured, balanced routing as ours), the shared expert's two GEMMs (``gemm_perf``), the
engine's own all-reduce (``custom_allreduce_perf``, the nearest GPU count measured) and the LM
head's GEMM (vocabulary split over the attention group). Each lookup takes the table's nearest
grid point at or above the step's batch, tokens and context (what it used is printed), so the
measured side is an upper bound to within the table's spacing. Nothing here is fitted.
"""

from __future__ import annotations

import argparse
import functools
import glob
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aic_env import AIC_PYTHON, aic_path  # noqa: E402
from serving_rows import DEVICES, aic_rows  # noqa: E402
from validate_serving import counted_setup, silicon_sample  # noqa: E402

from dispatchprof.llm.catalog import load_config  # noqa: E402
from dispatchprof.serving.composition import Composition  # noqa: E402

#: Module of an op by its scope, first match wins (module docstring).
MODULES = (("router", "mlp.gate"), ("shared experts", "mlp.shared_experts"), ("routed experts", "mlp.experts"),
           ("attention", "self_attn"), ("dense MLP", "mlp"), ("LM head, embedding", "lm_head"),
           ("LM head, embedding", "embed_tokens"))
#: DeepSeek's and Kimi's FP8 checkpoints are block-scaled (128 x 128): AIConfigurator's tables call it fp8_block.
BLOCK_SCALED = {"fp8": "fp8_block"}


def module_of(scope: str) -> str:
    """The module an op of ``scope`` is summed into (`MODULES`; 'rest' for norms and adds)."""
    for name, part in MODULES:
        if part in scope:
            return name
    return "rest"


def our_modules(setup, batch: int, context: float) -> tuple[dict[str, float], float]:
    """(ms per module on one GPU, the step's ms) of a pure decode step of ``batch`` sequences per
    attention group at cache length ``context``."""
    lay = setup.layout                     # a mixture-of-experts setup always has one
    groups = lay.layout.dp_attention
    c = Composition.decoding(batch * groups, batch * groups * context, context, 1)
    out: dict[str, float] = defaultdict(float)
    for share in lay.breakdown(c):
        comm = share.timing.t_comm
        out[module_of(share.form.scope)] += share.count * (share.timing.time_s - comm) * 1e3
        out["all-reduce"] += share.count * comm * 1e3
    return dict(out), lay.cost(c).time_s * 1e3


@functools.cache
def _read(path: str):
    """A table of AIConfigurator's wheel, read once per run (a row looks up several GEMMs in one)."""
    import pandas as pd
    return pd.read_parquet(path)


def _table(folder: str, system: str, kind: str, engine: str, name: str, keep) -> tuple:
    """(rows ``keep`` selects, version) of table ``name`` of ``kind`` for ``engine`` on ``system``:
    the newest version with such rows ((None, '') if none)."""
    for path in sorted(glob.glob(os.path.join(folder, system, kind, engine, "*", name)), reverse=True):
        f = _read(path)
        f = f[keep(f)]
        if len(f):
            return f, path.split(os.sep)[-2]
    return None, ""


def _gemm(folder: str, system: str, engine: str, dtype: str, m: int, n: int, k: int) -> tuple[float | None, str]:
    """(measured ms, what was looked up) of an m x n x k GEMM in ``dtype``: the table's point at
    or above each size."""
    f, version = _table(folder, system, "gemm", engine, "gemm_perf.parquet", lambda t: t.gemm_dtype == dtype)
    if f is None:
        return None, f"no {dtype} GEMM table"
    n_, k_ = _at_or_above(f.n, n), _at_or_above(f.k, k)
    f = f[(f.n == n_) & (f.k == k_)]
    m_ = _at_or_above(f.m, m)
    ms = float(f[f.m == m_].latency.min())
    return ms, f"{version} m={m_} n={n_} k={k_} {dtype}: {ms * 1e3:.1f} us"


def _at_or_above(values, x: float) -> float:
    """The smallest grid value >= x (the largest if none)."""
    above = sorted(v for v in set(values) if v >= x)
    return above[0] if above else max(values)


def measured_modules(folder: str, row, side, batch: int, context: float) -> list[tuple[str, float, str]]:
    """(module, measured ms per step, what was looked up) from AIConfigurator's tables for ``side``
    (the row, or its decode side)."""
    raw = row.raw
    system = next(s for s, d in DEVICES.items() if d == row.device)
    engine = row.engine                    # AIConfigurator's folders use the same names
    cfg = load_config(row.model)
    layers, dense = cfg.num_hidden_layers, getattr(cfg, "first_k_dense_replace", 0)
    h, heads = cfg.hidden_size, cfg.num_attention_heads
    tp, groups, ep = side.tp, side.dp_attention, side.ep
    gemm = BLOCK_SCALED.get(str(raw.get("gemm_quant_mode")), str(raw.get("gemm_quant_mode")))
    moe_dtype = BLOCK_SCALED.get(str(raw.get("moe_quant_mode")), str(raw.get("moe_quant_mode")))
    attention_gemm = "bfloat16" if gemm == "nvfp4" else gemm      # NVFP4 R1 / Kimi keep attention in bf16
    kv = "fp8" if row.kv_dtype == "fp8" else "bfloat16"
    out = []
    f, version = _table(folder, system, "mla", engine, "mla_generation_module_perf.parquet",
                        lambda t: (t.kv_cache_dtype == kv) & (t.gemm_type == attention_gemm) & (t.num_heads == heads // tp))
    if f is not None:
        b, s = _at_or_above(f.batch_size, batch), _at_or_above(f.step, context)
        ms = float(f[(f.batch_size == b) & (f.step == s)].latency.min())
        out.append(("attention", ms * layers, f"{version} MLA module, {heads // tp} heads, batch {b}, "
                                              f"context {s}, {attention_gemm} GEMMs, {kv} cache: {ms * 1e3:.1f} us"))
    tokens = batch * groups
    f, version = _table(folder, system, "moe", engine, "moe_perf.parquet",
                        lambda t: (t.hidden_size == h) & (t.inter_size == cfg.moe_intermediate_size)
                        & (t.num_experts == cfg.n_routed_experts) & (t.topk == cfg.num_experts_per_tok)
                        & (t.moe_ep_size == ep) & (t.moe_tp_size == tp * groups // ep) & (t.moe_dtype == moe_dtype)
                        & (t.distribution == "balanced"))
    if f is not None:
        n = _at_or_above(f.num_tokens, tokens)
        best = f[f.num_tokens == n].sort_values("latency").iloc[0]
        out.append(("router + routed experts", float(best.latency) * (layers - dense),
                    f"{version} MoE layer, {n} tokens, EP {ep}, {moe_dtype}, {best.kernel_source}: "
                    f"{float(best.latency) * 1e3:.1f} us"))
    shared = cfg.moe_intermediate_size * getattr(cfg, "n_shared_experts", 1) // tp
    up, said_up = _gemm(folder, system, engine, gemm, batch, 2 * shared, h)
    down, said_down = _gemm(folder, system, engine, gemm, batch, h, shared)
    if up is not None and down is not None:
        out.append(("shared experts", (up + down) * (layers - dense), f"GEMMs {said_up}; {said_down}"))
    head, said = _gemm(folder, system, engine, "bfloat16", batch, cfg.vocab_size // tp, h)
    if head is not None:
        out.append(("LM head, embedding", head, f"LM head GEMM {said}"))
    ar, version = _table(folder, system, "comm", engine, "custom_allreduce_perf.parquet",
                         lambda t: t.allreduce_dtype == "bfloat16")
    if ar is not None and tp > 1:
        gpus = min(set(ar.num_gpus), key=lambda g: (abs(g - tp), -g))
        f = ar[ar.num_gpus == gpus]
        size = _at_or_above(f.message_size, batch * h)
        ms = float(f[f.message_size == size].latency.min())
        out.append(("all-reduce", 2 * layers * ms, f"{version} custom all-reduce, {gpus} GPUs (the group has {tp}), "
                                                   f"{size} elements: {ms * 1e3:.1f} us, 2 per layer"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rows", nargs="+", help="silicon-sample row ids")
    p.add_argument("--setups", help="folder of counted setups (validate_serving.py --setups)")
    p.add_argument("--batch", type=int, help="sequences per attention group (default: the row's)")
    p.add_argument("--context", type=float, help="cache length (default: prompt + output / 2)")
    args = p.parse_args(argv)
    by_id = {r.id: r for r in aic_rows(silicon_sample(AIC_PYTHON))[0]}
    missing = [i for i in args.rows if i not in by_id]
    if missing:
        p.error(f"not a silicon-sample row dispatchprof expresses: {', '.join(missing)}")
    other = [i for i in args.rows if "first_k_dense_replace" not in vars(load_config(by_id[i].model))]
    if other:
        p.error(f"not a row of a multi-head latent attention MoE model (DeepSeek, Kimi): {', '.join(other)}")
    folder = aic_path(AIC_PYTHON, "systems", "data")
    for rid in args.rows:
        row = by_id[rid]
        side = row.side_rows()[1] if row.disagg is not None else row
        batch = args.batch or int(float(row.raw.get("decode_batch_size") if row.disagg is not None
                                        else row.raw.get("batch_size")))
        context = args.context or row.prompt_len + row.output_len / 2
        setup = counted_setup(side, args.setups)
        ours, step = our_modules(setup, batch, context)
        measured = {name: (ms, said) for name, ms, said in measured_modules(folder, row, side, batch, context)}
        if "router + routed experts" in measured:
            ours["router + routed experts"] = ours.pop("router", 0.0) + ours.pop("routed experts", 0.0)
        print(f"{rid}: decode side {side.device} {side.engine} tp {side.tp} ep {side.ep} attention groups "
              f"{side.dp_attention}; {batch} sequences per group at context {context:.0f}; measured TPOT "
              f"{row.measured['tpot_mean'] * 1e3:.2f} ms")
        print(f"  {'module':24} {'ours ms':>8} {'AIC ms':>8}  AIC's table")
        for name in sorted(set(ours) | set(measured), key=lambda n: -ours.get(n, 0.0)):
            ms, said = measured.get(name, (None, "-"))
            print(f"  {name:24} {ours.get(name, 0.0):8.2f} {'-' if ms is None else f'{ms:.2f}':>8}  {said}")
        both = [n for n in measured if n in ours]
        print(f"  {'the modules both have':24} {sum(ours[n] for n in both):8.2f} "
              f"{sum(measured[n][0] for n in both):8.2f}")
        print(f"  {'our whole step':24} {step:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
