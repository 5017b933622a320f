"""Turning one aten op call into an OpRecord: its formula, its bytes, its scope and phase,
where its inputs came from; and the per-scope bookkeeping of ACT, CACHE and PEAK."""

from __future__ import annotations

import bisect
import time
import warnings
from collections import Counter
from typing import Any

import torch
from torch import nn
from torch._subclasses import FakeTensor

from dispatchprof.count.ledger import TensorLedger, storage_key
from dispatchprof.count.tensors import dtype_name, iter_tensors, output_tensors, stored_bytes, to_meta
from dispatchprof.count.tracker import Frame, ModuleTracker
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import UNRECORDED, OpRecord, Scope, UnknownOp
from op_formulas.attention import fused_backward
from op_formulas.collectives import COLLECTIVES
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import OVERWRITES_SELF, ZERO_COST, ZERO_COST_NAMESPACES, UnsupportedCall, lookup

aten = torch.ops.aten
ATTENTION_OPS = frozenset({
    aten.scaled_dot_product_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention_backward,
})


class Recorder:
    """What one counting context accumulates. Private to OpCounter."""

    def __init__(self, model: nn.Module | None, causal: str) -> None:
        self.causal = causal
        self.records: list[OpRecord] = []
        self.zero_cost: Counter[str] = Counter()
        self.unknown: dict[str, tuple[int, set[str], str]] = {}
        self.ledger = TensorLedger()
        self.inside_fused = 0
        self.label = "forward"        # phase of ops outside backward (OpCounter.phase)
        self.label_baseline = 0       # live bytes when the current label began
        self.optimizer_saved: tuple[str, int] | None = None   # label before an optimizer step
        self.phase_peaks: dict[str, int] = {}   # label -> peak live bytes above its baseline
        self.phase_wall: dict[str, float] = {}  # phase -> measured wall time of its ops (s)
        self.last_op_time = time.perf_counter()
        self.tensor_kind: str | None = None   # "real", "fake" or "meta", from the first counted op
        self.op_index = 0
        # autograd sequence numbers [start, end) of each fused attention call's nodes, and what
        # its backward counts: (q, k, v metas, causal, computed rule, dtype, scope)
        self.fused_starts: list[int] = []
        self.fused_spans: list[tuple[int, int, tuple]] = []
        self.fused_done: set[tuple[int, int]] = set()
        self.tracker = ModuleTracker(model, self._on_push, self._on_pop)

    # --- optimizer steps ------------------------------------------------------------------
    def enter_optimizer(self) -> None:
        self.optimizer_saved = (self.label, self.label_baseline)
        self.label, self.label_baseline = "optimizer", self.ledger.live_bytes

    def leave_optimizer(self) -> None:
        if self.optimizer_saved is not None:
            self.label, self.label_baseline = self.optimizer_saved
            self.optimizer_saved = None

    # --- frames: entry snapshot, exit bookkeeping of ACT / CACHE / PEAK ---------------------
    def _on_push(self, frame: Frame) -> None:
        if len(self.tracker.stack) == 1:     # a top-level call: no optimizer step is running
            self.leave_optimizer()
        frame.started = time.perf_counter()
        frame.first_op = self.op_index
        frame.produced_at_entry = self.ledger.produced_elements
        frame.peak_bytes = self.ledger.live_bytes

    def _on_pop(self, frame: Frame, output: Any) -> None:
        parent = self.tracker.stack[-1]
        parent.peak_bytes = max(parent.peak_bytes, frame.peak_bytes)
        if frame.in_backward:
            return
        info = self.tracker.scopes[frame.name]
        info.latency_s += time.perf_counter() - frame.started
        info.peak_bytes = max(info.peak_bytes, frame.peak_bytes)
        produced = self.ledger.produced_elements - frame.produced_at_entry
        seen: set[int] = set()
        inside = 0
        for t in output_tensors(output):
            if id(t) in seen:
                continue
            seen.add(id(t))
            info.act += t.numel()
            info.act_bytes += stored_bytes(t)
            born = self.ledger.born_at(t)
            if born is not None and born >= frame.first_op:
                inside += t.numel()
        info.cache += max(produced - inside, 0)

    # --- ops -------------------------------------------------------------------------------
    def scope_and_phase(self) -> tuple[str, str]:
        if torch._C._current_graph_task_id() != -1:
            return self.tracker.backward_scope(), "backward"
        return self.tracker.current.name, self.label

    def count(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any) -> None:
        """Record one op call that has run and returned ``out``."""
        packet = func.overloadpacket
        self.op_index += 1
        fn = lookup(packet)
        if fn is None:
            if packet in ZERO_COST or packet._qualified_op_name.split("::")[0] in ZERO_COST_NAMESPACES:
                self._track(out, UNRECORDED, _ALL)          # views never allocate
                self.zero_cost[str(packet)] += 1
            else:
                self._track(out, UNRECORDED, _Existing(_input_keys(args, kwargs), self.tracker.resident))
                self._unknown(str(packet), "no formula registered")
            return
        scope, phase = self.scope_and_phase()
        now = time.perf_counter()
        self.phase_wall[phase] = self.phase_wall.get(phase, 0.0) + now - self.last_op_time
        self.last_op_time = now
        extra: dict[str, Any] = {}
        causal = None
        if packet in ATTENTION_OPS:
            causal, extra["causal_computed"] = self._attention_rule(args, kwargs, scope)
        elif packet in COLLECTIVES:
            extra.update(_world())
        try:
            meta_args = to_meta(args)
            cost = fn(*meta_args, result=to_meta(out), **to_meta(kwargs), **extra)
        except UnsupportedCall as e:
            self._track(out, UNRECORDED, _Existing(_input_keys(args, kwargs), self.tracker.resident))
            self._unknown(str(packet), str(e))
            return
        reads = _Reads(func, packet, args, kwargs, self)
        written, out_elements = _written(func, args, kwargs, out)
        cost = cost.with_bytes(reads.total if cost.bytes_read is None else cost.bytes_read,
                               written if cost.bytes_written is None else cost.bytes_written)
        index = len(self.records)
        self.records.append(OpRecord(str(packet), scope, phase, _first_dtype(args, out), cost, causal,
                                     tuple(reads.sources), reads.param_bytes, reads.param_elements,
                                     out_elements, _shapes(meta_args)))
        if self.tensor_kind is None:
            self.tensor_kind = _kind_of(args, out)
        self._track(out, index, reads.keys)
        for i in _schema_info(func)[1]:           # mutated arguments now live where this op ran
            if i < len(args):
                self._track(args[i], index, reads.keys)

    def _track(self, out: Any, producer: int, not_new: Any) -> None:
        frame = self.tracker.current
        for t in iter_tensors(out):
            self.ledger.track(t, self.op_index, producer, not_new)
        live = self.ledger.live_bytes
        if live > frame.peak_bytes:
            frame.peak_bytes = live
        if live - self.label_baseline > self.phase_peaks.get(self.label, 0):
            self.phase_peaks[self.label] = live - self.label_baseline

    def unknown_call(self, name: str, reason: str) -> None:
        """Keep one call of ``name`` that is not counted, with the reason."""
        self._unknown(name, reason)

    def count_cost(self, name: str, cost: Cost, args: tuple, out: Any) -> None:
        """Record one call the counter costed itself (a higher-order op such as flex_attention):
        every tensor in ``args`` read once and every tensor of ``out`` written once, unless the
        cost says otherwise."""
        self.op_index += 1
        scope, phase = self.scope_and_phase()
        outs = {id(t): t for t in iter_tensors(out)}.values()
        read = sum(stored_bytes(t) for t in {id(t): t for t in iter_tensors(args)}.values())
        written, out_elements = sum(stored_bytes(t) for t in outs), sum(t.numel() for t in outs)
        cost = cost.with_bytes(read if cost.bytes_read is None else cost.bytes_read,
                               written if cost.bytes_written is None else cost.bytes_written)
        self.records.append(OpRecord(name, scope, phase, _first_dtype(args, out), cost,
                                     out_elements=out_elements))
        if self.tensor_kind is None:
            self.tensor_kind = _kind_of(args, out)
        self._track(iter_tensors(out), len(self.records) - 1,
                    _Existing(_input_keys(args, {}), self.tracker.resident))

    def _unknown(self, name: str, reason: str) -> None:
        scope, _ = self.scope_and_phase()
        calls, scopes, why = self.unknown.get(name, (0, set(), reason))
        if calls == 0:
            warnings.warn(f"dispatchprof: {name} has no formula ({reason}); its calls are kept as "
                          f"unknown in the result (OpCounter.unknown_ops()), not counted", stacklevel=5)
        scopes.add(scope)
        self.unknown[name] = (calls + 1, scopes, why)

    def _attention_rule(self, args: tuple, kwargs: dict, scope: str) -> tuple[bool, bool | str]:
        """(causal, causal_computed): torch's is_causal=True masks top-left aligned; a causal
        hint (the module's is_causal under an explicit mask) means the end-aligned KV mask."""
        flag = kwargs.get("is_causal")
        if flag is None:
            flag = next((a for a in args[3:] if isinstance(a, bool)), False)
        hint = self.tracker.scopes.get(scope)
        causal = bool(flag) or bool(hint is not None and hint.causal_hint)
        if not causal or self.causal != "computed":
            return causal, False
        return True, "top_left" if flag else "end"

    # --- fused attention backward: one record, whatever ops the backend's backward runs ----
    def remember_fused(self, start: int, end: int, args: tuple, kwargs: dict) -> None:
        """The autograd nodes numbered [start, end) belong to one fused attention call."""
        if end <= start:
            return
        scope, _ = self.scope_and_phase()
        causal, computed = self._attention_rule(args, kwargs, scope)
        info = (to_meta(tuple(args[:3])), causal, computed, _first_dtype(args, None))
        i = bisect.bisect_right(self.fused_starts, start)
        self.fused_starts.insert(i, start)
        self.fused_spans.insert(i, (start, end, info))

    def in_fused_backward(self) -> bool:
        """Whether the autograd node now running belongs to a fused attention call; the first
        op of each such call in each backward pass records the call's backward."""
        node = torch._C._current_autograd_node()
        if node is None:
            return False
        nr = node._sequence_nr()
        i = bisect.bisect_right(self.fused_starts, nr) - 1
        if i < 0 or nr >= self.fused_spans[i][1]:
            return False
        key = (self.fused_spans[i][0], torch._C._current_graph_task_id())
        if key not in self.fused_done:
            self.fused_done.add(key)
            (q, k, v), causal, computed, dtype = self.fused_spans[i][2]
            cost = fused_backward(q, k, v, causal_computed=computed)
            self.op_index += 1
            self.records.append(OpRecord("aten.scaled_dot_product_attention_backward",
                                         self.tracker.backward_scope(), "backward", dtype, cost,
                                         causal, shapes=(q.shape, k.shape, v.shape)))
        return True

    def freeze(self) -> Profile:
        scopes = tuple(
            Scope(s.name, s.module_type, s.parent, s.calls, s.params[0], s.params[1],
                  s.params_self[0], s.params_self[1], s.buffers[0], s.buffers[1], s.act, s.act_bytes,
                  s.cache, self.ledger.peak_bytes if s.name == "" else s.peak_bytes, s.latency_s)
            for s in self.tracker.scopes.values())
        unknown = tuple(UnknownOp(op, calls, tuple(sorted(sc)), why)
                        for op, (calls, sc, why) in self.unknown.items())
        return Profile(tuple(self.records), scopes, unknown, tuple(sorted(self.zero_cost.items())),
                       self.causal, self.ledger.peak_bytes, self.tensor_kind or "",
                       tuple(sorted(self.phase_peaks.items())), tuple(sorted(self.phase_wall.items())))


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


