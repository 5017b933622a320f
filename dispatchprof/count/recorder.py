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

from dispatchprof.count.hostclock import HostClock
from dispatchprof.count.hostmemo import host_memo_of
from dispatchprof.count.ledger import TensorLedger, storage_key
from dispatchprof.count.tensors import (dtype_name, first_kind, iter_tensors, moved_onto_meta, output_tensors,
                                       stored_bytes, to_meta)
from dispatchprof.count.tracker import Frame, ModuleTracker
from dispatchprof.count.traffic import EVERYTHING, Existing, bytes_read, bytes_written, input_keys, parameter_share
from dispatchprof.count.stand_ins import runner
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import UNRECORDED, OpRecord, Scope, UnknownOp
from op_formulas.attention import fused_backward
from op_formulas.collectives import COLLECTIVES
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import (OVERWRITES_SELF, PARAMETER_GATHERS, ZERO_COST, ZERO_COST_NAMESPACES, UnsupportedCall,
                                  lookup)

aten = torch.ops.aten
Tensor = torch.Tensor
_graph_task_id = torch._C._current_graph_task_id
#: Ops whose output depends on tensor values: impossible on meta tensors.
DATA_DEPENDENT = frozenset({aten._local_scalar_dense, aten.nonzero, aten.masked_select,
                            aten._unique2, aten.unique_consecutive, aten.unique_dim,
                            aten.repeat_interleave, aten.bincount})
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
        self.fused_done: dict[tuple[int, int], int] = {}   # (span start, graph task) -> its backward record
        self.fused_record = UNRECORDED    # the backward record of the fused call whose op runs now
        self.tracker = ModuleTracker(model, self._on_push, self._on_pop)
        self.op_infos: dict[int, OpInfo] = {}      # id(overload) -> OpInfo
        #: the host clock (dispatchprof.count.hostclock) when host time is measured, else None
        self.clock: HostClock | None = None
        self.block_starts: list[int] = []          # record indices where OpCounter.phase blocks begin
        self.reuse_host = False       # reuse this model's first host times per op position (hostmemo)
        self.host_memo: dict | None = None

    def host_taken(self, op: str, scope: str, phase: str) -> tuple[float, int]:
        """(host loop iterations, host calls) for the record being made: what the clock gathered since
        the last record ((0.0, 0) without a clock), or, with ``reuse_host``, what the first count of
        this model measured at this op position (dispatchprof.count.hostmemo)."""
        if self.clock is None:
            return 0.0, 0
        taken = self.clock.take()
        if not self.reuse_host:
            return taken
        if self.host_memo is None:
            if self.tracker.root_model is None:
                return taken
            self.host_memo = host_memo_of(self.tracker.root_model)
        start = self.block_starts[-1] if self.block_starts else 0
        return self.host_memo.setdefault((phase, len(self.records) - start, op, scope), taken)

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
        return self.tracker.stack[-1].name, self.label

    def op_info(self, func: torch._ops.OpOverload) -> OpInfo:
        """What the hot path needs to know of an overload, looked up once per counting context
        (keyed by identity: overloads live as long as torch, and ``OpInfo`` holds each one)."""
        info = self.op_infos.get(id(func))
        if info is None:
            info = self.op_infos[id(func)] = OpInfo(func)
        return info

    def count(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any,
              info: OpInfo | None = None) -> None:
        """Record one op call that has run and returned ``out`` (``info``: its `op_info`)."""
        clock = self.clock
        if clock is not None and not clock.depth:    # from the fused attention mode: the counter's time
            clock.depth = 1
            try:
                return self.count(func, args, kwargs, out, info)
            finally:
                clock.depth = 0
                clock.leave()
        if info is None:
            info = self.op_info(func)
        self.op_index += 1
        fn = info.formula
        out_tensors = iter_tensors(out)
        if fn is None:
            if info.zero_cost:
                self._track(out_tensors, UNRECORDED, EVERYTHING)          # views never allocate
                self.zero_cost[info.name] += 1
            else:
                self._track(out_tensors, UNRECORDED, Existing(input_keys(args, kwargs), self.tracker.resident))
                self._unknown(info.name, "no formula registered")
            return
        if info.moves and moved_onto_meta(args, kwargs, out):   # a CPU run's no-op: free (docs/zoo.md)
            self._track(out_tensors, UNRECORDED, EVERYTHING)
            self.zero_cost[info.name] += 1
            return
        if _graph_task_id() != -1:
            scope, phase = self.tracker.backward_scope(), "backward"
        else:
            scope, phase = self.tracker.stack[-1].name, self.label
        now = time.perf_counter()
        self.phase_wall[phase] = self.phase_wall.get(phase, 0.0) + now - self.last_op_time
        self.last_op_time = now
        causal = None
        meta_args = to_meta(args)
        try:
            if info.attention:
                causal, computed = self._attention_rule(args, kwargs, scope)
                cost = fn(*meta_args, result=to_meta(out), **kwargs, causal_computed=computed)
            elif info.collective:
                cost = fn(*meta_args, result=to_meta(out), **kwargs, **_world())
            else:
                cost = fn(*meta_args, result=to_meta(out), **kwargs)   # tensors in kwargs go as they are
        except UnsupportedCall as e:
            self._track(out_tensors, UNRECORDED, Existing(input_keys(args, kwargs), self.tracker.resident))
            self._unknown(info.name, str(e))
            return
        total, sources, param_bytes, param_elements, keys, first = bytes_read(info, args, kwargs, self.tracker.resident,
                                                                                self.ledger.producer_of,
                                                                                self.ledger.host_identity)
        if info.gathers is not None and cost.bytes_read is not None and info.gathers < len(args):
            param_bytes, param_elements = parameter_share(total, param_bytes, param_elements, cost.bytes_read,
                                                          args[info.gathers], self.tracker.resident)
        written, out_elements = bytes_written(info, args, kwargs, out_tensors)
        if cost.bytes_read is None or cost.bytes_written is None:
            cost = cost.with_bytes(total if cost.bytes_read is None else cost.bytes_read,
                                   written if cost.bytes_written is None else cost.bytes_written)
        index = len(self.records)
        if first is None and out_tensors:
            first = out_tensors[0]
        self.records.append(OpRecord(info.name, scope, phase, "" if first is None else dtype_name(first.dtype),
                                     cost, causal, tuple(sources), param_bytes, param_elements,
                                     out_elements, _shapes(meta_args), *self.host_taken(info.name, scope, phase)))
        if self.tensor_kind is None:
            self._set_kind(first_kind((args, out)))
        self._track(out_tensors, index, keys)
        for i in info.mutated_positions:           # mutated arguments now live where this op ran
            if i < len(args):
                self._track(iter_tensors(args[i]), index, keys)

    def _set_kind(self, kind: str | None) -> None:
        """The count's tensor kind, from its first counted op; the host clock subtracts that
        kind's op floor from then on."""
        self.tensor_kind = kind
        if self.clock is not None:
            self.clock.use_kind(kind)

    def count_view(self, info: OpInfo) -> None:
        """Record one call of a zero-cost op (``info.view``: a view or a metadata query): no
        record, a call in ``zero_cost``. Views never allocate, and the ledger follows storages,
        not tensors: nothing else changes. What `count` does for such an op, with fewer steps."""
        self.op_index += 1
        self.zero_cost[info.name] += 1

    def _track(self, tensors: list[torch.Tensor], producer: int, not_new: Any) -> None:
        ledger = self.ledger
        for t in tensors:
            ledger.track(t, self.op_index, producer, not_new)
        live = ledger.live_bytes
        frame = self.tracker.stack[-1]
        if live > frame.peak_bytes:
            frame.peak_bytes = live
        above = live - self.label_baseline
        if above > self.phase_peaks.get(self.label, 0):
            self.phase_peaks[self.label] = above

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
        host_loops, host_calls = self.host_taken(name, scope, phase)
        self.records.append(OpRecord(name, scope, phase, _first_dtype((args, out)), cost,
                                     out_elements=out_elements, host_loops=host_loops, host_calls=host_calls))
        if self.tensor_kind is None:
            self._set_kind(first_kind((args, out)))
        self._track(list(outs), len(self.records) - 1,
                    Existing(input_keys(args, {}), self.tracker.resident))

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
        info = (to_meta(tuple(args[:3])), causal, computed, _first_dtype(args))
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
            self.fused_done[key] = len(self.records)
            (q, k, v), causal, computed, dtype = self.fused_spans[i][2]
            cost = fused_backward(q, k, v, causal_computed=computed)
            self.op_index += 1
            scope = self.tracker.backward_scope()
            host_loops, host_calls = self.host_taken("aten.scaled_dot_product_attention_backward", scope, "backward")
            self.records.append(OpRecord("aten.scaled_dot_product_attention_backward",
                                         scope, "backward", dtype, cost,
                                         causal, shapes=(q.shape, k.shape, v.shape), host_loops=host_loops,
                                         host_calls=host_calls))
        self.fused_record = self.fused_done[key]
        return True

    def run_fused_backward(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, info: OpInfo) -> Any:
        """Run one op of a fused attention call's backward (after `in_fused_backward` said so): not
        counted, but the storages it allocates (dq, dk, dv, whatever the backend) and the arguments
        it writes in place are marked as written by that call's backward record, so the ops that
        read the gradients after it see where they were made (the simulator charges a host upload
        for a read whose producer is the host). Views of existing storages change nothing."""
        out = func(*args, **kwargs)
        producer, mark = self.fused_record, self.ledger.mark
        inputs = input_keys(args, kwargs)
        for t in iter_tensors(out):
            if storage_key(t) not in inputs:
                mark(t, producer)
        for i in info.mutated_positions:
            if i < len(args):
                for t in iter_tensors(args[i]):
                    mark(t, producer)
        for name in info.mutated_names:
            for t in iter_tensors(kwargs.get(name)):
                mark(t, producer)
        return out

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
                       tuple(sorted(self.phase_peaks.items())), tuple(sorted(self.phase_wall.items())),
                       "measured" if self.clock is not None else "off",
                       self.clock.loop_ns if self.clock is not None else 0.0)


