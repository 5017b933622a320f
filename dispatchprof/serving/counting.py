"""Counted compositions: uniform steps of a model counted once, and every op's form and
quantities taken from them per scenario (the rows the step cost model is fitted on).

A count of consecutive uniform steps (B sequences of q new tokens after p cached ones,
`dispatchprof.llm.generation.count_steps` with logits for the last token of each sequence) gives,
per step and scenario, each op's fixed form (`dispatchprof.serving.work.OpForm`) and its
quantities (counts, bytes, a GEMM's M, N, K, moved inputs: `dispatchprof.serving.work.quantities`).

**Runtime and tensor parallelism.** The counts are planned by the simulator's runtime (eager,
compiled, serving: kernels, fusion, host launches; `dispatchprof.sim.simulate.op_plans`) and
split over ``tp`` devices as `simulate` does; the serving runtime's last-position logits are
already in the count (``logits_to_keep=1``), so no LM-head share is applied on top. A chunk after
cached tokens uses this op stream (the attention kernel applies the causal mask itself) rather
than transformers' explicit mask ops.

**KV-cache dtype.** With ``kv_dtype``, the counted steps are planned with the cache in that dtype,
as the simulator plans them (`dispatchprof.sim.runtime.narrow_kv_cache`: attention's key and value
reads and the cache an append copies move kv_bits per element); the fit carries that into the
coefficients, and the arithmetic does not change. A step's KV bytes per cached token are one
device's (`dispatchprof.sim.parallel.kv_shards`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import torch

from dispatchprof.llm.generation import StepSpan
from dispatchprof.results.profile import Profile
from dispatchprof.serving.composition import Composition
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.serving.work import OpForm, moved_inputs, op_form, quantities
from dispatchprof.sim.attention import attention_heads
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.device import Device
from dispatchprof.sim.parallel import check_tp, kv_shards
from dispatchprof.sim.placement import Scenarios
from dispatchprof.sim.runtime import skips_masked_tiles
from dispatchprof.sim.simulate import op_plans


@dataclass(frozen=True)
class CountedStep:
    """One counted composition: per scenario, per op its form and quantities
    (`dispatchprof.serving.work`)."""

    batch: int
    q: int
    past: int
    keys: tuple[tuple[str, str, str], ...]
    ops: dict[str, tuple[tuple[OpForm, tuple[float, ...]], ...]]
    kv_bytes_per_token: float                 # KV cache bytes per cached token (all layers, one device)
    memory: dict[str, tuple[float | None, int]]   # scenario -> (capacity bytes or None, weight bytes)
    devices: dict[str, dict[str, Device]]    # scenario -> its devices by name (bound ones with bound)
    static_power_w: dict[str, float]          # scenario -> static power of its devices
    weight_dtype: str | None = None
    x: tuple[int, ...] | None = None          # its feature row; None: Composition.uniform(batch, q, past)

    def features(self) -> tuple[int, ...]:
        """The row of the design matrix this step contributes."""
        return self.x if self.x is not None else tuple(int(v) for v in Composition.uniform(self.batch, self.q,
                                                                                          self.past).x)


def count_steps(model: torch.nn.Module, batch: int, tokens: Sequence[int], scenarios: Scenarios,
                weight_dtype: str | None = None, bound: bool = False, runtime: str = "serving",
                tp: int = 1, kv_dtype: str | None = None, memo: CountMemo | None = None) -> list[CountedStep]:
    """Count consecutive uniform steps of ``batch`` sequences (`dispatchprof.llm.generation.count_steps`,
    logits for the last token of each sequence) and take every op's form and quantities per
    scenario under ``runtime``, ``tp`` and ``kv_dtype``; with ``memo`` (of this model), the
    count is taken from it."""
    memo = CountMemo(model, repeat=False) if memo is None else memo
    if memo.model is not model:
        raise ValueError("count_steps(memo=...) holds the counts of another model")
    profile, spans = memo.get(batch, tokens, scenarios)
    past = spans[-1].past + spans[-1].tokens
    per_token = sum(spans[-1].kv_layer_bytes) / (batch * past) / kv_shards(getattr(model, "config", None), tp)
    return counted_steps(profile, spans, scenarios, batch, per_token, weight_dtype=weight_dtype, bound=bound,
                         runtime=runtime, tp=tp, kv_dtype=kv_dtype)


def counted_steps(profile: Profile, spans: Sequence[StepSpan], scenarios: Scenarios, batch: int,
                  kv_bytes_per_token: float, *, weight_dtype: str | None = None, bound: bool = False,
                  runtime: str = "serving", tp: int = 1, kv_dtype: str | None = None) -> list[CountedStep]:
    """Every op's form and quantities per scenario, for each span of a count (the spans' records
    planned as one count, as the simulator plans them: kernels, launches, moved inputs, the KV
    cache stored in ``kv_dtype``)."""
    records = profile.records
    module_type = {s.name: s.module_type for s in profile.scopes}
    starts = tuple(s.start for s in spans)
    heads = attention_heads(records)
    per_scenario, memory, devices, static = {}, {}, {}, {}
    for name in scenarios:
        placement = scenarios[name].as_bound() if bound else scenarios[name]
        devices_of = [placement.device_for(r.scope) for r in records]
        check_tp(tp, heads, placement.devices)
        plans, _ = op_plans(profile, devices_of, runtime, tp, starts, kv_dtype)
        # the count already keeps each sequence's last-token logits: no share of the LM head on top
        plans = [p if p.activation_share == 1.0 else dataclasses.replace(p, activation_share=1.0) for p in plans]
        moved: set = set()
        per_scenario[name] = []
        for s in spans:
            steps = []
            for i, (sources, sizes) in zip(range(s.start, s.end), moved_inputs(records, devices_of, s.start, s.end,
                                                                                 moved)):
                r = records[i]
                rms = module_type.get(r.scope, "").endswith("RMSNorm")
                form = op_form(r, devices_of[i].name, rms, plans[i], sources, skips_masked_tiles(r, runtime))
                steps.append((form, quantities(r, plans[i], sizes)))
            per_scenario[name].append(tuple(steps))
        checks = check_capacity(profile, placement, weight_dtype, tp=tp)
        caps = [ch.capacity_bytes for ch in checks]
        memory[name] = (None if None in caps else sum(caps), sum(ch.weights_bytes for ch in checks))
        devices[name] = {d.name: d for d in placement.devices}
        static[name] = sum(d.static_power_w for d in placement.devices)
    return [CountedStep(batch, s.tokens, s.past, tuple((r.op, r.scope, r.dtype) for r in records[s.start:s.end]),
                        {name: per_scenario[name][k] for name in scenarios}, kv_bytes_per_token, memory, devices,
                        static, weight_dtype)
            for k, s in enumerate(spans)]
