"""The step cost model: the simulated time and energy of one engine step as a function of its
batch composition, from a handful of counted compositions (never a counted forward per step).

A step runs sequences i with q_i new tokens each, attending to k_i keys (the tokens already in
its cache plus the new ones). Its **composition** is the feature vector

    x = (1, T = sum q_i, N = number of sequences, K = sum k_i, A = sum q_i * k_i,
         Ac = sum of q_i * k_i over sequences with q_i > 1, q = max q_i, k = max k_i, q * k)

Linear layers cost an affine function of T (weights read once), logits are computed for the
last token of each sequence (N rows, ``logits_to_keep=1``), attention and the KV-cache append of
K and A (Ac: the causal mask of sequences with more than one new token), and the last three features carry what transformers computes once per padded batch
(positions, rotary tables). Every op's counts, bytes and therefore every part of its
`OpTiming` (t_compute, t_memory, t_overhead, t_transfer + t_comm, dynamic energy) are exactly
linear in x on uniform batches (B sequences of q tokens after p cached ones).

So the model counts ten uniform batches once per model and set of scenarios: prefills of
q tokens (p = 0) and decode steps (q = 1) at small B, q, p. An op's part values at those ten
compositions determine its nine coefficients by exact least squares (the design matrix's
pseudo-inverse is computed in rational arithmetic); a decode cost off the fitted line in the
cache length (more than 1e-6 of the op's largest value) raises ValueError: the model is not
covered (mixture-of-experts routing
that leaves experts idle changes the op stream and is refused as well). Tests compare
predictions with counting at random other compositions (equal to 1e-9 relative). A mixed step (prefill chunks and decodes)
is costed as the flattened batch of its sequences, as a varlen serving kernel runs it; a chunk
after cached tokens uses this op stream (the attention kernel applies the causal mask itself)
rather than transformers' explicit mask ops.

A step's time follows `OpTiming.time_s` op by op: ``sum over ops of max(t_compute, t_memory) +
t_overhead + t_transfer + t_comm``, and energy ``dynamic + static_power * time``. Ops with equal
coefficients (the same op in every decoder layer) are evaluated once with their multiplicity.

**KV-cache dtype.** With ``kv_dtype``, the part of t_memory and of the dynamic energy that grows
with K (the bytes of cached keys and values read and appended) scales by
kv_bits / model_bits; the arithmetic does not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.llm.generation import cache_bytes, kv_element_bits, model_bits
from dispatchprof.llm.models import token_ids
from dispatchprof.sim.device import WEIGHT_BITS
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.placement import Scenarios

FEATURES = ("1", "T", "N", "K", "A", "Ac", "q", "k", "qk")
_K = FEATURES.index("K")
#: The counted compositions as chains (B, new tokens per step): prefills of B x q tokens, two of
#: them followed by decode steps: (B, q, p) = (1, 1, 0) (1, 4, 0) (1, 1, 4) (2, 2, 0) (2, 5, 0)
#: (2, 1, 5) (2, 1, 6) (2, 1, 7) (3, 3, 0) (1, 7, 0): nine determine the nine coefficients,
#: the tenth checks that decode costs lie on a line in the cache length (`fit`); tests check
#: other compositions against counting.
DESIGN = ((1, (1,)), (1, (4, 1)), (2, (2,)), (2, (5, 1, 1, 1)), (3, (3,)), (1, (7,)))
#: Storage bits of the KV-cache dtypes (``kv_dtype``): those weights can be stored in.
KV_BITS = WEIGHT_BITS


@dataclass(frozen=True, slots=True)
class Composition:
    """The feature vector of a step (see the module docstring)."""

    x: tuple[float, ...]

    @staticmethod
    def of(pairs: Sequence[tuple[int, int]]) -> Composition:
        """From (q_i, k_i) per scheduled sequence."""
        t = n = kk = a = ac = 0
        qm = km = 0
        for q, k in pairs:
            t += q
            n += 1
            kk += k
            a += q * k
            if q > 1:
                ac += q * k
            qm, km = max(qm, q), max(km, k)
        return Composition((1, t, n, kk, a, ac, qm, km, qm * km))

    @staticmethod
    def uniform(batch: int, q: int, past: int) -> Composition:
        """B sequences of q new tokens after ``past`` cached ones."""
        return Composition.of([(q, past + q)] * batch)

    @staticmethod
    def decoding(n: int, computed_sum: float, computed_max: float, q: int = 1) -> Composition:
        """``n`` decoding sequences of q tokens each, holding ``computed_sum`` tokens in all and
        ``computed_max`` at most: k_i = computed_i + q."""
        if n == 0:
            return Composition((1, 0, 0, 0, 0, 0, 0, 0, 0))
        keys = computed_sum + n * q
        return Composition((1, n * q, n, keys, q * keys, q * keys if q > 1 else 0, q, computed_max + q,
                            q * (computed_max + q)))

    def merge(self, o: Composition) -> Composition:
        """The step running the sequences of both (sums add, maxima take the larger)."""
        a, b = self.x, o.x
        qm, km = max(a[6], b[6]), max(a[7], b[7])
        return Composition((1, *(u + v for u, v in zip(a[1:6], b[1:6])), qm, km, qm * km))


@dataclass(frozen=True)
class OpGroup:
    """Ops with equal coefficients: their count and, per part, the 8 coefficients."""

    count: int
    t_compute: tuple[float, ...]
    t_memory: tuple[float, ...]
    t_other: tuple[float, ...]       # t_overhead + t_transfer + t_comm
    dynamic_j: tuple[float, ...]
    static_power_w: float


@dataclass(frozen=True)
class StepCost:
    """Time (s) and energy (J) of one step."""

    time_s: float
    energy_j: float


@dataclass(frozen=True)
class CountedStep:
    """One counted composition: per op its key and, per scenario, its parts."""

    batch: int
    q: int
    past: int
    keys: tuple[tuple[str, str, str], ...]
    parts: dict[str, tuple[tuple[float, float, float, float, float], ...]]   # + static power
    kv_bytes_per_token: float                 # KV cache bytes per cached token (all layers)
    memory: dict[str, tuple[float | None, int]]   # scenario -> (capacity bytes or None, weight bytes)


class StepCostModel:
    """Step time and energy on one scenario as functions of the composition (module docstring)."""

    def __init__(self, scenario: str, groups: Sequence[OpGroup], ops: int) -> None:
        self.scenario, self.groups, self.ops = scenario, tuple(groups), ops
        # compiled: the linear parts summed over ops; per group the sparse compute and memory terms
        self._time_linear = _weighted_sum([(g.count, g.t_other) for g in self.groups])
        self._energy_linear = _weighted_sum([(g.count, g.dynamic_j) for g in self.groups]
                                            + [(g.count * g.static_power_w, g.t_other) for g in self.groups])
        self._busy = [(g.count, g.count * g.static_power_w, _sparse(g.t_compute), _sparse(g.t_memory))
                      for g in self.groups]

    def cost(self, c: Composition) -> StepCost:
        """Time and energy of a step of composition ``c``."""
        x = c.x
        time = sum(a * b for a, b in zip(self._time_linear, x))
        energy = sum(a * b for a, b in zip(self._energy_linear, x))
        for count, static, tc_terms, tm_terms in self._busy:
            tc = 0.0
            for i, a in tc_terms:
                tc += a * x[i]
            tm = 0.0
            for i, a in tm_terms:
                tm += a * x[i]
            busy = tc if tc > tm else tm
            time += count * busy
            energy += static * busy
        return StepCost(time, energy)

    def with_kv_scale(self, scale: float) -> StepCostModel:
        """The model with the K-proportional memory time and energy scaled (KV-cache dtype)."""
        def scaled(v: tuple[float, ...]) -> tuple[float, ...]:
            return tuple(a * scale if i == _K else a for i, a in enumerate(v))
        groups = [OpGroup(g.count, g.t_compute, scaled(g.t_memory), g.t_other, scaled(g.dynamic_j),
                          g.static_power_w) for g in self.groups]
        return StepCostModel(self.scenario, groups, self.ops)


def _sparse(v: Sequence[float]) -> tuple[tuple[int, float], ...]:
    return tuple((i, a) for i, a in enumerate(v) if a != 0)


def _weighted_sum(terms: Sequence[tuple[float, Sequence[float]]]) -> tuple[float, ...]:
    out = [0.0] * len(FEATURES)
    for w, v in terms:
        for i, a in enumerate(v):
            out[i] += w * a
    return tuple(out)


def count_steps(model: torch.nn.Module, batch: int, tokens: Sequence[int], scenarios: Scenarios,
                weight_dtype: str | None = None, bound: bool = False) -> list[CountedStep]:
    """Count consecutive uniform steps of ``batch`` sequences, step i feeding ``tokens[i]`` new
    tokens per sequence after the earlier ones (a prefill, then decode steps, all in one count so
    that the simulator knows where the cache lives); logits for the last token of each sequence."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    spans, past = [], 0
    with torch.no_grad(), OpCounter(devices=scenarios, weight_dtype=weight_dtype, bound=bound) as c:
        for q in tokens:
            start = c.records_counted
            with c.phase("decode" if past else "prefill"):
                model(token_ids(model, batch, q), past_key_values=cache, use_cache=True,
                      logits_to_keep=1)
            spans.append((q, past, start, c.records_counted))
            past += q
    profile = c.profile
    memory = {}
    for name in scenarios:
        checks = check_capacity(profile, scenarios[name], weight_dtype)
        caps = [ch.capacity_bytes for ch in checks]
        memory[name] = (None if None in caps else sum(caps), sum(ch.weights_bytes for ch in checks))
    sims = c.simulations()
    per_token = cache_bytes(cache) / (batch * past)
    return [CountedStep(batch, q, p, tuple((r.op, r.scope, r.dtype) for r in profile.records[a:b]),
                        {sim.name: tuple((t.t_compute, t.t_memory, t.t_overhead + t.t_transfer + t.t_comm,
                                          t.dynamic_j, t.static_power_w) for t in sim.ops[a:b]) for sim in sims},
                        per_token, memory)
            for q, p, a, b in spans]


