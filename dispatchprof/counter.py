"""OpCounter: the public context manager that counts every aten op of the code it wraps.

It owns two private modes: a TorchDispatchMode that sees every aten op (forward and
backward) and hands its shapes to the op_formulas registry, and a TorchFunctionMode that
records ``F.scaled_dot_product_attention`` as one fused op before torch picks a backend
(so attention counts the same on real, meta and fake tensors). A ModuleTracker says which
module scope each op belongs to. Nothing is left behind on exit, normal or not.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any, Literal, get_args

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import op_formulas
from dispatchprof.errors import DataDependentOpError
from dispatchprof.memory import LiveMemory
from dispatchprof.profile import OpRecord, Profile, Scope, UnknownOp
from dispatchprof.tensors import dtype_name, iter_tensors, output_tensors, stored_bytes, to_meta
from dispatchprof.tracker import Frame, ModuleTracker
from op_formulas.cost import Cost
from op_formulas.registry import OVERWRITES_SELF, ZERO_COST, ZERO_COST_NAMESPACES, UnsupportedCall, lookup

aten = torch.ops.aten
CausalRule = Literal["full", "computed"]
_ATTENTION = frozenset({
    aten.scaled_dot_product_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
})
#: Ops whose output depends on tensor values: impossible on meta tensors.
_DATA_DEPENDENT = frozenset({aten._local_scalar_dense, aten.nonzero, aten.masked_select,
                             aten._unique2, aten.unique_consecutive, aten.unique_dim,
                             aten.repeat_interleave, aten.bincount, aten.histc})


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
        track_memory: follow live tensors for ACT, CACHE and PEAK (default True).
    """

    def __init__(self, model: nn.Module | None = None, *, causal: CausalRule = "full",
                 track_memory: bool = True) -> None:
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"OpCounter(model=...) takes a torch.nn.Module, got {type(model).__name__}; "
                            f"call it as OpCounter(model) or OpCounter()")
        if causal not in get_args(CausalRule):
            raise ValueError(f"OpCounter(causal=...) must be one of {get_args(CausalRule)}, got {causal!r}")
        if not isinstance(track_memory, bool):
            raise TypeError(f"OpCounter(track_memory=...) takes a bool, got {type(track_memory).__name__}")
        self._model = model
        self._causal = causal
        self._track_memory = track_memory
        self._state: _CountState | None = None
        self._profile: Profile | None = None
        self._modes: list[Any] = []

    # --- context ---------------------------------------------------------------------------
    def __enter__(self) -> OpCounter:
        if self._state is not None:
            raise RuntimeError("this OpCounter is already counting; use a new OpCounter to nest")
        self._profile = None
        self._state = _CountState(self._model, self._causal, self._track_memory)
        self._state.tracker.start()
        self._modes = [_FusedAttentionMode(self._state), _CountingMode(self._state)]
        try:
            for m in self._modes:
                m.__enter__()
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()

    def _close(self) -> None:
        state = self._state
        try:
            for m in reversed(self._modes):
                m.__exit__(None, None, None)
        finally:
            self._modes = []
            if state is not None:
                state.tracker.stop()
                self._profile = state.freeze()
                state.memory.close()
                self._state = None

    # --- results ---------------------------------------------------------------------------
    @property
    def profile(self) -> Profile:
        """The frozen result (a live snapshot while still counting)."""
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


