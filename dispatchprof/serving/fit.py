"""The fit: every op's quantities as exact linear functions of the batch composition, from the
counted steps; ops of equal form and coefficients grouped into a `StepCostModel` per scenario.

**What is fitted: work, not time.** Every op's counts, bytes, output elements, the traffic the
runtime removes, the bytes all-reduced after it, the sequences a step's host launch prepares (N),
a GEMM's M, N, K and the bytes of moved inputs (`dispatchprof.serving.work`) are exactly linear in
the composition x (`dispatchprof.serving.composition`) on uniform batches (B sequences of q tokens
after p cached ones). Its time is not: a GEMM's tile and wave efficiency depends on its M (the
step's tokens), and a memory term may switch to a cache's bandwidth; the step cost model times
the fitted work at each step (`dispatchprof.serving.step_cost`).

Rules:
- an op's quantities at the counted compositions (`dispatchprof.serving.cost.DESIGN`: ten) determine
  its nine coefficients by exact least squares (`dispatchprof.serving.least_squares`); a value off
  the fitted plane by more than 1e-6 of the largest raises ValueError: the model is not covered
  (as does an op whose form changes with the batch, or an op stream that changes, such as
  mixture-of-experts routing that leaves experts idle);
- ops only in multi-token steps (`dispatchprof.serving.op_streams`) are fitted over the
  multi-token compositions (five, none with a cached prefix) on `MULTI_FEATURES` = (1, T, N, Ac)
  (token-wise work and the causal scores; K is T there, so work over a sequence's cached keys is
  fitted as work over its new tokens), the one left over checking them exactly as above; their
  other coefficients are 0;
- ops only in decode steps (a model that decodes through its own ops: `StepCostModel`'s split
  batch) are fitted over the decode compositions (five) on `SINGLE_FEATURES` = (1, T, K, k) (T = N,
  A = K and qk = k there), the one left over checking them;
- an op of both streams whose form is one in every decode step and another in every multi-token
  step (a pointwise op that a multi-token-only copy before it takes into its fused kernel: Qwen3.5's
  attention gate after the attention output's copy) is two ops at its place in the stream: the
  multi-token form fitted as an op only in multi-token steps, the decode form as an op only in
  decode steps (`OpGroup.single`); any other change of form raises ValueError;
- ops of equal form (scope aside: the same time) and coefficients form one `OpGroup`.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Sequence

from dispatchprof.serving.composition import FEATURES
from dispatchprof.serving.counting import CountedStep
from dispatchprof.serving.least_squares import integer_pseudo_inverse
from dispatchprof.serving.op_streams import one_op_stream
from dispatchprof.serving.step_cost import OpGroup, StepCostModel

#: The features an op only in multi-token steps is fitted on (module docstring).
MULTI_FEATURES = ("1", "T", "N", "Ac")
#: The features an op only in decode steps is fitted on (module docstring): T = N, A = K, qk = k there.
SINGLE_FEATURES = ("1", "T", "K", "k")
#: Where an op of the stream runs: in every step, only in multi-token steps, only in decode steps.
EVERY, MULTI, SINGLE = "every", "multi", "single"


def fit(steps: Sequence[CountedStep]) -> dict[str, StepCostModel]:
    """Coefficients of every op's quantities from counted steps (exact least squares); ops of
    equal form and coefficients are grouped; ops only in multi-token steps are fitted on those,
    an op whose form differs by step kind is two ops (module docstring)."""
    stream, index_of, multi_only, single_only = one_op_stream(steps)
    kinds = {MULTI: [s for s in steps if s.q > 1], SINGLE: [s for s in steps if s.q == 1], EVERY: steps}
    width = len(steps[0].features())          # FEATURES, or a seq2seq model's own (no split ops there)
    columns = {EVERY: tuple(range(width)), MULTI: tuple(FEATURES.index(f) for f in MULTI_FEATURES),
               SINGLE: tuple(FEATURES.index(f) for f in SINGLE_FEATURES)}
    designs: dict[str, tuple] = {}

    def design(kind: str) -> tuple:
        if kind not in designs:
            part = [tuple(s.features()[k] for k in columns[kind]) for s in kinds[kind]]
            designs[kind] = integer_pseudo_inverse(part) + (part, columns[kind])
        return designs[kind]

    def runs_in(i: int) -> str:
        return MULTI if i in multi_only else SINGLE if i in single_only else EVERY

    models = {}
    solved: dict[tuple, tuple] = {}              # (where it runs, counted values) -> coefficients
    for name in steps[0].ops:
        index: dict[tuple, int] = {}
        groups: list[list] = []
        order, scopes = [], []
        for i, key in enumerate(stream):
            for kind, (form, values) in _occurrences(kinds, index_of, name, i, runs_in(i)):
                counted = (kind, values)
                coeffs = solved.get(counted)
                if coeffs is None:                       # the same op in every layer: solved once
                    coeffs = solved[counted] = _solve(*design(kind), width, values, key, name)
                group_key = (dataclasses.replace(form, scope=""), tuple(coeffs), kind)   # scope: same time
                if group_key not in index:
                    index[group_key] = len(groups)
                    groups.append([0, form, tuple(coeffs), kind == MULTI, kind == SINGLE])
                groups[index[group_key]][0] += 1
                order.append(index[group_key])
                scopes.append(key[1])
        models[name] = StepCostModel(name, [OpGroup(*g) for g in groups], order, steps[0].devices[name],
                                     steps[0].static_power_w[name], steps[0].weight_dtype, scopes,
                                     split_batch=bool(single_only))
    return models


def _occurrences(kinds: dict[str, list[CountedStep]], index_of: dict[int, list[int]], name: str, i: int,
                 kind: str) -> list[tuple[str, tuple]]:
    """Stream op ``i`` on scenario ``name`` as (where it runs, (its form, its quantities per step
    of that kind)): one occurrence, or two where its form differs by step kind (module docstring)."""
    def samples(of: str) -> list:
        return [s.ops[name][index_of[id(s)][i]] for s in kinds[of]]

    def one_form(pairs: list) -> bool:
        return all(f == pairs[0][0] and len(v) == len(pairs[0][1]) for f, v in pairs)

    pairs = samples(kind)
    if one_form(pairs):
        return [(kind, (pairs[0][0], tuple(v for _, v in pairs)))]
    multi, single = samples(MULTI), samples(SINGLE)
    if kind == EVERY and multi and single and one_form(multi) and one_form(single):
        return [(k, (p[0][0], tuple(v for _, v in p))) for k, p in ((MULTI, multi), (SINGLE, single))]
    form = pairs[0][0]
    raise ValueError(f"{form.op} in {form.scope or '<root>'} on {name} changes form (kernel, launch, moved inputs "
                     f"or shape) with the batch composition: the serving cost model does not cover this model")


def _solve(p: Sequence[Sequence[int]], d: int, x: Sequence[Sequence[int]], columns: Sequence[int], width: int,
           counted: Sequence[Sequence[float]], key: tuple[str, str, str], scenario: str) -> tuple[tuple[float, ...], ...]:
    """Per quantity, its ``width`` coefficients (0 but at ``columns``, the features of the design's
    rows ``x``) from its ``counted`` values at those rows, exactly (P values / d), checked on the
    plane."""
    coeffs = []
    for q in range(len(counted[0])):
        column = [_exact(v[q]) for v in counted]
        numerators = [sum(a * v for a, v in zip(prow, column)) for prow in p]
        _check_linear(numerators, d, x, column, key, scenario)
        c = [0.0] * width
        for k, n in zip(columns, numerators):
            c[k] = float(Fraction(n, 1) / d)
        coeffs.append(tuple(c))
    return tuple(coeffs)


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