def count_step(model: torch.nn.Module, batch: int, q: int, past: int, scenarios: Scenarios,
               weight_dtype: str | None = None, bound: bool = False) -> CountedStep:
    """One uniform step: ``batch`` sequences of ``q`` tokens after ``past`` cached tokens (a
    counted prefill of ``past`` tokens first)."""
    return count_steps(model, batch, [past, q] if past else [q], scenarios, weight_dtype, bound)[-1]


def count_design(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
                 bound: bool = False, design: Sequence[tuple[int, tuple[int, ...]]] = DESIGN) -> list[CountedStep]:
    """Count the chains of ``design``: (B, tokens per step)."""
    return [s for b, tokens in design for s in count_steps(model, b, tokens, scenarios, weight_dtype, bound)]


def fit_cost_models(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
                    bound: bool = False) -> dict[str, StepCostModel]:
    """Count the design and fit one StepCostModel per scenario."""
    return fit(count_design(model, scenarios, weight_dtype, bound))


def fit(steps: Sequence[CountedStep]) -> dict[str, StepCostModel]:
    """Coefficients of every op's parts from counted steps (exact least squares)."""
    first = steps[0]
    for s in steps[1:]:
        if s.keys != first.keys:
            raise ValueError(f"the op stream of a step of {s.batch} x {s.q} tokens after {s.past} differs from "
                             f"that of {first.batch} x {first.q} after {first.past}: this model's steps are not "
                             f"one op stream, which the serving cost model needs")
    rows = [Composition.uniform(s.batch, s.q, s.past).x for s in steps]
    pinv = pseudo_inverse(rows)
    models = {}
    for name in first.parts:
        groups: dict[tuple, int] = {}
        for i in range(len(first.keys)):
            coeffs = []
            for part in range(4):
                values = [s.parts[name][i][part] for s in steps]
                coeffs.append(_clean(tuple(sum(p * v for p, v in zip(prow, values)) for prow in pinv)))
                _check_linear(coeffs[-1], rows, values, first.keys[i], name)
            key = (*coeffs, first.parts[name][i][4])
            groups[key] = groups.get(key, 0) + 1
        models[name] = StepCostModel(name, [OpGroup(n, *key) for key, n in groups.items()], len(first.keys))
    return models


