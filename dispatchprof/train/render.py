"""Rows, tables, JSON and CSV of a training step (dispatchprof.train.step.TrainingResult).
Raw units in the JSON (seconds, bytes, joules); the tables scale them."""

from __future__ import annotations

import dataclasses
from typing import Any

from tabulate import tabulate

from dispatchprof.train.step import TrainingResult

#: Tokens the table's "time to train" row assumes unless told otherwise (Llama 3's 15T).
DEFAULT_TOKENS = 15e12


def summary_rows(r: TrainingResult, tokens: float = DEFAULT_TOKENS) -> list[tuple[str, str]]:
    lay = r.layout
    return [
        ("model", f"{r.model} ({r.params / 1e9:.2f} B parameters)"),
        ("layout", f"{lay.devices} x {r.device} ({lay.nodes} node(s) of {min(lay.devices, lay.gpus_per_node)}): "
                   f"dp {lay.dp} (zero {lay.zero}) x tp {lay.tp} x pp {lay.pp}"
                   f"{f' (vp {lay.vp})' if lay.vp > 1 else ''} x cp {lay.cp}"),
        ("batch", f"global {lay.global_batch} x {lay.seq_len} tokens, micro-batch {lay.micro_batch}, "
                  f"{lay.grad_accum} micro-batch(es) per replica; recompute {lay.recompute}; "
                  f"{'fp8 linears' if lay.fp8 else 'bf16'}"),
        ("step time", f"{r.step_s * 1e3:.1f} ms"),
        ("tokens/s per GPU", f"{r.tokens_per_s_per_gpu:,.0f}"),
        ("MFU (6N + 12 L h s)", f"{r.mfu:.1%}"),
        ("MFU (counted FLOPs)", f"{r.counted_mfu:.1%}"),
        ("pipeline bubble", f"{r.bubble_fraction:.1%}"),
        ("energy per step", f"{r.energy_per_step_j / 1e3:,.1f} kJ "
                            f"({r.energy_per_step_j / (lay.global_batch * lay.seq_len):.3f} J/token)"),
        (f"time to train {tokens / 1e12:g}T tokens", f"{r.days_for(tokens):,.1f} days"),
    ]


def breakdown_rows(r: TrainingResult) -> list[tuple[str, float, float]]:
    return [(k, v * 1e3, v / r.step_s) for k, v in r.breakdown.items() if v]


def memory_rows(r: TrainingResult) -> list[tuple[str, float]]:
    rows = [(k, v / 1e9) for k, v in r.memory.items()] + [("total", r.memory.total / 1e9)]
    if r.capacity_bytes is not None:
        rows.append((f"{r.device} capacity", r.capacity_bytes / 1e9))
    return rows


def training_table(r: TrainingResult, fmt: str = "simple", tokens: float = DEFAULT_TOKENS) -> str:
    parts = [tabulate(summary_rows(r, tokens), tablefmt=fmt),
             tabulate(breakdown_rows(r), headers=("step part", "ms", "share"), floatfmt=("", ".2f", ".1%"),
                      tablefmt=fmt),
             tabulate(memory_rows(r), headers=("memory per GPU", "GB"), floatfmt=("", ".2f"), tablefmt=fmt)]
    fits = {True: "fits", False: r.over_capacity(), None: "capacity unknown"}[r.fits]
    return "\n\n".join(parts) + f"\n\nmemory: {fits}\n"


def training_to_dict(r: TrainingResult, tokens: float = DEFAULT_TOKENS) -> dict[str, Any]:
    """The JSON form (schema "dispatchprof.train")."""
    return {"schema": "dispatchprof.train", "version": 1, "model": r.model, "device": r.device,
            "layout": dataclasses.asdict(r.layout) | {"dp": r.layout.dp, "grad_accum": r.layout.grad_accum},
            "params": r.params, "step_s": r.step_s, "breakdown_s": r.breakdown,
            "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu, "mfu": r.mfu, "counted_mfu": r.counted_mfu,
            "model_flops_per_token": r.model_flops_per_token, "bubble_fraction": r.bubble_fraction,
            "energy_per_step_j": r.energy_per_step_j, "tokens": tokens, "days_to_train": r.days_for(tokens),
            "memory_bytes": dict(r.memory.items()) | {"total": r.memory.total},
            "capacity_bytes": r.capacity_bytes, "fits": r.fits}


def training_csv(r: TrainingResult) -> str:
    """One header line and one row: the layout, the step, its parts and the memory total."""
    d = training_to_dict(r)
    cols = {"model": r.model, "device": r.device, **{k: v for k, v in d["layout"].items()},
            "step_s": r.step_s, "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu, "mfu": r.mfu,
            **{f"{k.replace(' ', '_')}_s": v for k, v in r.breakdown.items()}, "memory_bytes": r.memory.total}
    return ",".join(cols) + "\n" + ",".join(str(v) for v in cols.values()) + "\n"