class _Reads:
    """The generic read rule and where each read tensor comes from: every tensor input once
    (stride-0 dims once), except write-only ``out=`` arguments and overwritten targets."""

    __slots__ = ("total", "sources", "param_bytes", "param_elements", "keys")

    def __init__(self, func: Any, packet: Any, args: tuple, kwargs: dict, recorder: Recorder) -> None:
        self.total = self.param_bytes = self.param_elements = 0
        self.sources: list[tuple[int, int, int]] = []
        self.keys = _Existing(_input_keys(args, kwargs), recorder.tracker.resident)
        write_only = _schema_info(func)[0]
        skip_first = packet in OVERWRITES_SELF
        for i, a in enumerate(args):
            if not (skip_first and i == 0):
                self._add(a, recorder)
        for k, v in kwargs.items():
            if k not in write_only:
                self._add(v, recorder)

    def _add(self, value: Any, recorder: Recorder) -> None:
        for t in iter_tensors(value):
            nbytes = stored_bytes(t)
            self.total += nbytes
            key = storage_key(t)
            if key in recorder.tracker.resident or isinstance(t, nn.Parameter):
                self.param_bytes += nbytes
                self.param_elements += nbytes // t.element_size() if t.element_size() else 0
            else:
                self.sources.append((recorder.ledger.producer_of(key), nbytes, key or 0))