def _check_linear(coeffs: Sequence[float], rows: Sequence[Sequence[float]], values: Sequence[float],
                  key: tuple[str, str, str], scenario: str) -> None:
    """The counted values must lie on the fitted plane (the design has one decode step more than
    coefficients); else the step cost is not linear in the composition for this model."""
    scale = max(abs(v) for v in values)
    for x, v in zip(rows, values):
        if abs(sum(a * b for a, b in zip(coeffs, x)) - v) > 1e-6 * scale:
            raise ValueError(f"the cost of {key[0]} in {key[1] or '<root>'} on {scenario} is not linear in the batch "
                             f"composition (tokens, sequences, context): the serving cost model does not cover "
                             f"this model")


#: A large step's features, to judge which fitted coefficients are rounding noise.
_SCALE = (1, 8192, 256, 1e6, 1e8, 1e8, 8192, 1e5, 1e8)


def _clean(coeffs: tuple[float, ...]) -> tuple[float, ...]:
    """Coefficients whose term is below 1e-12 of the op's value at a large step are rounding
    noise of the fit (the exact value is 0): set them to 0."""
    terms = [abs(a * s) for a, s in zip(coeffs, _SCALE)]
    floor = 1e-12 * sum(terms)
    return tuple(0.0 if t < floor else a for a, t in zip(coeffs, terms))


def pseudo_inverse(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    """(X^T X)^-1 X^T of an integer design matrix X, computed exactly, as floats."""
    x = [[Fraction(int(v)) for v in row] for row in rows]
    m, n = len(x), len(x[0])
    xtx = [[sum(x[r][i] * x[r][j] for r in range(m)) for j in range(n)] for i in range(n)]
    inv = _invert(xtx)
    return [[float(sum(inv[i][j] * x[r][j] for j in range(n))) for r in range(m)] for i in range(n)]


def _invert(a: list[list[Fraction]]) -> list[list[Fraction]]:
    n = len(a)
    aug = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if aug[r][col] != 0), None)
        if pivot is None:
            raise ValueError("the counted compositions do not determine the step cost (singular design)")
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                f = aug[r][col]
                aug[r] = [v - f * w for v, w in zip(aug[r], aug[col])]
    return [row[n:] for row in aug]


def kv_scale(kv_dtype: str | None, model: torch.nn.Module) -> float:
    """kv_bits / bits of the model's cache dtype (1 without ``kv_dtype``)."""
    bits = kv_element_bits(model, kv_dtype)
    return 1.0 if bits is None else bits / model_bits(model)
