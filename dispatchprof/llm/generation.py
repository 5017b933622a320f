"""Generation: a prefill and the decode steps that follow, counted and simulated per phase.

``profile_generation(model, batch, prompt_len, new_tokens)``: the prefill reads the prompt and
gives the first token; each of the new_tokens - 1 decode steps reads one token per sequence with
a DynamicCache holding all earlier tokens (no ``generate()``, which needs weights).

Fast path (exact): every count, byte and simulated time of a decode step is, op by op, an affine
function of the cache length L (attention reads L+1 keys, the cache grows by one token, the
rest does not change), and stays so until a model feature such as a sliding window changes the
op stream. So instead of counting every step, a range of steps [a, b] is counted at L = a, a+1,
the midpoint and b; when every op's values there lie on one line, the sums over the range are
closed forms (dispatchprof.llm.decode_sums). When they do not, the range is split in two, down
to single steps. A test compares this with counting every step, category by category.

With a shape-generic stream (``stream=DecoderStream(model)``, dispatchprof.llm.shape_generic),
the prefill and every sampled step come from the stream's exact polynomials instead of a count:
the same records, simulated by the same function, in milliseconds instead of seconds.

The devices are resolved once (`scenarios_of`) and shared by every count of the generation.
``runtime`` (eager, compiled, serving) and ``tp`` (tensor parallelism) reach the simulator through
OpCounter; every step is one phase block, so each step is one host/device timeline. With tp > 1
the times are one device's (all run the same ops), the energy per token is the whole group's and
the capacity check holds one device's share of the split weights and KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.llm.decode_sums import Segments, StepSample, affine, sum_decode
from dispatchprof.llm.models import token_ids
from dispatchprof.llm.shape_generic import DecoderStream
from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.generation import DeviceGeneration, GenerationProfile, PhaseTiming
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import COUNT_FIELDS, Totals
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.device import WEIGHT_BITS
from dispatchprof.sim.parallel import check_tp, kv_shards
from dispatchprof.sim.placement import Scenarios, scenarios_of
from dispatchprof.sim.runtime import check_runtime
from dispatchprof.sim.simulate import Simulation, simulate

Progress = Callable[[int, int, str], None]    # (done, total or 0 when unknown, what)


def profile_generation(model: torch.nn.Module, batch: int, prompt_len: int, new_tokens: int, *,
                       devices: Any = None, weight_dtype: str | None = None, exact: bool = False,
                       bound: bool = False, progress: Progress | None = None, runtime: str = "eager",
                       tp: int = 1, kv_dtype: str | None = None,
                       stream: DecoderStream | None = None) -> GenerationProfile:
    """Count and simulate a generation of ``new_tokens`` tokens after a ``prompt_len`` prompt for
    ``batch`` sequences. ``exact=True`` counts every decode step (the fast path's reference);
    ``bound=True`` simulates the pure roofline (no efficiencies or overheads); ``runtime`` and
    ``tp`` as in OpCounter. ``kv_dtype`` ("fp8", "int8", "int4", ...) stores the KV cache in that
    dtype: its bytes, the capacity check (`kv_bytes_as`) and the simulated times (the cache
    traffic of attention and appends, dispatchprof.sim.runtime.narrow_kv_cache) follow it.
    ``stream`` (a `DecoderStream` of this model) answers the prefill and every decode step of its
    fitted region from its polynomials instead of counting (the same records a count gives;
    dispatchprof.llm.shape_generic); shapes outside it are counted."""
    for name, value, low in (("batch", batch, 1), ("prompt_len", prompt_len, 1), ("new_tokens", new_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    check_runtime(runtime)
    kv_bits = kv_element_bits(model, kv_dtype)
    scenarios = scenarios_of(devices)             # every device resolved (a YAML parsed) once
    heads = getattr(getattr(model, "config", None), "num_attention_heads", None)
    check_tp(tp, [heads] if isinstance(heads, int) else [], [d for p in scenarios.values() for d in p.devices])
    run = _Runner(model, batch, scenarios, weight_dtype, bound, runtime, tp, kv_dtype, stream)
    steps = new_tokens - 1
    report = progress or (lambda done, total, what: None)
    prefill, prefill_sims, prefill_kv = run.prefill(prompt_len)
    report(1, 1, "prefill")
    samples, segments = ({}, []) if not steps else (
        run.every_step if exact else run.sampled)(prompt_len, steps, report)
    static = {name: prefill_sims[name].static_power_w for name in scenarios}
    sums = sum_decode(samples, segments, list(scenarios), static) if steps else None
    first = samples.get(prompt_len)
    last = samples.get(prompt_len + steps - 1)
    kv_layers = kv_bytes_as(last.kv_bytes if last else prefill_kv, kv_bits, model)
    kv = int(sum(kv_layers) / kv_shards(getattr(model, "config", None), tp))
    prefill_peak = dict(prefill.phase_peaks).get("prefill", 0)
    activations = max(prefill_peak - sum(prefill_kv), last.peak_extra if last else 0, 0)
    weights = check_capacity(prefill, scenarios.values()[0], weight_dtype)[0].weights_bytes \
        if scenarios else sum(s.params_self_bytes for s in prefill.scopes)
    per_device = {}
    for name in scenarios:
        sim = prefill_sims[name]
        total = sim.total
        pre = PhaseTiming(total.time_s, total.energy_j, total.compute_bound_s, total.memory_bound_s, total.static_j)
        dec = sums.timing[name] if sums else PhaseTiming()
        total_time = pre.time_s + dec.time_s
        capacity = tuple(CapacityCheck(c.device, c.capacity_bytes, c.weights_bytes, kv, activations)
                         for c in check_capacity(prefill, scenarios[name], weight_dtype, tp=tp))
        per_device[name] = DeviceGeneration(
            name, pre.time_s,
            first.step_time(name) if first else 0.0, dec.time_s / steps if steps else 0.0,
            last.step_time(name) if last else 0.0, pre, dec,
            batch * new_tokens / total_time if total_time else 0.0,
            batch * steps / dec.time_s if steps and dec.time_s else 0.0,
            (pre.energy_j + dec.energy_j) * tp / (batch * new_tokens), capacity, runtime, tp,
            sim.runtime.describe())
    return GenerationProfile(batch, prompt_len, new_tokens, prefill, prefill.total(),
                             sums.totals if sums else Totals(), sums.by_scope if sums else {},
                             sum(kv_layers), weights, activations, per_device, len(samples),
                             last.profile if last else None, kv_layers)


def kv_element_bits(model: torch.nn.Module, kv_dtype: str | None) -> int | None:
    """Storage bits of a KV-cache dtype (``WEIGHT_BITS``), None for the model's own dtype."""
    if kv_dtype is None:
        return None
    if kv_dtype not in WEIGHT_BITS:
        raise ValueError(f"kv_dtype must be one of {tuple(WEIGHT_BITS)}, got {kv_dtype!r}")
    return WEIGHT_BITS[kv_dtype]


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The model's floating-point dtype (its activations' and KV cache's): its first floating
    parameter's; bfloat16 for a model with none."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.bfloat16)


def model_bits(model: torch.nn.Module) -> int:
    """Bits of the model's floating-point dtype (`model_dtype`)."""
    return 8 * model_dtype(model).itemsize


def kv_bytes_as(layer_bytes: tuple[int, ...], kv_bits: int | None, model: torch.nn.Module) -> tuple[int, ...]:
    """KV bytes per layer stored in ``kv_bits`` instead of the model's dtype: bytes * kv_bits /
    model bits (unchanged for None)."""
    if kv_bits is None:
        return layer_bytes
    return tuple(b * kv_bits // model_bits(model) for b in layer_bytes)


def cache_layer_bytes(cache: Any) -> tuple[int, ...]:
    """Bytes of the key and value tensors each layer of a cache holds."""
    out = []
    for layer in getattr(cache, "layers", ()):
        nbytes = 0
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                nbytes += t.numel() * t.element_size()
        out.append(nbytes)
    return tuple(out)


def cache_bytes(cache: Any) -> int:
    """Bytes of every key and value tensor a cache holds."""
    return sum(cache_layer_bytes(cache))


@dataclass(frozen=True)
class StepSpan:
    """One counted step: ``tokens`` new tokens per sequence after ``past`` cached ones, its
    records [start, end) and the cache bytes per layer after it."""

    tokens: int
    past: int
    start: int
    end: int
    kv_layer_bytes: tuple[int, ...]


def count_steps(model: torch.nn.Module, batch: int, tokens: Sequence[int], scenarios: Scenarios, *,
                weight_dtype: str | None = None, bound: bool = False, runtime: str = "eager", tp: int = 1,
                logits_to_keep: int = 0, after_step: Callable[[int], None] | None = None,
                kv_dtype: str | None = None) -> tuple[OpCounter, list[StepSpan]]:
    """Count consecutive steps of ``batch`` sequences in one count (so that the simulator knows
    where the cache lives), step i feeding ``tokens[i]`` new tokens per sequence after the earlier
    ones into one DynamicCache; the first step is phase "prefill", the others "decode" (one
    host/device timeline each). ``logits_to_keep=1`` computes the logits of each sequence's last
    token only (0: every position, as ``model(ids)`` does). ``after_step(i)`` is called after step i;
    ``kv_dtype`` as in OpCounter."""
    from transformers import DynamicCache

    ids = [token_ids(model, batch, q) for q in tokens]
    cache = DynamicCache(config=model.config)
    keep = {"logits_to_keep": logits_to_keep} if logits_to_keep else {}
    spans, past = [], 0
    with torch.no_grad(), OpCounter(devices=scenarios, weight_dtype=weight_dtype, bound=bound, runtime=runtime,
                                    tp=tp, kv_dtype=kv_dtype) as c:
        for i, q in enumerate(tokens):
            start = c.records_counted
            with c.phase("decode" if i else "prefill"):
                model(ids[i], past_key_values=cache, use_cache=True, **keep)
            spans.append(StepSpan(q, past, start, c.records_counted, cache_layer_bytes(cache)))
            past += q
            if after_step is not None:
                after_step(i)
    return c, spans


def sample_step(model, batch: int, past: int, devices: Any, weight_dtype: str | None,
                bound: bool = False, runtime: str = "eager", tp: int = 1, kv_dtype: str | None = None) -> StepSample:
    """Count one decode step at cache length ``past`` (see `_Runner.sample`)."""
    return _Runner(model, batch, scenarios_of(devices), weight_dtype, bound, runtime, tp, kv_dtype).sample(past)


class _Runner:
    """Counts of one model, batch and set of scenarios: a prefill and decode steps after it."""

    def __init__(self, model: torch.nn.Module, batch: int, scenarios: Scenarios, weight_dtype: str | None,
                 bound: bool, runtime: str = "eager", tp: int = 1, kv_dtype: str | None = None,
                 stream: DecoderStream | None = None) -> None:
        self.model, self.batch, self.scenarios = model, batch, scenarios
        self.weight_dtype, self.bound, self.runtime, self.tp = weight_dtype, bound, runtime, tp
        self.kv_dtype, self.stream = kv_dtype, stream

    def simulations(self, profile: Profile, step_starts: tuple[int, ...]) -> list[Simulation]:
        """``profile`` simulated on every scenario, as OpCounter.simulations does for a count."""
        return [simulate(profile, self.scenarios[name], weight_dtype=self.weight_dtype, name=name, bound=self.bound,
                         runtime=self.runtime, tp=self.tp, step_starts=step_starts, kv_dtype=self.kv_dtype)
                for name in self.scenarios]

    def _key(self, what: str, n: int) -> tuple:
        """What a simulated prefill or step of the stream depends on (its `Memo` key)."""
        return (what, self.batch, n, self.scenarios, self.weight_dtype, self.bound, self.runtime, self.tp,
                self.kv_dtype)

    def prefill(self, prompt_len: int) -> tuple[Profile, dict[str, Simulation], tuple[int, ...]]:
        """The prefill's profile, its simulation per scenario and the cache bytes per layer after it."""
        if self.stream is not None and self.stream.covers(self.batch, prompt_len):
            def make():
                p = self.stream.prefill(self.batch, prompt_len)
                return p.profile, {s.name: s for s in self.simulations(p.profile, (0,))}, p.kv
            return self.stream.memo.get(self._key("prefill", prompt_len), make)
        c, _, kv = self.count(prompt_len, 0)
        return c.profile, {sim.name: sim for sim in c.simulations()}, kv

    def count(self, prompt_len: int, decode_steps: int, report: Progress | None = None
              ) -> tuple[OpCounter, list[tuple[int, int, tuple[int, ...]]], tuple[int, ...]]:
        """One count: a prefill of ``prompt_len`` tokens (phase "prefill") then ``decode_steps``
        steps of one token each (phase "decode"). Returns the counter, per step its records
        [start, end) and the cache bytes per layer after it, and the cache bytes after the prefill."""
        def progress(done: int) -> None:
            if report is not None and done:
                report(done, decode_steps, "decode steps counted")

        c, spans = count_steps(self.model, self.batch, [prompt_len] + [1] * decode_steps, self.scenarios,
                               weight_dtype=self.weight_dtype, bound=self.bound, runtime=self.runtime, tp=self.tp,
                               after_step=progress, kv_dtype=self.kv_dtype)
        return c, [(s.start, s.end, s.kv_layer_bytes) for s in spans[1:]], spans[0].kv_layer_bytes

    def sample(self, past: int) -> StepSample:
        """One decode step at cache length ``past``. A setup prefill of ``past`` tokens builds the
        cache inside the same count (so the simulator knows which device holds it); only the
        step itself, labelled "decode", is kept. Where the stream covers ``past``, that count's
        profile comes from the stream instead."""
        if self.stream is not None and self.stream.covers(self.batch, past):
            def make():
                st = self.stream.step(self.batch, past)
                return _sample_of(st.profile, self.simulations(st.profile, (0, st.step_start)), past,
                                  range(st.step_start, len(st.profile.records)), st.kv)
            return self.stream.memo.get(self._key("step", past), make)
        c, [(start, end, kv)], _ = self.count(past, 1)
        return _sample_of(c.profile, c.simulations(), past, range(start, end), kv)

    def sampled(self, prompt_len: int, steps: int, report: Progress) -> tuple[dict[int, StepSample], Segments]:
        """The segment search of the module docstring: samples, and the ranges found affine."""
        samples: dict[int, StepSample] = {}
        segments: Segments = []

        def get(past: int) -> StepSample:
            if past not in samples:
                samples[past] = self.sample(past)
                report(len(samples), 0, "decode steps counted (the rest summed)")   # total unknown
            return samples[past]

        def segment(a: int, b: int) -> None:
            if b - a < 3:                                     # short ranges: every step
                for p in range(a, b + 1):
                    get(p)
                    segments.append((p, p))
                return
            if affine([get(p) for p in (a, a + 1, (a + b) // 2, b)]):
                segments.append((a, b))
            else:
                segment(a, (a + b) // 2)
                segment((a + b) // 2 + 1, b)

        segment(prompt_len, prompt_len + steps - 1)
        return samples, segments

    def every_step(self, prompt_len: int, steps: int, report: Progress) -> tuple[dict[int, StepSample], Segments]:
        """Reference: one count with the prefill and every decode step."""
        c, bounds, _ = self.count(prompt_len, steps, report)
        profile, sims = c.profile, c.simulations()
        samples = {prompt_len + k: _sample_of(profile, sims, prompt_len + k, range(a, b), kv)
                   for k, (a, b, kv) in enumerate(bounds)}
        return samples, [(p, p) for p in sorted(samples)]


def _sample_of(profile: Profile, sims: Sequence[Simulation], past: int, index: range,
               kv_bytes: tuple[int, ...]) -> StepSample:
    records = [profile.records[i] for i in index]
    timing = {sim.name: tuple(sim.ops[i] for i in index) for sim in sims}
    return StepSample(past, tuple((r.op, r.scope, r.dtype) for r in records),
                      tuple(tuple(getattr(r.cost, f) or 0 for f in COUNT_FIELDS) for r in records),
                      timing, dict(profile.phase_peaks).get("decode", 0), kv_bytes, profile)


__all__ = ["Profile", "StepSample", "StepSpan", "cache_bytes", "cache_layer_bytes", "count_steps", "kv_bytes_as",
           "kv_element_bits", "model_bits", "model_dtype", "profile_generation", "sample_step"]
