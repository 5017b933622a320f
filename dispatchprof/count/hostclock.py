"""The host clock: how long the model's own code runs between the ops the counter sees.

Timestamps are ``time.perf_counter_ns`` (the thread's CPU time, ``thread_time_ns``, would leave out
the time a shared machine deschedules the thread, but it is a system call: on the project's VM it
raised the counting overhead by 8%, against 1% for perf_counter), taken where the counter's work
starts and ends:

- at the start of its handling of an aten op (`arrive`, from `TimedCountingMode`) and at the end
  of it (`leave`): the time in between (the op itself on fake or meta tensors, its formula, the
  bookkeeping) is the counter's and is never counted;
- at the start and end of each module hook (`arrive_hook`, `leave`), the same way;
- at the start and end of each garbage collection (`gc_event`), the same way;
- around the record of a fused attention call made outside the dispatch (`Recorder.count`).

A gap is the time from one `leave` to the next arrival: the model's Python, torch's argument
parsing and the dispatcher up to the counter's mode. From each gap the counter's residual cost is
subtracted (``op_floor_ns`` for a gap that ends at an op, the floor of the count's tensor kind once
its first op is seen; ``hook_floor_ns`` for one that ends at a module hook; calibrated by
`dispatchprof.count.hostcal`), clamped at 0. The gaps add up in
``pending_ns`` until the next op record takes them (`take`): the host time of the code before an
op belongs to that op, and so to its module scope, in iterations of the calibration loop
(`dispatchprof.count.hostcal.python_loop_ns`, measured here): a host profile says how long one
iteration takes on the target (dispatchprof.sim.hostprofile). ``calls`` counts the aten calls dispatched
since the last record (views and zero-cost ops included, each a call the host dispatches).
"""

from __future__ import annotations

import time

now_ns = time.perf_counter_ns


class HostClock:
    """Per counting context; mutated on the hot path (slots, no properties)."""

    __slots__ = ("mark", "pending_ns", "calls", "depth", "op_floor_ns", "hook_floor_ns", "loop_ns", "op_floors")

    def __init__(self, op_floor_ns: int = 0, hook_floor_ns: int = 0, loop_ns: float = 1.0,
                 op_floors: dict[str, int] | None = None) -> None:
        self.mark = now_ns()          # end of the counter's last piece of work
        self.pending_ns = 0           # model time since the last record (ns)
        self.calls = 0                # aten calls since the last record
        self.depth = 0                # > 0 while the counter handles an op (nested ops are its own)
        self.op_floor_ns = op_floor_ns
        self.hook_floor_ns = hook_floor_ns
        self.loop_ns = loop_ns            # one calibration-loop iteration here (the unit of `take`)
        self.op_floors = op_floors or {}  # op floor by tensor kind (`use_kind`)

    def use_kind(self, kind: str | None) -> None:
        """The count runs on tensors of ``kind`` ("real", "fake", "meta"): from now on subtract
        that kind's op floor (unchanged for a kind not calibrated)."""
        self.op_floor_ns = self.op_floors.get(kind or "", self.op_floor_ns)

    def arrive(self) -> None:
        """An aten op reaches the counter: the gap since `mark`, less the op floor, is model time."""
        gap = now_ns() - self.mark - self.op_floor_ns
        if gap > 0:
            self.pending_ns += gap
        self.calls += 1

    def arrive_hook(self) -> None:
        """A module hook starts: the gap since `mark`, less the hook floor, is model time."""
        gap = now_ns() - self.mark - self.hook_floor_ns
        if gap > 0:
            self.pending_ns += gap

    def leave(self) -> None:
        """The counter's work ends: the next gap starts now."""
        self.mark = now_ns()

    def gc_event(self, phase: str, info: dict) -> None:
        """A ``gc.callbacks`` hook: a collection that starts in a gap ends it (the model time so
        far is kept) and the next gap starts when it stops. The counter's allocations make
        collections far more frequent than in the model's own run, so their time is nobody's."""
        if self.depth:
            return
        if phase == "start":
            gap = now_ns() - self.mark
            if gap > 0:
                self.pending_ns += gap
        else:
            self.mark = now_ns()

    def take(self) -> tuple[float, int]:
        """(calibration-loop iterations, calls) gathered since the last record, for the record
        being made: the loop makes the figure independent of the machine that counted."""
        out = (self.pending_ns / self.loop_ns, self.calls)
        self.pending_ns = 0
        self.calls = 0
        return out
