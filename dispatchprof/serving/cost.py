"""The step cost model: the simulated time and energy of one engine step as a function of its
batch composition, from a handful of counted compositions (never a counted forward per step).

A step runs sequences i with q_i new tokens each, attending to k_i keys (the tokens already in
its cache plus the new ones). Its **composition** is the feature vector

    x = (1, T = sum q_i, N = number of sequences, K = sum k_i, A = sum q_i * k_i,
         Ac = sum of q_i * k_i over sequences with q_i > 1, q = max q_i, k = max k_i, q * k)

Linear layers cost an affine function of T (weights read once), logits are computed for the
last token of each sequence (N rows, ``logits_to_keep=1``), attention and the KV-cache append of
K and A (Ac: the causal mask of sequences with more than one new token), and the last three
features carry what transformers computes once per padded batch (positions, rotary tables).

**What is fitted: work, not time.** Every op's counts, bytes, output elements, the traffic the
runtime removes, the bytes all-reduced after it, the sequences a step's host launch prepares (N),
a GEMM's M, N, K and the bytes of moved inputs (`dispatchprof.serving.work`) are exactly linear in
x on uniform batches (B sequences of q tokens after p cached ones). Its time is not: a GEMM's tile
and wave efficiency depends on its M (the step's tokens), and a memory term may switch to a
cache's bandwidth. So the model counts ten uniform batches once per model: prefills of q tokens
(p = 0) and decode steps (q = 1) at small B, q, p; an op's quantities at those ten compositions
determine their nine coefficients by exact least squares (the design matrix's pseudo-inverse is
computed in rational arithmetic); a value off the fitted plane (more than 1e-6 of the largest)
raises ValueError: the model is not covered (as does an op stream that changes with the batch,
such as mixture-of-experts routing that leaves experts idle).

**Ops only in multi-token steps.** Some models run ops only when a sequence has more than one
new token (DeepSeek-V3's, Kimi-K2's and gpt-oss's attention output: a ``reshape`` that is a view
for one token and a copy, ``aten.clone``, for more). The counted steps then form two streams:
decode steps (q = 1) and multi-token steps (q > 1), the first a subsequence of the second. The
ops of both are fitted over all ten compositions as above; an op only in the second is fitted
over the five multi-token compositions on (1, T, N) (token-wise work: the other features are
not separable there), the two left over checking it exactly as above, and it is costed only in
steps whose longest sequence has q > 1 (`Composition.multi_token`), as transformers runs it on
the flattened batch. A step is timed by rebuilding each
op's record and plan at its composition and calling the simulator's `time_op`
(`dispatchprof.sim.timing`), its ops in stream order on the host/device timeline
(`dispatchprof.sim.timeline.step_time`), energy = dynamic energy + static power x time as
`Simulation.total` composes it. Ops of equal form and coefficients (the same op in every decoder
layer) are timed once. Tests compare steps with direct simulation of counted steps at random
compositions (equal to 1e-9 relative).

**Runtime and tensor parallelism.** The counts are planned by the simulator's runtime (eager,
compiled, serving: kernels, fusion, host launches; `dispatchprof.sim.simulate.op_plans`) and
split over ``tp`` devices as `simulate` does; the serving runtime's last-position logits are
already in the count (``logits_to_keep=1``), so no LM-head share is applied on top. Times are one
device's; energy is one device's (serving multiplies by tp).

A mixed step (prefill chunks and decodes) is costed as the flattened batch of its sequences, as
a varlen serving kernel runs it; a chunk after cached tokens uses this op stream (the attention
kernel applies the causal mask itself) rather than transformers' explicit mask ops.

**Causal flash kernels.** Under the compiled and serving runtimes a causal attention op computes
only the score tiles its mask leaves (`dispatchprof.sim.runtime.skips_masked_tiles`), per
sequence: not linear in x, so a composition also carries its sequences' computed and counted
scores (`Composition.scores`) and such an op is timed at its counted work times their ratio, as
direct simulation times a uniform batch. `Composition.decoding` with more new tokens per sequence
than a tile has rows takes every sequence at the mean cache length.

**KV-cache dtype.** With ``kv_dtype``, the counted steps are planned with the cache in that dtype,
as the simulator plans them (`dispatchprof.sim.runtime.narrow_kv_cache`: attention's key and value
reads and the cache an append copies move kv_bits per element); the fit carries that into the
coefficients, and the arithmetic does not change.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np
import torch

from dispatchprof.llm.generation import StepSpan, kv_element_bits, model_bits
from dispatchprof.results.profile import Profile
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.serving.work import OpForm, moved_inputs, op_form, op_timing, quantities
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.device import WEIGHT_BITS, Device
from dispatchprof.sim.attention import FLASH_TILE, attention_heads, flash_scores
from dispatchprof.sim.parallel import check_tp
from dispatchprof.sim.placement import Scenarios
from dispatchprof.sim.runtime import skips_masked_tiles
from dispatchprof.sim.simulate import op_plans
from dispatchprof.sim.timeline import step_time
from dispatchprof.sim.timing import OpTiming

FEATURES = ("1", "T", "N", "K", "A", "Ac", "q", "k", "qk")
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
    #: (scores a causal flash kernel computes, scores counted) summed over the sequences: per
    #: sequence (`dispatchprof.sim.attention.flash_scores`(q_i, k_i), q_i * k_i); (0, 0): all computed
    scores: tuple[float, float] = (0.0, 0.0)

    @property
    def flash_share(self) -> float:
        """The share of a causal attention op's counted work that a flash kernel computes in this
        step (the varlen kernel runs each sequence's own tiles)."""
        computed, counted = self.scores
        return computed / counted if counted else 1.0

    @staticmethod
    def of(pairs: Sequence[tuple[int, ...]]) -> Composition:
        """From (q_i, k_i) per scheduled sequence (further entries ignored)."""
        t = n = kk = a = ac = 0
        qm = km = computed = 0
        for q, k, *_ in pairs:
            t += q
            n += 1
            kk += k
            a += q * k
            computed += flash_scores(q, k)
            if q > 1:
                ac += q * k
            qm, km = max(qm, q), max(km, k)
        return Composition((1, t, n, kk, a, ac, qm, km, qm * km), (computed, a))

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
        # up to a tile's rows every key is computed (exact); more: every sequence at the mean length
        computed = q * keys if q <= FLASH_TILE[0] else n * flash_scores(q, round(keys / n))
        return Composition((1, n * q, n, keys, q * keys, q * keys if q > 1 else 0, q, computed_max + q,
                            q * (computed_max + q)), (computed, q * keys))

    @property
    def multi_token(self) -> bool:
        """Whether a sequence of the step has more than one new token (q = max q_i > 1)."""
        return self.x[6] > 1

    def split(self, groups: int) -> Composition:
        """The share of one of ``groups`` attention data-parallel groups when the step's sequences
        are spread evenly over them: the sums (T, N, K, A, Ac and the scores) divided by
        ``groups``, the maxima kept (`dispatchprof.serving.layout`)."""
        if groups == 1:
            return self
        x = self.x
        return Composition((x[0], *(v / groups for v in x[1:6]), *x[6:]),
                           (self.scores[0] / groups, self.scores[1] / groups))

    def padded(self, tokens: int) -> Composition:
        """The same step run with ``tokens`` tokens (a CUDA graph's padded batch: the extra
        tokens go through every token-wise op, and are no sequence and attend to nothing)."""
        return dataclasses.replace(self, x=(self.x[0], tokens, *self.x[2:]))

    def merge(self, o: Composition) -> Composition:
        """The step running the sequences of both (sums add, maxima take the larger)."""
        a, b = self.x, o.x
        qm, km = max(a[6], b[6]), max(a[7], b[7])
        scores = (self.scores[0] + o.scores[0], self.scores[1] + o.scores[1])
        return Composition((1, *(u + v for u, v in zip(a[1:6], b[1:6])), qm, km, qm * km), scores)


@dataclass(frozen=True)
class StepCost:
    """Time (s) and energy (J) of one step (one device of a tensor-parallel group)."""

    time_s: float
    energy_j: float


@dataclass(frozen=True)
class CountedStep:
    """One counted composition: per scenario, per op its form and quantities (`work`)."""

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


@dataclass(frozen=True)
class OpGroup:
    """Ops of equal form and coefficients (the same op in every decoder layer): how many, and
    per quantity its coefficients over FEATURES."""

    count: int
    form: OpForm
    coeffs: tuple[tuple[float, ...], ...]
    #: run only in steps with a sequence of more than one new token (module docstring)
    multi: bool = False


class StepCostModel:
    """Step time and energy on one scenario as functions of the composition (module docstring)."""

    def __init__(self, scenario: str, groups: Sequence[OpGroup], order: Sequence[int], devices: dict[str, Device],
                 static_power_w: float, weight_dtype: str | None, scopes: Sequence[str] = ()) -> None:
        self.scenario, self.groups, self.order = scenario, tuple(groups), tuple(order)
        self.scopes = tuple(scopes)                  # per op in stream order: its module scope (may be empty)
        self.devices, self.static_power_w, self.weight_dtype = devices, static_power_w, weight_dtype
        self.ops = len(self.order)
        self._last: list = [None] * len(self.groups)          # per group: (quantities, OpTiming) of the last step
        self._runs = _runs([self.groups[g].form.host != "" for g in self.order], self.order)
        self._multi = any(g.multi for g in self.groups)
        single = [g for g in self.order if not self.groups[g].multi]
        self._single_runs = _runs([self.groups[g].form.host != "" for g in single], single)

    def present(self, c: Composition) -> list[bool] | None:
        """Per op in stream order, whether it runs in a step of composition ``c``; None: all do."""
        if not self._multi or c.multi_token:
            return None
        return [not self.groups[g].multi for g in self.order]

    @functools.cached_property
    def _quantity_matrix(self) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Every group's quantities as rows of one matrix over FEATURES, and the rows of each group."""
        rows = [v for grp in self.groups for v in grp.coeffs]
        ends = np.cumsum([len(grp.coeffs) for grp in self.groups]).tolist()
        return np.array(rows, dtype=np.float64).reshape(len(rows), -1), list(zip([0] + ends[:-1], ends))

    def group_values(self, c: Composition) -> list[list[float]]:
        """Per group, its quantities (`dispatchprof.serving.work.QUANTITIES`) at composition ``c``."""
        matrix, bounds = self._quantity_matrix
        flat = (matrix @ np.asarray(c.x, dtype=np.float64)).tolist() if len(matrix) else []
        return [flat[a:b] for a, b in bounds]

    def op_timings(self, c: Composition) -> list[OpTiming]:
        """One OpTiming per group at composition ``c`` (`dispatchprof.serving.work.op_timing`)."""
        values = self.group_values(c)
        out = []
        share = c.flash_share
        for k, (g, v) in enumerate(zip(self.groups, values)):
            last = self._last[k]                     # a decode run changes only the context's ops
            key = (v, share if g.form.flash else 1.0)
            if last is None or last[0] != key:
                last = self._last[k] = (key, op_timing(g.form, v, self.devices, self.weight_dtype, key[1]))
            out.append(last[1])
        return out

    def cost(self, c: Composition) -> StepCost:
        """Time and energy of a step of composition ``c``: its ops in stream order on the
        host/device timeline (`dispatchprof.sim.timeline.step_time`); energy = their dynamic
        energy + static power x the step's time, as `Simulation.total` composes it."""
        timings = self.op_timings(c)
        times = [t.time_s for t in timings]
        entries: list = []
        every = not self._multi or c.multi_token
        for lead, run in (self._runs if every else self._single_runs):
            if lead >= 0:
                entries.append(timings[lead])
            if run:
                entries.append(_Run(sum(n * times[g] for g, n in run)))
        time = step_time(entries)
        dynamic = sum(g.count * t.dynamic_j for g, t in zip(self.groups, timings) if every or not g.multi)
        return StepCost(time, dynamic + self.static_power_w * time)


@dataclass(frozen=True, slots=True)
class _Run:
    """Consecutive ops that the host does not issue (t_host = 0): on the timeline each starts
    when the one before it ends (`step_time`), so the run enters it as one entry of their summed
    time. Tests compare every runtime's steps with direct simulation."""

    time_s: float
    t_host: float = 0.0


def _runs(issued: Sequence[bool], order: Sequence[int]) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
    """The op stream as (group of an op the host issues or -1, the following ops it does not
    issue as (group, how many))."""
    out: list[tuple[int, dict[int, int]]] = []
    for g, host in zip(order, issued):
        if host:
            out.append((g, {}))
            continue
        if not out:
            out.append((-1, {}))
        run = out[-1][1]
        run[g] = run.get(g, 0) + 1
    return [(lead, tuple(run.items())) for lead, run in out]


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


def kv_shards(config: object, tp: int) -> int:
    """Over how many of a tensor-parallel group's ``tp`` devices a token's KV cache is split:
    ``tp`` (each holds its heads' keys and values), but 1 for multi-head latent attention (a
    config with ``kv_lora_rank``: DeepSeek-V2/V3, Kimi-K2): its cache is one latent of
    kv_lora_rank + qk_rope_head_dim elements per token and layer, which every device of the group
    holds whole (vLLM's and SGLang's MLA backends keep one KV head per rank)."""
    return 1 if getattr(config, "kv_lora_rank", None) else tp


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
        plans = [dataclasses.replace(p, activation_share=1.0) for p in plans]
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


def count_design(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
                 bound: bool = False, design: Sequence[tuple[int, tuple[int, ...]]] = DESIGN,
                 runtime: str = "serving", tp: int = 1, kv_dtype: str | None = None,
                 memo: CountMemo | None = None) -> list[CountedStep]:
    """Count the chains of ``design``: (B, tokens per step), the first at full depth and the others
    from few layers where the model allows (`CountMemo`; from ``memo`` when given), checked by
    fitting them together: where the fit fails, every chain is counted at full depth."""
    memo = CountMemo(model) if memo is None else memo

    def counted() -> list[CountedStep]:
        return [s for b, tokens in design
                for s in count_steps(model, b, tokens, scenarios, weight_dtype, bound, runtime, tp, kv_dtype, memo)]

    steps = counted()
    if memo.repeated:
        try:
            fit(steps)
        except ValueError as e:
            memo.count_full_depth(f"chains counted with few layers disagree with the full-depth one: {e}")
            steps = counted()
    return steps


def fit_cost_models(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
                    bound: bool = False, runtime: str = "serving", tp: int = 1,
                    kv_dtype: str | None = None) -> dict[str, StepCostModel]:
    """Count the design and fit one StepCostModel per scenario."""
    return fit(count_design(model, scenarios, weight_dtype, bound, runtime=runtime, tp=tp, kv_dtype=kv_dtype))


def fit(steps: Sequence[CountedStep]) -> dict[str, StepCostModel]:
    """Coefficients of every op's quantities from counted steps (exact least squares); ops of
    equal form and coefficients are grouped; ops only in multi-token steps are fitted on those
    (module docstring)."""
    stream, index_of, extra = _streams(steps)
    multi = [s for s in steps if s.q > 1]
    rows = [s.features() for s in steps]
    pinv, denominator = integer_pseudo_inverse(rows)
    multi_rows = [s.features()[:len(MULTI_FEATURES)] for s in multi]
    multi_fit = integer_pseudo_inverse(multi_rows) if extra else None
    first = next(s for s in steps if s.q > 1) if extra else steps[0]
    models = {}
    for name in first.ops:
        index: dict[tuple, int] = {}
        groups: list[list] = []
        order = []
        for i, key in enumerate(stream):
            only_multi = i in extra
            used = multi if only_multi else steps
            samples = [s.ops[name][index_of[id(s)][i]] for s in used]
            form, values = samples[0]
            if any(f != form or len(v) != len(values) for f, v in samples):
                raise ValueError(f"{form.op} in {form.scope or '<root>'} on {name} changes form (kernel, launch, "
                                 f"moved inputs or shape) with the batch composition: the serving cost model does "
                                 f"not cover this model")
            p, d, x = (*multi_fit, multi_rows) if only_multi else (pinv, denominator, rows)
            coeffs = []
            for q in range(len(values)):
                column = [_exact(v[q]) for _, v in samples]
                numerators = [sum(a * v for a, v in zip(prow, column)) for prow in p]
                _check_linear(numerators, d, x, column, key, name)
                c = [float(Fraction(n, 1) / d) for n in numerators]
                coeffs.append(tuple(c + [0.0] * (len(rows[0]) - len(c))))     # a multi-token op's: 0 beyond (1, T, N)
            group_key = (dataclasses.replace(form, scope=""), tuple(coeffs), only_multi)   # scope: same time
            if group_key not in index:
                index[group_key] = len(groups)
                groups.append([0, form, tuple(coeffs), only_multi])
            groups[index[group_key]][0] += 1
            order.append(index[group_key])
        models[name] = StepCostModel(name, [OpGroup(*g) for g in groups], order, first.devices[name],
                                     first.static_power_w[name], first.weight_dtype, [k[1] for k in stream])
    return models


#: The features an op only in multi-token steps is fitted on (module docstring).
MULTI_FEATURES = FEATURES[:3]


def _streams(steps: Sequence[CountedStep]) -> tuple[tuple, dict[int, list[int]], set[int]]:
    """The op stream of the multi-token steps (keys), per step (by id) the index of each stream op
    in its own ops (-1: absent), and the stream positions of ops only in multi-token steps. Every
    decode step must have one stream, every multi-token step one, the first a subsequence of the
    second (module docstring); else the model's steps are not one op stream."""
    def refuse(s: CountedStep, first: CountedStep) -> ValueError:
        return ValueError(f"the op stream of a step of {s.batch} x {s.q} tokens after {s.past} differs from that "
                          f"of {first.batch} x {first.q} after {first.past}: this model's steps are not one op "
                          f"stream, which the serving cost model needs")

    single = [s for s in steps if s.q == 1]
    multi = [s for s in steps if s.q > 1]
    for group in (single, multi):
        for s in group[1:]:
            if s.keys != group[0].keys or any(len(s.ops[n]) != len(group[0].ops[n]) for n in group[0].ops):
                raise refuse(s, group[0])
    if not single or not multi or single[0].keys == multi[0].keys:
        first = steps[0]
        for s in steps[1:]:
            if s.keys != first.keys or any(len(s.ops[n]) != len(first.ops[n]) for n in first.ops):
                raise refuse(s, first)
        same = list(range(len(first.keys)))
        return first.keys, {id(s): same for s in steps}, set()
    full, part = multi[0].keys, single[0].keys
    positions, j = [], 0
    for i, key in enumerate(full):            # the decode stream in order within the multi-token one
        if j < len(part) and part[j] == key:
            positions.append(j)
            j += 1
        else:
            positions.append(-1)
    if j != len(part):
        raise refuse(single[0], multi[0])
    same = list(range(len(full)))
    index_of = {id(s): (same if s.q > 1 else positions) for s in steps}
    return full, index_of, {i for i, p in enumerate(positions) if p < 0}


def _check_linear(numerators: Sequence, denominator: int, rows: Sequence[Sequence[int]], values: Sequence,
                  key: tuple[str, str, str], scenario: str) -> None:
    """The counted values must lie on the fitted plane (the design has one decode step more than
    coefficients), to 1e-6 of the largest, in exact arithmetic; else the op's work is not linear
    in the composition for this model."""
    scale = max(abs(v) for v in values) * denominator
    for x, v in zip(rows, values):
        if abs(sum(n * b for n, b in zip(numerators, x)) - v * denominator) > Fraction(1, 10**6) * scale:
            raise ValueError(f"the work of {key[0]} in {key[1] or '<root>'} on {scenario} is not linear in the batch "
                             f"composition (tokens, sequences, context): the serving cost model does not cover "
                             f"this model")


def _exact(v: float) -> int | Fraction:
    """A counted quantity as an exact number (counts and bytes are integers)."""
    return int(v) if float(v).is_integer() else Fraction(v)


def integer_pseudo_inverse(rows: Sequence[Sequence[int]]) -> tuple[list[list[int]], int]:
    """(X^T X)^-1 X^T of an integer design matrix X, exactly, as an integer matrix and one
    common denominator: coefficients = (P values) / denominator, rational for integer values."""
    x = [[Fraction(v) for v in row] for row in rows]
    m, n = len(x), len(x[0])
    xtx = [[sum(x[r][i] * x[r][j] for r in range(m)) for j in range(n)] for i in range(n)]
    inv = _invert(xtx)
    exact = [[sum(inv[i][j] * x[r][j] for j in range(n)) for r in range(m)] for i in range(n)]
    denominator = math.lcm(*(f.denominator for row in exact for f in row))
    return [[int(f * denominator) for f in row] for row in exact], denominator


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
