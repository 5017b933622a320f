"""Generation: a prefill and the decode steps that follow, counted and simulated per phase.

``profile_generation(model, batch, prompt_len, new_tokens)``: the prefill reads the prompt and
gives the first token; each of the new_tokens - 1 decode steps reads one token per sequence with
a DynamicCache holding all earlier tokens (no ``generate()``, which needs weights).

Fast path (exact): every count, byte and simulated time of a decode step is, op by op, an affine
function of the cache length L (attention reads L+1 keys, the cache grows by one token, the
rest does not change), and stays so until a model feature such as a sliding window changes the
op stream. So instead of counting every step, a range of steps [a, b] is counted at L = a, a+1,
the midpoint and b; when every op's values there lie on one line, the sums over the range are
closed forms (sum of an affine function; a max(compute, memory) whose sides cross is split at
the crossing). When they do not, the range is split in two, down to single steps. A test
compares this with counting every step, category by category.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

from dispatchprof.capacity import CapacityCheck, check_capacity
from dispatchprof.counter import OpCounter, scenarios_of
from dispatchprof.fake import fake_inputs
from dispatchprof.profile import Profile, Totals

Progress = Callable[[int, int, str], None]    # (done, total or 0 when unknown, what)
_COUNT_FIELDS = ("add", "mult", "div", "sqrt", "exp", "cmp", "other", "macs", "bytes_read", "bytes_written",
                 "comm_bytes")


@dataclass(frozen=True)
class StepSample:
    """One decode step counted at cache length ``past``."""

    past: int
    keys: tuple[tuple[str, str, str], ...]           # (op, scope, dtype) per decode record
    counts: tuple[tuple[int, ...], ...]              # per record: _COUNT_FIELDS
    timing: Mapping[str, tuple[tuple[float, ...], ...]]   # scenario -> per record (c, m, oh, tr, e_dyn, static_w)
    peak_extra: int
    kv_bytes: tuple[int, ...]       # per cache layer, after the step
    profile: Profile


@dataclass(frozen=True)
class PhaseTiming:
    """Simulated totals of a phase on one scenario."""

    time_s: float = 0.0
    energy_j: float = 0.0
    compute_bound_s: float = 0.0
    memory_bound_s: float = 0.0


@dataclass(frozen=True)
class DeviceGeneration:
    """What a generation costs on one scenario (a device or a placement)."""

    name: str
    ttft_s: float
    tpot_first_s: float
    tpot_mean_s: float
    tpot_last_s: float
    prefill: PhaseTiming
    decode: PhaseTiming
    tokens_per_s: float           # batch * new_tokens / (prefill + decode time)
    decode_tokens_per_s: float    # batch * (new_tokens - 1) / decode time
    energy_per_token_j: float
    capacity: tuple[CapacityCheck, ...]

    @property
    def total_time_s(self) -> float:
        return self.prefill.time_s + self.decode.time_s


@dataclass(frozen=True)
class GenerationProfile:
    """Counts per phase, KV cache, footprint, and per scenario the timings of one generation."""

    batch: int
    prompt_len: int
    new_tokens: int
    prefill: Profile
    prefill_totals: Totals
    decode_totals: Totals
    decode_by_scope: Mapping[str, Totals]
    kv_cache_bytes: int             # every layer's keys and values after the last token
    weights_bytes: int
    activations_peak_bytes: int
    devices: Mapping[str, DeviceGeneration]
    steps_counted: int
    last_step: Profile | None = field(default=None, repr=False)
    kv_cache_bytes_by_layer: tuple[int, ...] = ()   # KV (COUNTING.md) of each decoder layer

    @property
    def tokens(self) -> dict[str, int]:
        """Tokens produced per phase (for tokens/s): the prefill gives the first of each sequence."""
        return {"prefill": self.batch, "decode": self.batch * (self.new_tokens - 1)}


def profile_generation(model: torch.nn.Module, batch: int, prompt_len: int, new_tokens: int, *,
                       devices: Any = None, weight_dtype: str | None = None, exact: bool = False,
                       bound: bool = False, progress: Progress | None = None) -> GenerationProfile:
    """Count and simulate a generation of ``new_tokens`` tokens after a ``prompt_len`` prompt for
    ``batch`` sequences. ``exact=True`` counts every decode step (the fast path's reference);
    ``bound=True`` simulates the pure roofline (no efficiencies or overheads)."""
    for name, value, low in (("batch", batch, 1), ("prompt_len", prompt_len, 1), ("new_tokens", new_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    scenarios = scenarios_of(devices)
    steps = new_tokens - 1
    report = progress or (lambda done, total, what: None)
    prefill, prefill_sims, prefill_kv = _count_prefill(model, batch, prompt_len, devices, weight_dtype, bound)
    report(1, 1, "prefill")
    samples, segments = ({}, []) if not steps else (
        _every_step if exact else _sampled)(model, batch, prompt_len, steps, devices, weight_dtype, bound, report)
    sums = _sum_decode(samples, segments, list(scenarios)) if steps else {}
    first = samples.get(prompt_len)
    last = samples.get(prompt_len + steps - 1)
    kv_layers = last.kv_bytes if last else prefill_kv
    kv = sum(kv_layers)
    prefill_peak = dict(prefill.phase_peaks).get("prefill", 0)
    activations = max(prefill_peak - sum(prefill_kv), last.peak_extra if last else 0, 0)
    weights = check_capacity(prefill, next(iter(scenarios.values())), weight_dtype)[0].weights_bytes \
        if scenarios else sum(s.params_self_bytes for s in prefill.scopes)
    per_device = {}
    for name, placement in scenarios.items():
        sim = prefill_sims[name]
        pre = PhaseTiming(sim.total.time_s, sim.total.energy_j, sim.total.compute_bound_s, sim.total.memory_bound_s)
        dec = sums["timing"][name] if steps else PhaseTiming()
        total_time = pre.time_s + dec.time_s
        capacity = tuple(CapacityCheck(c.device, c.capacity_bytes, c.weights_bytes, kv, activations)
                         for c in check_capacity(prefill, placement, weight_dtype))
        per_device[name] = DeviceGeneration(
            name, pre.time_s,
            _step_time(first, name) if first else 0.0, dec.time_s / steps if steps else 0.0,
            _step_time(last, name) if last else 0.0, pre, dec,
            batch * new_tokens / total_time if total_time else 0.0,
            batch * steps / dec.time_s if steps and dec.time_s else 0.0,
            (pre.energy_j + dec.energy_j) / (batch * new_tokens), capacity)
    return GenerationProfile(batch, prompt_len, new_tokens, prefill, prefill.total(),
                             sums["totals"] if steps else Totals(), sums["by_scope"] if steps else {},
                             kv, weights, activations, per_device, len(samples),
                             last.profile if last else None, kv_layers)


# --- counting -------------------------------------------------------------------------------
def _new_cache(model: torch.nn.Module) -> Any:
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def _count_prefill(model, batch, prompt_len, devices, weight_dtype, bound):
    ids = fake_inputs(model, batch, prompt_len, high=_vocab(model))
    cache = _new_cache(model)
    with torch.no_grad(), OpCounter(devices=devices, weight_dtype=weight_dtype, bound=bound) as c:
        with c.phase("prefill"):
            model(ids, past_key_values=cache, use_cache=True)
    return c.profile, {sim.name: sim for sim in c.simulations()}, cache_layer_bytes(cache)


def _vocab(model: torch.nn.Module) -> int:
    return int(getattr(model.config, "vocab_size", 2) or 2)


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


def sample_step(model, batch: int, past: int, devices: Any, weight_dtype: str | None,
                bound: bool = False) -> StepSample:
    """Count one decode step at cache length ``past``. A setup prefill of ``past`` tokens builds
    the cache inside the same count (so the simulator knows which device holds it); only the
    step itself, labelled "decode", is kept."""
    setup_ids = fake_inputs(model, batch, past, high=_vocab(model))
    step_ids = fake_inputs(model, batch, 1, high=_vocab(model))
    cache = _new_cache(model)
    with torch.no_grad(), OpCounter(devices=devices, weight_dtype=weight_dtype, bound=bound) as c:
        with c.phase("prefill"):
            model(setup_ids, past_key_values=cache, use_cache=True)
        start = len(c._state.records)
        with c.phase("decode"):
            model(step_ids, past_key_values=cache, use_cache=True)
    return _sample_of(c, past, range(start, len(c.profile.records)), cache_layer_bytes(cache))


def _sample_of(c: OpCounter, past: int, index: range, kv_bytes: tuple[int, ...]) -> StepSample:
    profile = c.profile
    records = [profile.records[i] for i in index]
    timing = {}
    for sim in c.simulations():
        timing[sim.name] = tuple(
            (t.t_compute, t.t_memory, t.t_overhead, t.t_transfer + t.t_comm,
             t.energy_j - t.static_power_w * t.time_s, t.static_power_w)
            for t in (sim.ops[i] for i in index))
    return StepSample(past, tuple((r.op, r.scope, r.dtype) for r in records),
                      tuple(tuple(getattr(r.cost, f) or 0 for f in _COUNT_FIELDS) for r in records),
                      timing, dict(profile.phase_peaks).get("decode", 0), kv_bytes, profile)


Segments = list[tuple[int, int]]


def _sampled(model, batch, prompt_len, steps, devices, weight_dtype, bound, report) -> tuple[dict[int, StepSample], Segments]:
    """The segment search of the module docstring: samples, and the ranges found affine."""
    samples: dict[int, StepSample] = {}
    segments: Segments = []

    def get(past: int) -> StepSample:
        if past not in samples:
            samples[past] = sample_step(model, batch, past, devices, weight_dtype, bound)
            report(len(samples), 0, "decode steps counted (the rest summed)")   # total unknown
        return samples[past]

    def segment(a: int, b: int) -> None:
        if b - a < 3:                                     # short ranges: every step
            for p in range(a, b + 1):
                get(p)
                segments.append((p, p))
            return
        if _affine([get(p) for p in (a, a + 1, (a + b) // 2, b)]):
            segments.append((a, b))
        else:
            segment(a, (a + b) // 2)
            segment((a + b) // 2 + 1, b)

    segment(prompt_len, prompt_len + steps - 1)
    return samples, segments


def _every_step(model, batch, prompt_len, steps, devices, weight_dtype, bound, report) -> tuple[dict[int, StepSample], Segments]:
    """Reference: one count with the prefill and every decode step."""
    ids = [fake_inputs(model, batch, prompt_len, high=_vocab(model))]
    ids += [fake_inputs(model, batch, 1, high=_vocab(model)) for _ in range(steps)]
    cache = _new_cache(model)
    bounds = []
    with torch.no_grad(), OpCounter(devices=devices, weight_dtype=weight_dtype, bound=bound) as c:
        with c.phase("prefill"):
            model(ids[0], past_key_values=cache, use_cache=True)
        for k in range(steps):
            start = len(c._state.records)
            with c.phase("decode"):
                model(ids[k + 1], past_key_values=cache, use_cache=True)
            bounds.append((start, len(c._state.records), cache_layer_bytes(cache)))
            report(k + 1, steps, "decode steps counted")
    samples = {prompt_len + k: _sample_of(c, prompt_len + k, range(a, b), kv) for k, (a, b, kv) in enumerate(bounds)}
    return samples, [(p, p) for p in sorted(samples)]


# --- sums over steps --------------------------------------------------------------------------
def _affine(samples: Sequence[StepSample]) -> bool:
    """Same op stream, and every value on one line through the first two samples."""
    if len(samples) < 3:
        return len({s.keys for s in samples}) == 1
    s0, s1 = samples[0], samples[1]
    if any(s.keys != s0.keys for s in samples):
        return False
    d = s1.past - s0.past
    for s in samples[2:]:
        k = s.past - s0.past
        for v0, v1, v in zip(s0.counts, s1.counts, s.counts):
            if any((x - x0) * d != (x1 - x0) * k for x0, x1, x in zip(v0, v1, v)):
                return False
        for name in s0.timing:
            for v0, v1, v in zip(s0.timing[name], s1.timing[name], s.timing[name]):
                for x0, x1, x in zip(v0, v1, v):
                    if not math.isclose(x, x0 + (x1 - x0) * k / d, rel_tol=1e-9, abs_tol=1e-18):
                        return False
    return True


def _sum_decode(samples: Mapping[int, StepSample], segments: Segments, names: list[str]) -> dict:
    """Sums over the decode steps of every segment (closed forms of affine values)."""
    calls = sum((b - a + 1) * len(samples[a].keys) for a, b in segments)
    totals = [0] * len(_COUNT_FIELDS)
    by_scope: dict[str, list[int]] = {}
    timing = {n: [0.0, 0.0, 0.0, 0.0] for n in names}     # time, energy, compute-bound, memory-bound
    for a, b in segments:
        s0 = samples[a]
        s1 = samples[a + 1] if b > a else None
        n = b - a + 1
        offset_sum = n * (n - 1) // 2                     # sum over L of (L - a)
        for key, v0, v1 in zip(s0.keys, s0.counts, s1.counts if s1 else s0.counts):
            acc = by_scope.setdefault(key[1], [0] * len(_COUNT_FIELDS))
            for f, (x0, x1) in enumerate(zip(v0, v1)):
                value = n * x0 + (x1 - x0) * offset_sum
                totals[f] += value
                acc[f] += value
        for name in names:
            rows1 = s1.timing[name] if s1 else s0.timing[name]
            for r0, r1 in zip(s0.timing[name], rows1):
                busy, compute_side, memory_side = _sum_max(r0[0], r1[0] - r0[0], r0[1], r1[1] - r0[1], n)
                overhead = n * r0[2] + (r1[2] - r0[2]) * offset_sum
                transfer = n * r0[3] + (r1[3] - r0[3]) * offset_sum
                e_dyn = n * r0[4] + (r1[4] - r0[4]) * offset_sum
                t = timing[name]
                t[0] += busy + overhead + transfer
                t[1] += e_dyn + r0[5] * (busy + overhead + transfer)
                t[2] += compute_side
                t[3] += memory_side
    return {"totals": Totals(**dict(zip(_COUNT_FIELDS, totals)), calls=calls),
            "by_scope": {k: Totals(**dict(zip(_COUNT_FIELDS, v))) for k, v in by_scope.items()},
            "timing": {n: PhaseTiming(*timing[n]) for n in names}}


def _sum_max(c0: float, cs: float, m0: float, ms: float, n: int) -> tuple[float, float, float]:
    """Sum over k = 0..n-1 of max(c0 + cs*k, m0 + ms*k): (sum, compute-side part, memory-side part);
    ties count as compute, as the simulator's bound does."""
    def affine_sum(v0: float, slope: float, lo: int, hi: int) -> float:
        if hi < lo:
            return 0.0
        count = hi - lo + 1
        return count * v0 + slope * (lo + hi) * count / 2

    d0, ds = c0 - m0, cs - ms
    if ds == 0:
        compute_ranges = [(0, n - 1)] if d0 >= 0 else []
    else:
        root = -d0 / ds                                  # d(k) = 0
        if ds > 0:                                       # compute wins from ceil(root) on
            start = max(0, math.ceil(root))
            compute_ranges = [(start, n - 1)]
        else:                                            # compute wins up to floor(root)
            compute_ranges = [(0, min(n - 1, math.floor(root)))]
    c_sum = sum(affine_sum(c0, cs, lo, hi) for lo, hi in compute_ranges)
    covered = sum(max(0, hi - lo + 1) for lo, hi in compute_ranges)
    m_total = affine_sum(m0, ms, 0, n - 1)
    m_in_compute = sum(affine_sum(m0, ms, lo, hi) for lo, hi in compute_ranges)
    m_sum = m_total - m_in_compute if covered < n else 0.0
    return c_sum + m_sum, c_sum, m_sum


def _step_time(sample: StepSample, name: str) -> float:
    return sum(max(r[0], r[1]) + r[2] + r[3] for r in sample.timing[name])


__all__ = ["DeviceGeneration", "GenerationProfile", "PhaseTiming", "StepSample", "cache_bytes", "cache_layer_bytes",
           "profile_generation", "sample_step"]