class _CountState:
    """What one counting context accumulates. Private to OpCounter."""

    def __init__(self, model: nn.Module | None, causal: CausalRule, track_memory: bool) -> None:
        self.causal = causal
        self.records: list[OpRecord] = []
        self.zero_cost: Counter[str] = Counter()
        self.unknown: dict[str, tuple[int, set[str], str]] = {}
        self.memory = LiveMemory()
        self.track_memory = track_memory
        self.inside_fused = 0
        self.op_index = 0
        self.tracker = ModuleTracker(model, self._on_push, self._on_pop)
        self.tracker.stack[0].produced_at_entry = 0

    # frames: entry snapshot, exit bookkeeping of ACT / CACHE / PEAK
    def _on_push(self, frame: Frame) -> None:
        frame.first_op = self.op_index
        frame.produced_at_entry = self.memory.produced_elements
        frame.peak_bytes = self.memory.live_bytes

    def _on_pop(self, frame: Frame, output: Any) -> None:
        parent = self.tracker.stack[-1]
        parent.peak_bytes = max(parent.peak_bytes, frame.peak_bytes)
        if frame.in_backward:
            return
        info = self.tracker.scopes[frame.name]
        info.peak_bytes = max(info.peak_bytes, frame.peak_bytes)
        produced = self.memory.produced_elements - frame.produced_at_entry
        seen: set[int] = set()
        act = act_bytes = inside = 0
        for t in output_tensors(output):
            if id(t) in seen:
                continue
            seen.add(id(t))
            act += t.numel()
            act_bytes += stored_bytes(t)
            born = self.memory.born_at(t)
            if born is not None and born >= frame.first_op:
                inside += t.numel()
        info.act += act
        info.act_bytes += act_bytes
        info.cache += max(produced - inside, 0)

    def scope_and_phase(self) -> tuple[str, str]:
        if torch._C._current_graph_task_id() != -1:
            return self.tracker.backward_scope(), "backward"
        return self.tracker.current.name, "forward"

    def count(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any) -> None:
        """Record one op call that has run and returned ``out``."""
        packet = func.overloadpacket
        self.op_index += 1
        if self.track_memory:
            self._track(out)
        fn = lookup(packet)
        if fn is None:
            name = str(packet)
            if packet in ZERO_COST or _namespace(packet) in ZERO_COST_NAMESPACES:
                self.zero_cost[name] += 1
            else:
                self._unknown(name, "no formula registered")
            return
        scope, phase = self.scope_and_phase()
        extra: dict[str, Any] = {}
        causal = None
        if packet in _ATTENTION:
            causal = self._is_causal(args, kwargs, scope)
            extra["causal_computed"] = causal and self.causal == "computed"
        try:
            cost = fn(*to_meta(args), result=to_meta(out), **to_meta(kwargs), **extra)
        except UnsupportedCall as e:
            self._unknown(str(packet), str(e))
            return
        cost = _with_bytes(cost, func, packet, args, kwargs, out)
        self.records.append(OpRecord(str(packet), scope, phase, _first_dtype(args, out), cost, causal))

    def _track(self, out: Any) -> None:
        frame = self.tracker.current
        for t in iter_tensors(out):
            self.memory.track(t, self.op_index)
        if self.memory.live_bytes > frame.peak_bytes:
            frame.peak_bytes = self.memory.live_bytes

    def _unknown(self, name: str, reason: str) -> None:
        scope, _ = self.scope_and_phase()
        calls, scopes, why = self.unknown.get(name, (0, set(), reason))
        if calls == 0:
            warnings.warn(f"dispatchprof: {name} has no formula ({reason}); its calls are kept as "
                          f"unknown in the result (OpCounter.unknown_ops()), not counted", stacklevel=4)
        scopes.add(scope)
        self.unknown[name] = (calls + 1, scopes, why)

    def _is_causal(self, args: tuple, kwargs: dict, scope: str) -> bool:
        flag = kwargs.get("is_causal")
        if flag is None:
            flag = next((a for a in args[3:] if isinstance(a, bool)), False)
        if flag:
            return True
        hint = self.tracker.scopes.get(scope)
        return bool(hint is not None and hint.causal_hint)

    def freeze(self) -> Profile:
        scopes = tuple(
            Scope(s.name, s.module_type, s.parent, s.calls, s.params[0], s.params[1],
                  s.params_self[0], s.buffers[0], s.buffers[1], s.act, s.act_bytes, s.cache,
                  self.memory.peak_bytes if s.name == "" else s.peak_bytes)
            for s in self.tracker.scopes.values())
        unknown = tuple(UnknownOp(op, calls, tuple(sorted(sc)), why)
                        for op, (calls, sc, why) in self.unknown.items())
        return Profile(tuple(self.records), scopes, unknown, tuple(sorted(self.zero_cost.items())),
                       self.causal, self.memory.peak_bytes)


