"""A step's time and energy from its ops' fitted work: the step cost model of one scenario.

Each op group (`OpGroup`: ops of equal form and coefficients, such as the same op in every decoder
layer) holds, per quantity of `dispatchprof.serving.work.QUANTITIES`, its coefficients over the
composition's features (`dispatchprof.serving.composition.FEATURES`), as the fit found them
(`dispatchprof.serving.fit`). A step of composition x is timed **by the simulator itself**: each
group's quantities at x (coefficients . x) rebuild its op's record and plan, and
`dispatchprof.serving.work.op_timing` asks the simulator's `time_op` (`dispatchprof.sim.timing`),
so a GEMM's tile and wave efficiency is that of the step's own M and a memory term may switch to a
cache's bandwidth. The ops, in stream order, go through the host/device timeline
(`dispatchprof.sim.timeline.step_time`); energy = the ops' dynamic energy + static power x the
step's time, as `Simulation.total` composes it. A group is timed once per step (and its timing
kept while its quantities do not change: a decode run changes only the context's ops).

Rules:
- ops that run only in steps with a sequence of more than one new token (`OpGroup.multi`) are
  costed only in steps whose longest sequence has q > 1 (`Composition.multi_token`), as
  transformers runs them on the flattened batch; ops that run only in steps of one-token
  sequences (`OpGroup.single`: an op's decode form where a multi-token step runs it in another
  form, `dispatchprof.serving.fit`) only in the others;
- **split batch**: a model whose decode steps run ops its multi-token steps do not (multi-head
  latent attention absorbed for decodes and expanded for prefills, `dispatchprof.llm.mla`) runs a
  mixed step as engines run it (vLLM's MLA backend splits the batch into decodes and prefills):
  the ops of both streams once over all its sequences, the decode stream's own ops (and decode
  forms) over its one-token sequences (`Composition.single`), the multi-token stream's own ops
  over the others (`Composition.multi`);
- a causal flash kernel's op (`OpForm.flash`) is timed at its counted work times the step's
  `Composition.flash_share` (the score tiles its mask leaves, per sequence; a split batch's
  multi-token ops: `Composition.multi_flash_share`).

Units: seconds and joules of one device of a tensor-parallel group (the counts were split over
``tp`` devices as `simulate` splits them; serving multiplies energy by tp). Tests compare steps
with direct simulation of counted steps at random compositions (equal to 1e-9 relative).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dispatchprof.serving.composition import Composition
from dispatchprof.serving.work import OpForm, op_timing
from dispatchprof.sim.device import Device
from dispatchprof.sim.timeline import step_time
from dispatchprof.sim.timing import OpTiming


#: Step kinds: one-token sequences only; some with more; both, in a split batch (module docstring).
DECODE, MULTI, MIXED = "decode", "multi", "mixed"
KINDS = (DECODE, MULTI, MIXED)


@dataclass(frozen=True)
class StepCost:
    """Time (s) and energy (J) of one step (one device of a tensor-parallel group)."""

    time_s: float
    energy_j: float


@dataclass(frozen=True)
class OpGroup:
    """Ops of equal form and coefficients (the same op in every decoder layer): how many, and
    per quantity its coefficients over the composition's features (`composition.FEATURES`)."""

    count: int
    form: OpForm
    coeffs: tuple[tuple[float, ...], ...]
    #: run only in steps with a sequence of more than one new token (module docstring)
    multi: bool = False
    #: run only in steps whose sequences all have one new token (module docstring)
    single: bool = False


