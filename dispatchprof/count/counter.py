"""OpCounter: the public context manager that counts every aten op of the code it wraps.

It owns two private modes (dispatchprof.count.modes) that hand every aten op to a Recorder;
a ModuleTracker says which module scope each op belongs to. Nothing is left behind on exit,
normal or not. The devices it simulates on are resolved once, when it is made.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import sys
import threading
import warnings
from typing import Any, Iterator, Literal, get_args

from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

import op_formulas  # noqa: F401  (registers every formula)
from dispatchprof import units
from dispatchprof.count.hostcal import counter_floors, python_loop_ns
from dispatchprof.count.hostclock import HostClock
from dispatchprof.count.hostmode import TimedCountingMode
from dispatchprof.count.hoststeady import steady_host_times
from dispatchprof.count.interrupts import interrupts_at_safe_points
from dispatchprof.count.modes import CountingMode, FusedAttentionMode, eager_flex_attention
from dispatchprof.count.recorder import Recorder
from dispatchprof.count.stand_ins import ROUTING_ASSUMPTION, RoutingAssumed, RoutingAssumptionWarning
from dispatchprof.count.tensors import tensor_kind
from dispatchprof.report.dataframe import counter_frame
from dispatchprof.report.html import counter_html
from dispatchprof.report.tables import simulation_line
from dispatchprof.results import query
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import check_phase
from dispatchprof.sim.device import WEIGHT_BITS
from dispatchprof.sim.parallel import check_tp
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.quantization import check_weight_dtype
from dispatchprof.sim.runtime import check_runtime
from dispatchprof.sim.simulate import Simulation, simulate

CausalRule = Literal["full", "computed"]
#: OpCounter(host_time=...): measured with the counter's residual subtracted, off, or raw.
HOST_TIME_CHOICES = (True, False, "raw")


class _RecursionHeadroom:
    """While any counter is active, the recursion limit is a third higher: with global module
    hooks torch runs each module call through one more Python frame, so a model that runs at
    depth N alone needs 4/3 of the frames when counted. Restored when the last counter exits
    (counters on several threads share one process-wide limit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._saved = 0

    def acquire(self) -> None:
        with self._lock:
            if self._active == 0:
                self._saved = sys.getrecursionlimit()
                sys.setrecursionlimit(self._saved + self._saved // 3)
            self._active += 1

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                sys.setrecursionlimit(self._saved)


_HEADROOM = _RecursionHeadroom()


class OpCounter:
    """Count ADD, MULT, DIV, SQRT, EXP, CMP, OTHER, MACs and bytes of every aten op.

    >>> with OpCounter() as c:
    ...     model(x)                # real, meta or fake tensors; backward too if called
    >>> c.total().flops, c.by_module()["layers.0.mlp"].inclusive.macs

    Args:
        model: the model whose ``named_modules()`` names the scopes. Optional: by default
            the first module called at the top level is the root.
        causal: "full" (default) counts causal attention over the whole Lq x Lk score
            matrix, as its math definition; "computed" counts only the unmasked scores.
        devices: devices to simulate the count on (``simulated()``): one device (a name such
            as "PIM-AI-1chip", a YAML path or a Device), a list of them (each simulated on its
            own, side by side), or a placement mapping module globs to devices
            (``{"*.self_attn*": "PIM-AI-1chip", "*": "PIM-AI-4chip"}``).
        weight_dtype: simulate the parameters stored in this dtype ("int8", "int4", ...)
            instead of the dtype the tensors carry.
        bound: simulate the pure roofline bound, ignoring the profiles' efficiencies and launch
            overheads (the GPU profiles carry achieved fractions by default).
        runtime: the software stack simulated: "eager" (default; every op launched from the host),
            "compiled" (torch.compile + CUDA graphs) or "serving" (an inference engine); see
            dispatchprof.sim.runtime. Each ``phase()`` block is one step.
        tp: tensor parallelism over this many devices (attention and MLP split, two all-reduces
            per layer; dispatchprof.sim.parallel).
        kv_dtype: simulate the KV cache stored in this dtype ("fp8", "int8", "int4", ...): the
            keys and values attention reads and the cache appends move that many bits per element.
        host_time: measure the host time of the model's own code before each op (True, default;
            OpRecord.host_loops and host_calls, dispatchprof.count.hostclock), the counter's own cost
            excluded and its calibrated residual subtracted (dispatchprof.count.hostcal), and an op
            repeated in identical layers given its median over them (dispatchprof.count.hoststeady); False:
            not measured; "raw": measured without subtracting the residual (calibration). Counts of
            one model object reuse the host times first measured at each op position
            (dispatchprof.count.hostmemo), so that repeated counts of a step agree exactly.
    """

    def __init__(self, model: nn.Module | None = None, *, causal: CausalRule = "full",
                 devices: Any = None, weight_dtype: str | None = None, bound: bool = False,
                 runtime: str = "eager", tp: int = 1, kv_dtype: str | None = None,
                 host_time: bool | str = True) -> None:
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"OpCounter(model=...) takes a torch.nn.Module, got {type(model).__name__}; "
                            f"call it as OpCounter(model) or OpCounter()")
        if causal not in get_args(CausalRule):
            raise ValueError(f"OpCounter(causal=...) must be one of {get_args(CausalRule)}, got {causal!r}")
        self._model = model
        self._causal = causal
        self._scenarios = scenarios_of(devices)     # loads devices now: bad names fail here
        check_weight_dtype(weight_dtype, "OpCounter(weight_dtype=...)")
        self._weight_dtype = weight_dtype
        if kv_dtype is not None and kv_dtype not in WEIGHT_BITS:
            raise ValueError(f"OpCounter(kv_dtype=...) must be one of {tuple(WEIGHT_BITS)}, got {kv_dtype!r}")
        self._kv_dtype = kv_dtype
        self._bound = bool(bound)
        if host_time not in HOST_TIME_CHOICES:
            raise ValueError(f"OpCounter(host_time=...) must be one of {HOST_TIME_CHOICES}, got {host_time!r}")
        self._host_time = host_time
        self._runtime = check_runtime(runtime, "OpCounter(runtime=...)")
        self._tp = check_tp(tp, (), [d for p in self._scenarios.values() for d in p.devices])
        self._step_starts: list[int] = []
        self._assumed = 0                        # RoutingAssumed.calls on entry
        self._state: Recorder | None = None
        self._profile: Profile | None = None
        self._modes: list[Any] = []
        self._optimizer_hooks: list[Any] = []
        self._flex_eager: bool | None = None
        self._headroom = False
        self._thread = 0
        self._gc_hook: Any = None
        self._signals = contextlib.ExitStack()

    # --- context ---------------------------------------------------------------------------
    def __enter__(self) -> OpCounter:
        """Install the hooks and modes. Each step is undone by `_close` as soon as it is done, and
        signals that arrive from here until `__exit__` has undone everything wait for a safe point
        (count/interrupts.interrupts_at_safe_points: the next op's entry, or the end of __exit__):
        no interrupt or error, at any point, leaves a hook behind or aborts inside torch."""
        if self._state is not None:
            raise RuntimeError("this OpCounter is already counting; use a new OpCounter to nest")
        self._profile = None
        self._thread = threading.get_ident()
        self._step_starts = []
        clock = None
        if self._host_time is not False:        # calibrated before any hook is installed
            op_floors, hook_floor = ({}, 0) if self._host_time == "raw" else counter_floors(OpCounter,
                                                                                         _model_kind(self._model))
            clock = HostClock(op_floors.get("real", 0), hook_floor, loop_ns=python_loop_ns(), op_floors=op_floors)
        self._assumed = RoutingAssumed.calls
        self._signals = contextlib.ExitStack()
        self._signals.enter_context(interrupts_at_safe_points())   # held in here until a safe point
        try:
            self._state = Recorder(self._model, self._causal)
            self._state.clock = self._state.tracker.clock = clock
            self._state.reuse_host = self._host_time is True
            self._install(self._state)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _install(self, state: Recorder) -> None:
        state.tracker.start()
        self._optimizer_hooks.append(register_optimizer_step_pre_hook(self._optimizer_started))
        self._optimizer_hooks.append(register_optimizer_step_post_hook(self._optimizer_finished))
        self._flex_eager = eager_flex_attention(True)
        _HEADROOM.acquire()
        self._headroom = True
        counting = CountingMode(state) if state.clock is None else TimedCountingMode(state, state.clock)
        for m in (FusedAttentionMode(state, counting.packing), counting):
            m.__enter__()
            self._modes.append(m)
        if state.clock is not None:
            gc.callbacks.append(state.clock.gc_event)
            self._gc_hook = state.clock.gc_event
            state.clock.leave()

    def __exit__(self, *exc: Any) -> None:
        """Undo everything (`_close`), then deliver a signal held meanwhile (count/interrupts); warn
        from the caller's ``with`` line where this count took the MoE routing assumption."""
        with self._signals:
            self._close()
        if exc and exc[0] is None and RoutingAssumed.calls != self._assumed:   # () from a failed __enter__
            warnings.warn(ROUTING_ASSUMPTION, RoutingAssumptionWarning, stacklevel=2)

    def _close(self) -> None:
        """Undo every installed step, each even if another raises (the first error is raised after
        all ran, the others chained to it), then freeze the profile."""
        with contextlib.ExitStack() as undo:
            undo.callback(self._freeze)
            undo.callback(self._remove_hooks)
            undo.callback(self._release_headroom)
            undo.callback(self._restore_flex)
            while self._modes:
                undo.callback(self._modes.pop(0).__exit__, None, None, None)

    def _restore_flex(self) -> None:
        flex, self._flex_eager = self._flex_eager, None
        eager_flex_attention(flex)

    def _release_headroom(self) -> None:
        if self._headroom:
            self._headroom = False
            _HEADROOM.release()

    def _remove_hooks(self) -> None:
        if self._gc_hook is not None:
            gc.callbacks.remove(self._gc_hook)
            self._gc_hook = None
        while self._optimizer_hooks:
            self._optimizer_hooks.pop().remove()
        if self._state is not None:
            self._state.tracker.stop()

    def _freeze(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            self._profile = self._frozen(state)
            state.ledger.close()

    def _frozen(self, state: Recorder) -> Profile:
        """The recorder's final profile; with measured host times (host_time=True), each repeated
        op's host time becomes its steady figure (dispatchprof.count.hoststeady)."""
        profile = state.freeze()
        if self._host_time is True:
            steady_host_times(profile.records, state.block_starts)
        return profile

    def _optimizer_started(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """Global optimizer pre-hook: the step's ops are phase "optimizer" (this thread's steps
        only). A step that raises never reaches the post-hook: the recorder restores the label
        at the next top-level module call."""
        if self._state is not None and threading.get_ident() == self._thread:
            self._state.enter_optimizer()

    def _optimizer_finished(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._state is not None and threading.get_ident() == self._thread:
            self._state.leave_optimizer()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Label the ops run inside as phase ``name`` ("prefill", "decode", "optimizer", ...);
        backward ops stay "backward"."""
        check_phase(name)
        if self._state is None:
            raise RuntimeError("OpCounter.phase() works only inside `with OpCounter() as c:`")
        state, saved = self._state, (self._state.label, self._state.label_baseline)
        self._step_starts.append(len(state.records))
        state.block_starts.append(len(state.records))
        state.label, state.label_baseline = name, state.ledger.live_bytes
        try:
            yield
        finally:
            state.label, state.label_baseline = saved

    # --- results ---------------------------------------------------------------------------
    @property
    def records_counted(self) -> int:
        """How many op records this count holds so far (an index to cut a count into steps)."""
        if self._state is not None:
            return len(self._state.records)
        return len(self._profile.records) if self._profile is not None else 0

    @property
    def profile(self) -> Profile:
        """The frozen result (a live snapshot while still counting, its host times as measured)."""
        if self._state is not None:
            return self._state.freeze()
        if self._profile is None:
            raise RuntimeError("nothing counted yet: use `with OpCounter() as c: model(x)` first")
        return self._profile

    def total(self, phase: str | None = None):
        """Totals of every counted op; ``phase`` "forward" or "backward" to filter."""
        return self.profile.total(phase)

    def by_module(self, phase: str | None = None):
        """Per module scope: self and inclusive totals plus PARAMS, BUFFERS, ACT, CACHE, PEAK."""
        return self.profile.by_module(phase)

    def by_operator(self, phase: str | None = None):
        """Per aten op: calls and totals; zero-cost and unknown ops are listed too."""
        return self.profile.by_operator(phase)

    def unknown_ops(self):
        """Ops with no formula: name, calls and the scopes they ran in."""
        return self.profile.unknown_ops()

    def get(self, metric: str, scope: str | None = None, phase: str | None = None) -> int:
        """One number: ``metric`` (a category, "flops", "macs", "bytes", "params", "peak", ...)
        over ``scope`` (a name glob, a class name, or "attn", "mlp", "transformer");
        see dispatchprof.query."""
        return query.get(self.profile, metric, scope, phase)

    def to_dataframe(self, by: str = "operator", phase: str | None = None) -> Any:
        """A pandas DataFrame in raw units, one row per "operator", "module" or "record"; with
        devices, each scenario's rows with time_s and energy_j (dispatchprof.report.dataframe)."""
        return counter_frame(self.profile, self.simulations(), by, phase)

    def _repr_html_(self) -> str:
        if self._state is None and self._profile is None:
            return "<p>OpCounter (nothing counted yet)</p>"
        return counter_html(self.profile, self.simulations())

    def simulations(self) -> list[Simulation]:
        """Every simulated scenario, in the order the devices were given."""
        return [self.simulated(name) for name in self._scenarios]

    def __str__(self) -> str:
        """A short summary: totals, and time per simulated device."""
        p = self.profile if (self._state is not None or self._profile is not None) else None
        if p is None:
            return "OpCounter (nothing counted yet)"
        t = p.total()
        text = (f"OpCounter: {t.calls} ops counted, {units.si(t.flops, 'FLOPs')} (ADD+MULT), {units.si(t.macs, 'MACs')}, "
                f"{units.nbytes(t.bytes)} moved, peak {units.nbytes(p.peak_bytes)}, "
                f"{len(p.unknown)} unknown ops")
        for sim in self.simulations():
            text += f"\n  {sim.name}: {simulation_line(sim)}"
        return text

    def simulated(self, device: str | None = None) -> Simulation:
        """The simulation of this count on one of the ``devices`` given to the counter: its
        totals (``.total``: time, energy, power, bound shares) and ``by_module()``,
        ``by_operator()``, ``by_phase()``, ``by_device()``, ``capacity``. ``device`` names the
        scenario when several devices were given side by side ("placement" for a placement)."""
        if not self._scenarios:
            raise ValueError("no devices to simulate on: use OpCounter(devices='PIM-AI-1chip') "
                             "(see dispatchprof.list_devices())")
        if device is None:
            if len(self._scenarios) > 1:
                raise ValueError(f"several devices were simulated; pick one: {', '.join(self._scenarios)}")
            device = next(iter(self._scenarios))
        key = self._scenarios.lookup(device)
        if key is None:
            raise ValueError(f"{device!r} was not simulated; simulated: {', '.join(self._scenarios)}")
        return simulate(self.profile, self._scenarios[key], weight_dtype=self._weight_dtype, name=key,
                        bound=self._bound, runtime=self._runtime, tp=self._tp, step_starts=tuple(self._step_starts),
                        kv_dtype=self._kv_dtype)


def _model_kind(model: nn.Module | None) -> str:
    """The kind of tensor ``model``'s first parameter or buffer is ("real" without one): the op
    floor the host clock will need, calibrated before the count starts."""
    first = None if model is None else next(itertools.chain(model.parameters(), model.buffers()), None)
    return "real" if first is None else tensor_kind(first)
