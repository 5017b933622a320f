"""The step cost model: the simulated time and energy of one engine step as a function of its
batch composition, from a handful of counted compositions (never a counted forward per step).

The model's uniform steps of `DESIGN` are counted once (`dispatchprof.serving.counting`, few
layers repeated to full depth where the model allows: `dispatchprof.serving.repeat`), every op's
work is fitted exactly as a linear function of the composition (`dispatchprof.serving.fit`,
`dispatchprof.serving.composition`, `dispatchprof.serving.op_streams`,
`dispatchprof.serving.least_squares`), and a step is timed from the fitted work by the simulator
itself (`dispatchprof.serving.step_cost`). This module counts the design and fits it, and is the
door the rest of serving comes in by: it hands on the public names of those modules.

A mixed step (prefill chunks and decodes) is costed as the flattened batch of its sequences, as
a varlen serving kernel runs it. Times are one device's seconds; energy is one device's joules
(serving multiplies by tp).
"""

from __future__ import annotations

from typing import Sequence

import torch

from dispatchprof.llm.generation import Progress
from dispatchprof.serving.composition import Composition
from dispatchprof.serving.counting import CountedStep, count_steps, counted_steps
from dispatchprof.serving.fit import fit
from dispatchprof.serving.kv_cache import KV_BITS, kv_scale
from dispatchprof.serving.least_squares import integer_pseudo_inverse
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.serving.step_cost import StepCost, StepCostModel
from dispatchprof.sim.placement import Scenarios

#: The counted compositions as chains (B, new tokens per step): prefills of B x q tokens, two of
#: them followed by decode steps: (B, q, p) = (1, 1, 0) (1, 4, 0) (1, 1, 4) (2, 2, 0) (2, 5, 0)
#: (2, 1, 5) (2, 1, 6) (2, 1, 7) (3, 3, 0) (1, 7, 0): nine determine the nine coefficients,
#: the tenth checks that decode costs lie on a line in the cache length (`fit`); tests check
#: other compositions against counting.
DESIGN = ((1, (1,)), (1, (4, 1)), (2, (2,)), (2, (5, 1, 1, 1)), (3, (3,)), (1, (7,)))


def check_dense_attention(model: torch.nn.Module) -> None:
    """Refuse a model whose attention keeps only its top ``index_topk`` keys per query (DeepSeek
    sparse attention's indexer: GLM-5): that work stops growing with the context at ``index_topk``
    tokens, where the step cost model's features grow with every cached token, and the design's
    short contexts would not show it."""
    config = getattr(model, "config", None)
    topk = getattr(config, "index_topk", None)
    if isinstance(topk, int) and topk > 0:
        raise ValueError(f"{type(config).__name__} attends to its top {topk} keys per query (a sparse-attention "
                         f"indexer): that work stops growing with the context at {topk} tokens, which the serving "
                         f"cost model (linear in each sequence's cached tokens) does not express; the serving cost "
                         f"model does not cover this model")


def fit_design(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
               bound: bool = False, design: Sequence[tuple[int, tuple[int, ...]]] = DESIGN,
               runtime: str = "serving", tp: int = 1, kv_dtype: str | None = None,
               memo: CountMemo | None = None, progress: Progress | None = None
               ) -> tuple[list[CountedStep], dict[str, StepCostModel]]:
    """The chains of ``design`` counted, (B, tokens per step), and one StepCostModel per scenario
    fitted to them. The first chain is counted at full depth and the others from few layers where
    the model allows (`CountMemo`; from ``memo`` when given); their fit is the check: where it
    fails, every chain is counted at full depth and fitted again. ``progress(done, total, what)``
    is told before each chain and after the last ("counting chains", or "counting chains at full
    depth" on the second pass)."""
    check_dense_attention(model)
    memo = CountMemo(model) if memo is None else memo
    report = progress or (lambda done, total, what: None)

    def counted(what: str) -> list[CountedStep]:
        steps = []
        for k, (b, tokens) in enumerate(design):
            report(k, len(design), what)
            steps += count_steps(model, b, tokens, scenarios, weight_dtype, bound, runtime, tp, kv_dtype, memo)
        report(len(design), len(design), what)
        return steps

    steps = counted("counting chains")
    try:
        return steps, fit(steps)
    except ValueError as e:
        if not memo.repeated:
            raise
        memo.count_full_depth(f"chains counted with few layers disagree with the full-depth one: {e}")
    steps = counted("counting chains at full depth")
    return steps, fit(steps)


def count_design(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
                 bound: bool = False, design: Sequence[tuple[int, tuple[int, ...]]] = DESIGN,
                 runtime: str = "serving", tp: int = 1, kv_dtype: str | None = None,
                 memo: CountMemo | None = None) -> list[CountedStep]:
    """The counted chains of `fit_design` (fitted once, as its check)."""
    return fit_design(model, scenarios, weight_dtype, bound, design, runtime, tp, kv_dtype, memo)[0]


def fit_cost_models(model: torch.nn.Module, scenarios: Scenarios, weight_dtype: str | None = None,
                    bound: bool = False, runtime: str = "serving", tp: int = 1,
                    kv_dtype: str | None = None) -> dict[str, StepCostModel]:
    """Count the design and fit one StepCostModel per scenario."""
    return fit_design(model, scenarios, weight_dtype, bound, runtime=runtime, tp=tp, kv_dtype=kv_dtype)[1]


#: Handed on from the modules of the model (module docstring) for the rest of serving.
__all__ = ["DESIGN", "KV_BITS", "Composition", "CountedStep", "StepCost", "StepCostModel", "count_design", "count_steps",
           "counted_steps", "fit", "fit_cost_models", "fit_design", "integer_pseudo_inverse", "kv_scale"]