class StepCostModel:
    """Step time and energy on one scenario as functions of the composition (module docstring)."""

    def __init__(self, scenario: str, groups: Sequence[OpGroup], order: Sequence[int], devices: dict[str, Device],
                 static_power_w: float, weight_dtype: str | None, scopes: Sequence[str] = (),
                 split_batch: bool = False) -> None:
        self.scenario, self.groups, self.order = scenario, tuple(groups), tuple(order)
        self.scopes = tuple(scopes)                  # per op in stream order: its module scope (may be empty)
        self.devices, self.static_power_w, self.weight_dtype = devices, static_power_w, weight_dtype
        #: a mixed step runs its decodes and its multi-token sequences apart (module docstring)
        self.split_batch = split_batch
        self.ops = len(self.order)
        self._last: list = [None] * len(self.groups)          # per group: (quantities, OpTiming) of the last step
        self._split = any(g.multi or g.single for g in self.groups)
        self._runs = {}                              # per step kind: its issue runs
        for kind in KINDS:
            kept = [g for g in self.order if self._runs_in(g, kind)]
            self._runs[kind] = _runs([self.groups[g].form.host != "" for g in kept], kept)

    def _kind(self, c: Composition) -> str:
        """The step kind of ``c``: DECODE (one-token sequences), MULTI or, in a split batch, MIXED."""
        if not c.multi_token:
            return DECODE
        return MIXED if self.split_batch and c.mixed else MULTI

    def _runs_in(self, g: int, kind: str) -> bool:
        """Whether group ``g``'s ops run in a step of ``kind``."""
        return kind == MIXED or not (self.groups[g].single if kind == MULTI else self.groups[g].multi)

    @functools.cached_property
    def kernels(self) -> int:
        """Kernels a multi-token step launches (ops of its stream that launch their own)."""
        return sum(1 for g in self.order if self.groups[g].form.kernel and self._runs_in(g, MULTI))

    def present(self, c: Composition) -> tuple[bool, ...] | None:
        """Per op in stream order, whether it runs in a step of composition ``c``; None: all do
        (the same tuple for every step of one kind where some do not)."""
        return self._present[self._kind(c)] if self._split else None

    @functools.cached_property
    def _present(self) -> dict[str, tuple[bool, ...] | None]:
        out = {}
        for kind in KINDS:
            runs = tuple(self._runs_in(g, kind) for g in self.order)
            out[kind] = None if all(runs) else runs
        return out

    @functools.cached_property
    def _quantity_matrix(self) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Every group's quantities as rows of one matrix over FEATURES, and the rows of each group."""
        rows = [v for grp in self.groups for v in grp.coeffs]
        ends = np.cumsum([len(grp.coeffs) for grp in self.groups]).tolist()
        return np.array(rows, dtype=np.float64).reshape(len(rows), -1), list(zip([0] + ends[:-1], ends))

    def group_values(self, c: Composition) -> list[list[float]]:
        """Per group, its quantities (`dispatchprof.serving.work.QUANTITIES`) at composition ``c``:
        in a split batch, a decode-only group's over ``c``'s one-token sequences and a
        multi-token-only group's over the others (module docstring)."""
        matrix, bounds = self._quantity_matrix
        if not len(matrix):
            return [[] for _ in bounds]
        flat = (matrix @ np.asarray(c.x, dtype=np.float64)).tolist()
        if not self.split_batch or not c.multi_token:
            return [flat[a:b] for a, b in bounds]
        single = (matrix @ np.asarray(c.single, dtype=np.float64)).tolist()
        multi = (matrix @ np.asarray(c.multi, dtype=np.float64)).tolist()
        return [(single if g.single else multi if g.multi else flat)[a:b] for g, (a, b) in zip(self.groups, bounds)]

    def op_timings(self, c: Composition) -> list[OpTiming]:
        """One OpTiming per group at composition ``c`` (`dispatchprof.serving.work.op_timing`)."""
        values = self.group_values(c)
        out = []
        share = c.flash_share
        apart = self.split_batch and c.multi_token
        multi_share = c.multi_flash_share if apart else share
        for k, (g, v) in enumerate(zip(self.groups, values)):
            last = self._last[k]                     # a decode run changes only the context's ops
            own = (1.0 if g.single else multi_share if g.multi else share) if apart else share
            key = (v, own if g.form.flash else 1.0)
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
        kind = self._kind(c) if self._split else MIXED      # a model without split ops: every op runs
        for lead, run in self._runs[kind]:
            if lead >= 0:
                entries.append(timings[lead])
            if run:
                entries.append(_Run(sum(n * times[g] for g, n in run)))
        time = step_time(entries)
        dynamic = sum(g.count * t.dynamic_j for k, (g, t) in enumerate(zip(self.groups, timings))
                      if self._runs_in(k, kind))
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
