"""accelerate integration: ``CountKwargs`` and the ``profile(accelerator, ...)`` context.

``Accelerator(kwargs_handlers=[...])`` rejects handler classes it does not know, so the entry
point is a context of ours:

    with profile(accelerator, CountKwargs(devices="H100-SXM", schedule_option=dict(wait=1, active=2))) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

It also accepts an accelerator configured with accelerate's ``ProfileKwargs`` and takes over the
``schedule_option``, ``on_trace_ready`` and ``output_trace_dir`` the user set there (and only
those; values set in ``CountKwargs`` win). The schedule is torch.profiler.schedule's: ``wait``,
``warmup``, ``active``, ``repeat``, ``skip_first`` steps; ops are counted during active steps,
and each active window ends in a result handed to ``on_trace_ready`` and written to
``output_trace_dir/dispatchprof_{process_index}.json`` (the latest window); only the main process
prints. A window still open when the context exits ends there; one in which nothing ran is dropped. Without a
schedule, the whole context is one window. Forward, backward and optimizer steps are separate
phases. It nests with ``accelerator.profile()``.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from accelerate.utils import KwargsHandler, ProfileKwargs

from dispatchprof import report, units
from dispatchprof.count.counter import OpCounter

from dispatchprof.results.profile import Profile
from dispatchprof.sim.simulate import Simulation

SCHEDULE_KEYS = ("wait", "warmup", "active", "repeat", "skip_first")


@dataclass
class CountKwargs(KwargsHandler):
    """Options of a dispatchprof count under accelerate (every field has a default).

    devices: a device, a list of devices, or a placement mapping (as OpCounter's ``devices``);
    weight_dtype: simulate parameters stored in this dtype; schedule_option: torch.profiler
    schedule keys (wait, warmup, active, repeat, skip_first); on_trace_ready: called with the
    `CountResult` of each active window; output_trace_dir: where each process writes
    ``dispatchprof_{process_index}.json``; depth, top, table_format, print_report: the report
    the main process prints at the end of each window.
    """

    devices: Any = None
    weight_dtype: str | None = None
    schedule_option: dict[str, int] | None = None
    on_trace_ready: Callable[[CountResult], Any] | None = None
    output_trace_dir: str | None = None
    depth: int = 3
    top: int = 10
    table_format: str = "simple"
    print_report: bool = True


@dataclass(frozen=True)
class CountResult:
    """One active window: the counted profile and its simulations."""

    profile: Profile
    simulations: tuple[Simulation, ...]
    window: int
    process_index: int
    num_processes: int

    def report(self, depth: int = 3, top: int = 10, fmt: str = "simple") -> str:
        """Phases (counts, measured wall time, simulated time), then the summary, module tree and ops."""
        sims = list(self.simulations)
        parts = [phase_table(self.profile, sims, fmt), report.summary(self.profile, sims, fmt=fmt),
                 report.module_tree(self.profile, sims[0] if sims else None, depth=depth, fmt=fmt)]
        if self.profile.tensor_kind == "real":       # DeepSpeed's per-module forward profile
            parts.append("Forward, measured per module (counting included):\n" + report.module_tree(
                self.profile, depth=depth, fmt=fmt, phase="forward",
                columns=("type", "calls", "flops", "macs", "latency", "achieved")))
        if top > 0:
            parts.append(report.operator_table(self.profile, sims[0] if sims else None, row_limit=top, fmt=fmt))
        return "\n\n".join(parts + [report.LEGEND])


def phase_table(profile: Profile, sims: list[Simulation], fmt: str = "simple") -> str:
    """Per phase: ops, FLOPs, MACs, measured wall time and achieved FLOP/s, simulated time per device."""
    wall = dict(profile.phase_wall)
    phases = [p for p in ("forward", "backward", "optimizer", "prefill", "decode") if profile.select(p)]
    rows = []
    for p in phases:
        t = profile.total(p)
        measured = wall.get(p, 0.0) if profile.tensor_kind == "real" else 0.0
        rows.append([p, str(t.calls), units.si(t.flops), units.si(t.macs), units.nbytes(t.comm_bytes),
                     units.seconds(measured) if measured else "-",
                     units.si(t.flops / measured, "FLOP/s") if measured else "-",
                     *(units.seconds(s.by_phase().get(p).time_s) if s.by_phase().get(p) else "-" for s in sims)])
    return report.render(rows, ["phase", "ops", "FLOPs", "MACs", "sent", "measured", "achieved",
                                *(f"time on {s.name}" for s in sims)], fmt)


class CountSession:
    """What ``profile(...)`` yields: call ``step()`` once per training or inference step."""

    def __init__(self, accelerator: Any, kwargs: CountKwargs) -> None:
        self.accelerator = accelerator
        self.kwargs = kwargs
        self.results: list[CountResult] = []
        self._counter: OpCounter | None = None
        self._step = 0
        self._window = 0
        self._schedule = None
        if kwargs.schedule_option:
            with warnings.catch_warnings():      # torch warns that warmup=0 skews *its* profiler
                warnings.simplefilter("ignore", UserWarning)
                self._schedule = torch.profiler.schedule(**_schedule_args(kwargs.schedule_option))
        OpCounter(devices=kwargs.devices, weight_dtype=kwargs.weight_dtype)   # bad options fail now

    # torch.profiler.schedule semantics: the action of the step about to run
    def _action(self) -> torch.profiler.ProfilerAction:
        if self._schedule is None:
            return torch.profiler.ProfilerAction.RECORD
        return self._schedule(self._step)

    def _counting(self) -> bool:
        return self._action() in (torch.profiler.ProfilerAction.RECORD,
                                  torch.profiler.ProfilerAction.RECORD_AND_SAVE)

    def _start_if_active(self) -> None:
        if self._counter is None and self._counting():
            self._counter = OpCounter(devices=self.kwargs.devices, weight_dtype=self.kwargs.weight_dtype)
            self._counter.__enter__()

    def step(self) -> None:
        """End the current step: a finished active window is handed over; the next step starts."""
        ends_window = self._action() == torch.profiler.ProfilerAction.RECORD_AND_SAVE
        self._step += 1
        if self._counter is not None and (ends_window or not self._counting()):
            self._finish_window()
        self._start_if_active()

    def _finish_window(self) -> None:
        counter, self._counter = self._counter, None
        counter.__exit__(None, None, None)
        if not counter.profile.records and not counter.profile.zero_cost_calls:
            return                       # a window opened at the end in which nothing ran
        acc = self.accelerator
        result = CountResult(counter.profile, tuple(counter.simulations()), self._window,
                             getattr(acc, "process_index", 0), getattr(acc, "num_processes", 1))
        self._window += 1
        self.results.append(result)
        k = self.kwargs
        if k.output_trace_dir:
            os.makedirs(k.output_trace_dir, exist_ok=True)
            result.profile.save(os.path.join(k.output_trace_dir, f"dispatchprof_{result.process_index}.json"),
                         meta={"process_index": result.process_index, "num_processes": result.num_processes,
                               "window": result.window})
        if k.on_trace_ready is not None:
            k.on_trace_ready(result)
        if k.print_report and getattr(acc, "is_main_process", True):
            print(result.report(k.depth, k.top, k.table_format))

    def close(self, failed: bool) -> None:
        if self._counter is None:
            return
        if failed:
            counter, self._counter = self._counter, None
            counter.__exit__(None, None, None)
        else:
            self._finish_window()


def _schedule_args(option: dict[str, int]) -> dict[str, int]:
    unknown = sorted(set(option) - set(SCHEDULE_KEYS))
    if unknown:
        raise ValueError(f"schedule_option has unknown key {unknown[0]!r}; allowed: {', '.join(SCHEDULE_KEYS)}")
    args = {k: int(v) for k, v in option.items()}
    args.setdefault("wait", 0)
    args.setdefault("warmup", 0)
    args.setdefault("active", 1)
    return args


def merged_kwargs(accelerator: Any, kwargs: CountKwargs | None) -> CountKwargs:
    """CountKwargs with the schedule, on_trace_ready and output dir the user set in the
    accelerator's ProfileKwargs, where CountKwargs leaves them unset."""
    kwargs = kwargs if kwargs is not None else CountKwargs()
    if not isinstance(kwargs, CountKwargs):
        raise TypeError(f"profile() takes CountKwargs, got {type(kwargs).__name__}")
    handler = getattr(accelerator, "profile_handler", None)
    if isinstance(handler, ProfileKwargs):
        user_set = handler.to_kwargs()
        mine = kwargs.to_kwargs()
        for key in ("schedule_option", "on_trace_ready", "output_trace_dir"):
            if key in user_set and key not in mine:
                setattr(kwargs, key, user_set[key])
    return kwargs


@contextlib.contextmanager
def profile(accelerator: Any, kwargs: CountKwargs | None = None) -> Iterator[CountSession]:
    """Count what runs inside, on every process; see the module docstring."""
    session = CountSession(accelerator, merged_kwargs(accelerator, kwargs))
    session._start_if_active()
    failed = True
    try:
        yield session
        failed = False
    finally:
        session.close(failed)


__all__ = ["CountKwargs", "CountResult", "CountSession", "phase_table", "profile"]

