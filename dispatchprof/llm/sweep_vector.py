"""Sweep rows of a decoder answered from its shape-generic stream, every shape simulated at once.

For one model, batch size and scenario, the prefills of every prompt length and the decode steps
at every cache length the sweep's generations pass through are simulated together by
`dispatchprof.sim.vector.simulate_shapes` on the stream's polynomials (no profile is built per
shape). A generation of ``new_tokens`` tokens after a ``prompt_len`` prompt then costs

    time   = prefill time at (batch, prompt_len) + sum over past = prompt_len .. prompt_len + new_tokens - 2
             of the decode step time at (batch, past)                     (every step, none sampled)
    energy = the same sums of dynamic energy + static power x time

as `profile_generation` gives it (its decode fast path sums the same steps in closed form).
The memory a row needs is `profile_generation`'s: weights (`check_capacity`), the KV cache after
the last step and the larger of the prefill's and the last step's activation peaks, read from
the stream's polynomials (peaks approximate away from the grid: dispatchprof.count.generic).

`decoder_rows` answers the shapes whose every prefill and step lies in the stream's region, under
the options the vector simulator covers; it returns the others, and why, for the caller to
simulate per shape.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from dispatchprof.count.generic import GenericProfile, ShapeValues, record_layout, row_ids, tail_rows
from dispatchprof.llm.shape_generic import DecoderStream
from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.sweep import SweepRow
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.placement import Scenarios
from dispatchprof.sim.vector import RecordRows, VectorUnsupported, check_vectorisable, simulate_shapes


def decoder_rows(stream: DecoderStream, todo: Sequence[Any], scenarios: Scenarios, dtype: str,
                 weight_dtype: str | None, bound: bool, runtime: str) -> tuple[dict[int, list[SweepRow]], str]:
    """Rows (one per scenario) of each shape of ``todo`` (sweep Shapes of one model) that the
    vector path answers, by position in ``todo``, and why the others are not ('' when all are)."""
    step_fit, prefill_fit = stream.regime()
    if step_fit.profile is None:
        return {}, step_fit.reason
    try:
        for placement in scenarios.values():
            check_vectorisable(placement.as_bound() if bound else placement, runtime, 1, None)
    except VectorUnsupported as e:
        return {}, f"simulated shape by shape: {e}"
    covered = [k for k, s in enumerate(todo) if stream.covers(s.batch, s.prompt_len)
               and stream.covers_step(s.batch, s.prompt_len + max(s.new_tokens - 2, 0))]
    by_batch: dict[int, list[int]] = defaultdict(list)
    for k in covered:
        by_batch[todo[k].batch].append(k)
    rows: dict[int, list[SweepRow]] = {}
    models: dict[int, _Model] = {}
    try:
        for batch, ks in by_batch.items():
            shapes = [todo[k] for k in ks]
            model = _model_for(stream, batch, models)
            for k, r in zip(ks, model.rows(batch, shapes, scenarios, dtype, weight_dtype, bound, runtime)):
                rows[k] = r
    except VectorUnsupported as e:                      # a record the vector simulator cannot time
        return {}, f"simulated shape by shape: {e}"
    left = len(todo) - len(rows)
    return rows, (f"{left} shape(s) outside the fitted region ({_region(stream)}) simulated shape by shape"
                  if left else "")


def _model_for(stream: DecoderStream, batch: int, models: dict[int, _Model]) -> _Model:
    """The `_Model` of the fits that answer ``batch`` (one per pair of fits, kept in ``models``)."""
    step, prefill = stream.fits_for(batch)
    key = id(step.profile)
    if key not in models:
        models[key] = _Model(step.profile, prefill.profile)
    return models[key]


def _region(stream: DecoderStream) -> str:
    """The region in words: lengths, and batch sizes where they are restricted."""
    fit = stream.regime()[0].profile
    text = f"lengths from {fit.low[1]}" + (f" to {stream.high}" if stream.high is not None else "")
    return text + (f", batch sizes multiples of {stream.batch_step} or with a fit of their own (prompt lengths "
                   f"multiples of E / gcd(E, batch x k))" if stream.batch_step > 1 else "")


class _Model:
    """The two fits of a decoder and what the rows read from them."""

    def __init__(self, step: GenericProfile, prefill: GenericProfile) -> None:
        self.step, self.prefill = step, prefill
        self.step_layout = [RecordRows(*t) for t in record_layout(step.template)]
        self.prefill_layout = [RecordRows(*t) for t in record_layout(prefill.template)]
        self.start = len(prefill.template.records)            # the step's first record, after its setup prefill
        self.step_ids, self.prefill_ids = row_ids(step), row_ids(prefill)
        self.memo: dict[tuple[str, str], dict] = {}    # per fit and scenario: simulate_shapes' memo
        self.step_tail, self.prefill_tail = tail_rows(step.template, step.n_extra), \
            tail_rows(prefill.template, prefill.n_extra)

    def rows(self, batch: int, shapes: Sequence[Any], scenarios: Scenarios, dtype: str, weight_dtype: str | None,
             bound: bool, runtime: str) -> list[list[SweepRow]]:
        """Rows of ``shapes`` (all of batch ``batch``), one list per shape."""
        prompts = sorted({s.prompt_len for s in shapes})
        spans = [np.arange(s.prompt_len, s.prompt_len + s.new_tokens - 1) for s in shapes]
        pasts = np.unique(np.concatenate(spans)).tolist()
        where = {p: i for i, p in enumerate(pasts)}
        memory = [self._memory(batch, s) for s in shapes]
        out: list[list[SweepRow]] = [[] for _ in shapes]
        for name, placement, static, pre, dec in self.simulate(batch, prompts, pasts, scenarios, weight_dtype, bound):
            weights = check_capacity(self.prefill.template, placement, weight_dtype)
            for k, s in enumerate(shapes):
                i = prompts.index(s.prompt_len)
                ttft = float(pre.time_s[i])
                e_pre = float(pre.dynamic_j[i]) + static * ttft
                steps = s.new_tokens - 1
                t_dec = e_dec = 0.0
                if steps:
                    a = where[s.prompt_len]
                    t_dec = float(np.sum(dec.time_s[a:a + steps]))
                    e_dec = float(np.sum(dec.dynamic_j[a:a + steps])) + static * t_dec
                kv, activations = memory[k]
                caps = tuple(CapacityCheck(c.device, c.capacity_bytes, c.weights_bytes, kv, activations)
                             for c in weights)
                known = [c for c in caps if c.capacity_bytes is not None]
                total = ttft + t_dec
                out[k].append(SweepRow(
                    s.model, name, "decoder", dtype, batch, s.prompt_len, s.new_tokens, total, e_pre + e_dec,
                    batch * s.new_tokens / total if total else 0.0, (e_pre + e_dec) / (batch * s.new_tokens), ttft,
                    t_dec / steps if steps else None, max(c.required_bytes for c in caps),
                    sum(c.capacity_bytes for c in known) if known else None,
                    None if not known else all(c.fits for c in known), runtime=runtime))
        return out

    def simulate(self, batch: int, prompts: Sequence[int], pasts: Sequence[int], scenarios: Scenarios,
                 weight_dtype: str | None, bound: bool):
        """Per scenario (name, placement, static power in W, prefill StepArrays over ``prompts``,
        decode-step StepArrays over the cache lengths ``pasts`` or None without any)."""
        pre_src = ShapeValues(self.prefill, np.array([(batch, p) for p in prompts]), self.prefill_ids)
        step_src = ShapeValues(self.step, np.array([(batch, p) for p in pasts]), self.step_ids) if pasts else None
        for name, placement in scenarios.items:
            static = sum(d.static_power_w for d in (placement.as_bound() if bound else placement).devices)
            (pre,) = simulate_shapes(self.prefill.template, self.prefill_layout, pre_src, placement,
                                     [(0, len(self.prefill_layout))], weight_dtype=weight_dtype, bound=bound,
                                     memo=self.memo.setdefault(("prefill", name), {}))
            dec = None
            if step_src is not None:
                (dec,) = simulate_shapes(self.step.template, self.step_layout, step_src, placement,
                                         [(self.start, len(self.step_layout))], weight_dtype=weight_dtype,
                                         bound=bound, memo=self.memo.setdefault(("step", name), {}))
            yield name, placement, static, pre, dec

    def _memory(self, batch: int, s: Any) -> tuple[int, int]:
        """(KV bytes after the last step, activation bytes) as `profile_generation` gives them."""
        pre_extra = [self.prefill_tail[f"extra {j}"] for j in range(self.prefill.n_extra)]
        peak_row = self.prefill_tail.get("phase peak prefill")
        values = _exact(self.prefill, pre_extra + ([peak_row] if peak_row is not None else []), (batch, s.prompt_len))
        prefill_kv, peak = values[:len(pre_extra)], (values[-1] if peak_row is not None else 0)
        if s.new_tokens == 1:
            return sum(prefill_kv), max(peak - sum(prefill_kv), 0)
        layers = (self.step.n_extra - 1) // 2
        kv_rows = [self.step_tail[f"extra {1 + layers + j}"] for j in range(layers)]
        peak_row = self.step_tail.get("phase peak decode")
        last = _exact(self.step, kv_rows + ([peak_row] if peak_row is not None else []),
                      (batch, s.prompt_len + s.new_tokens - 2))
        step_peak = last[-1] if peak_row is not None else 0
        return sum(last[:layers]), max(peak - sum(prefill_kv), step_peak, 0)


@dataclass(frozen=True)
class GenerationSteps:
    """A generation's prefill and every one of its decode steps on one scenario (seconds, joules):
    step k runs at cache length prompt_len + k, k = 0 .. new_tokens - 2."""

    prefill_s: float
    prefill_dynamic_j: float
    step_s: np.ndarray
    step_dynamic_j: np.ndarray
    static_power_w: float

    @property
    def tpot_mean_s(self) -> float:
        """Mean decode step time (0 without decode steps)."""
        return float(self.step_s.mean()) if len(self.step_s) else 0.0


def generation_steps(stream: DecoderStream, batch: int, prompt_len: int, new_tokens: int, scenarios: Scenarios,
                     weight_dtype: str | None = None, bound: bool = False) -> dict[str, GenerationSteps]:
    """The prefill and every decode step of a generation of ``new_tokens`` tokens after a
    ``prompt_len`` prompt, per scenario, from the stream's fit by the vector simulator (each step
    simulated, none sampled: the numbers `profile_generation` sums). Raises ValueError for a shape
    outside the fit's region and `VectorUnsupported` for options it does not cover."""
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be >= 1, got {new_tokens}")
    step_fit, prefill_fit = stream.regime()
    if step_fit.profile is None:
        raise ValueError(f"the stream has no fit: {step_fit.reason}")
    last = prompt_len + max(new_tokens - 2, 0)
    if not (stream.covers(batch, prompt_len) and stream.covers_step(batch, last)):
        raise ValueError(f"batch {batch}, lengths {prompt_len} to {last} lie outside the fitted region "
                         f"({_region(stream)})")
    for placement in scenarios.values():
        check_vectorisable(placement.as_bound() if bound else placement, "eager", 1, None)
    model = _model_for(stream, batch, {})
    pasts = list(range(prompt_len, prompt_len + new_tokens - 1))
    out = {}
    for name, _, static, pre, dec in model.simulate(batch, [prompt_len], pasts, scenarios, weight_dtype, bound):
        empty = np.zeros(0)
        out[name] = GenerationSteps(float(pre.time_s[0]), float(pre.dynamic_j[0]),
                                    empty if dec is None else dec.time_s, empty if dec is None else dec.dynamic_j,
                                    static)
    return out


def _exact(fit: GenericProfile, rows: Sequence[int], sizes: tuple[int, ...]) -> list[int]:
    """Values ``rows`` of ``fit`` at ``sizes`` in exact integers (floored, as `GenericProfile.values`)."""
    import itertools
    import math

    mono = [math.prod(v ** e for v, e in zip(sizes, exps))
            for exps in itertools.product(*(range(d + 1) for d in fit.degrees))]
    return [sum(int(c) * m for c, m in zip(fit.numerators[r], mono)) // fit.denominator for r in rows]


__all__ = ["GenerationSteps", "decoder_rows", "generation_steps"]