class OpInfo:
    """One overload's entry on the hot path: its formula (None if it has none), name, schema
    facts and the registry sets it belongs to. Built once per counting context."""

    __slots__ = ("func", "packet", "name", "formula", "zero_cost", "attention", "collective", "gathers", "moves",
                 "skips_first", "data_dependent", "decomposable", "write_only", "mutated_positions", "mutated_names",
                 "view", "call")

    def __init__(self, func: torch._ops.OpOverload) -> None:
        self.func = func
        #: runs the op: the C++ callable ``OpOverload.__call__`` calls (one Python frame less per
        #: op), or the overload itself for subclasses that override ``__call__`` (TorchBind)
        self.call = func._op if type(func) is torch._ops.OpOverload else func
        packet = self.packet = func.overloadpacket
        self.call = runner(packet, self.call)        # a fake/meta stand-in where torch needs one
        self.name = str(packet)
        self.formula = lookup(packet)
        self.zero_cost = packet in ZERO_COST or packet._qualified_op_name.split("::")[0] in ZERO_COST_NAMESPACES
        self.attention = packet in ATTENTION_OPS
        self.collective = packet in COLLECTIVES
        #: the position of the parameter the formula reads only part of, or None
        self.gathers = PARAMETER_GATHERS.get(packet)
        #: aten._to_copy: free where it only moves a CPU constant onto the meta device (`moved_onto_meta`)
        self.moves = packet is aten._to_copy
        self.skips_first = packet in OVERWRITES_SELF    # first argument overwritten, not read
        self.data_dependent = packet in DATA_DEPENDENT
        #: an aten op with a CompositeImplicitAutograd kernel (decomposed when it has no formula)
        self.decomposable = func.namespace == "aten" and func.has_kernel_for_dispatch_key(
            torch._C.DispatchKey.CompositeImplicitAutograd)
        write_only, positions, names = set(), [], []
        for i, a in enumerate(func._schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                if a.kwarg_only:
                    write_only.add(a.name)
                    names.append(a.name)
                else:
                    positions.append(i)
        self.write_only = frozenset(write_only)       # write-only ``out=`` kwargs: not read
        self.mutated_positions = tuple(positions)
        self.mutated_names = tuple(names)
        #: zero-cost and nothing else to check: the mode's short path (`Recorder.count_view`)
        self.view = (self.formula is None and self.zero_cost and not self.decomposable
                     and not self.data_dependent)


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


def _first_dtype(args: tuple) -> str:
    for t in iter_tensors(args):
        return dtype_name(t.dtype)
    return ""


__all__ = ["ATTENTION_OPS", "DATA_DEPENDENT", "OpInfo", "Recorder"]