class _Existing:
    """Storages that existed before an op: its inputs (read or not) and every parameter."""

    __slots__ = ("inputs", "resident")

    def __init__(self, inputs: set[int | None], resident: set[int]) -> None:
        self.inputs, self.resident = inputs, resident

    def __contains__(self, key: object) -> bool:
        return key in self.inputs or key in self.resident


class _Everything:
    """A set that contains every key: views never allocate."""

    def __contains__(self, key: object) -> bool:
        return True


_ALL = _Everything()


def _input_keys(args: tuple, kwargs: dict) -> set[int | None]:
    return {storage_key(t) for t in iter_tensors((args, kwargs))}


def _written(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[int, int]:
    """(bytes, elements) written: every output and mutated argument, each tensor once."""
    _, mutated_pos, mutated_kw = _schema_info(func)
    targets = [out] + [args[i] for i in mutated_pos if i < len(args)] + [kwargs.get(k) for k in mutated_kw]
    seen: set[int] = set()
    nbytes = elements = 0
    for t in iter_tensors(targets):
        if id(t) not in seen:
            seen.add(id(t))
            nbytes += stored_bytes(t)
            elements += t.numel()
    return nbytes, elements


def _world() -> dict[str, int]:
    """world_size and rank of the default process group (1 and 0 without one)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return {"world_size": dist.get_world_size(), "rank": dist.get_rank()}
    return {"world_size": 1, "rank": 0}


def _shapes(meta_args: tuple) -> tuple[tuple[int, ...], ...]:
    """Shapes of the tensor arguments, in order (lists of tensors flattened)."""
    out = []
    for a in meta_args:
        if isinstance(a, TensorMeta):
            out.append(a.shape)
        elif isinstance(a, (list, tuple)):
            out.extend(x.shape for x in a if isinstance(x, TensorMeta))
    return tuple(out)


def _kind_of(args: tuple, out: Any) -> str | None:
    for t in iter_tensors((args, out)):
        if isinstance(t, FakeTensor):
            return "fake"
        return "meta" if t.device.type == "meta" else "real"
    return None


def _first_dtype(args: tuple, out: Any) -> str:
    for t in iter_tensors(args):
        return dtype_name(t.dtype)
    for t in iter_tensors(out):
        return dtype_name(t.dtype)
    return ""


__all__ = ["ATTENTION_OPS", "Recorder"]