def _namespace(packet: torch._ops.OpOverloadPacket) -> str:
    return packet._qualified_op_name.split("::")[0]


_SCHEMA_CACHE: dict[torch._ops.OpOverload, tuple[frozenset[str], tuple[int, ...], tuple[str, ...]]] = {}


def _schema_info(func: torch._ops.OpOverload) -> tuple[frozenset[str], tuple[int, ...], tuple[str, ...]]:
    """(write-only kwarg names, mutated positional indices, mutated kwarg names) of an overload."""
    info = _SCHEMA_CACHE.get(func)
    if info is None:
        write_only, positions, names = set(), [], []
        for i, a in enumerate(func._schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                if a.kwarg_only:
                    write_only.add(a.name)
                    names.append(a.name)
                else:
                    positions.append(i)
        info = _SCHEMA_CACHE[func] = (frozenset(write_only), tuple(positions), tuple(names))
    return info


def _with_bytes(cost: Cost, func: torch._ops.OpOverload, packet: Any, args: tuple, kwargs: dict,
                out: Any) -> Cost:
    """Fill in the generic traffic rule where the formula left bytes as None: every tensor
    input read once (stride-0 dims once; write-only ``out=`` and overwritten targets not read),
    every output and mutated argument written once."""
    if cost.bytes_read is not None and cost.bytes_written is not None:
        return cost
    write_only, mutated_pos, mutated_kw = _schema_info(func)
    read = cost.bytes_read
    if read is None:
        skip_first = packet in OVERWRITES_SELF
        read = 0
        for i, a in enumerate(args):
            if not (skip_first and i == 0):
                read += sum(stored_bytes(t) for t in iter_tensors(a))
        read += sum(stored_bytes(t) for k, v in kwargs.items() if k not in write_only
                    for t in iter_tensors(v))
    written = cost.bytes_written
    if written is None:
        seen: set[int] = set()
        written = 0
        targets = [out] + [args[i] for i in mutated_pos if i < len(args)] + [kwargs.get(k) for k in mutated_kw]
        for t in iter_tensors(targets):
            if id(t) not in seen:
                seen.add(id(t))
                written += stored_bytes(t)
    return cost.with_bytes(read, written)


def _first_dtype(args: tuple, out: Any) -> str:
    for t in iter_tensors(args):
        return dtype_name(t.dtype)
    for t in iter_tensors(out):
        return dtype_name(t.dtype)
    return ""


class _CountingMode(TorchDispatchMode):
    """Sees every aten op; counts it unless a fused op above already did."""

    def __init__(self, state: _CountState) -> None:
        super().__init__()
        self.state = state

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        state = self.state
        if state.inside_fused:
            return func(*args, **kwargs)
        if func.overloadpacket in _DATA_DEPENDENT and any(t.device.type == "meta" for t in iter_tensors(args)):
            raise DataDependentOpError(str(func.overloadpacket), state.scope_and_phase()[0])
        out = func(*args, **kwargs)
        state.count(func, args, kwargs, out)
        return out


class _FusedAttentionMode(TorchFunctionMode):
    """Records F.scaled_dot_product_attention as one op, above torch's backend choice."""

    def __init__(self, state: _CountState) -> None:
        super().__init__()
        self.state = state

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention or self.state.inside_fused \
                or torch._C._current_graph_task_id() != -1:
            return func(*args, **kwargs)
        self.state.inside_fused += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self.state.inside_fused -= 1
        self.state.count(aten.scaled_dot_product_attention.default, args, kwargs, out)
        return out
