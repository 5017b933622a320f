"""Module scopes: which module's forward (or backward) an op belongs to.

A stack of frames is pushed by a global forward pre-hook and popped by a global forward
hook registered with ``always_call=True`` (so a forward that raises still pops). A frame's
name is the module's path as seen from its caller: the caller's name plus the callee's
path inside the caller (``named_modules`` of the caller), so a module shared by two parents
gets one scope under each, and a module that re-enters itself stays in its own scope.
Names are those of ``model.named_modules()``; the root model is ``""``.

Backward ops are attributed through autograd sequence numbers: every scope change in the
forward records the thread's next sequence number; in the backward, the autograd node
running an op carries the sequence number it got in the forward, and the scope in effect
then is found by bisection.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from dispatchprof.count.hostclock import HostClock
from dispatchprof.count.ledger import storage_key
from dispatchprof.count.moduletree import ModuleTree, relative_name, size_of
from dispatchprof.count.tensors import NO_TORCH_FUNCTION

_next_sequence_nr: Callable[[], int] = torch._C._autograd._get_sequence_nr
_NO_SEQUENCE = 2**63  # AccumulateGrad and other nodes made outside a forward
_MISSING = object()


def _is_causal(module: nn.Module) -> Any:
    """``getattr(module, "is_causal", None)`` without nn.Module.__getattr__ raising for the many
    modules that have none (its fallback finds only parameters, buffers and submodules)."""
    if getattr(type(module), "is_causal", _MISSING) is _MISSING:
        return module.__dict__.get("is_causal")
    return getattr(module, "is_causal", None)


@dataclass
class Frame:
    """One running module call."""

    name: str
    module: nn.Module | None
    first_op: int                 # index of the first op counted inside it
    produced_at_entry: int = 0    # TensorLedger.produced_elements at entry
    peak_bytes: int = 0           # peak live bytes while it ran (children included)
    in_backward: bool = False
    started: float = 0.0          # perf_counter at entry


@dataclass
class ScopeInfo:
    """A module scope as seen during counting (mutable while counting)."""

    name: str
    module_type: str
    parent: str | None
    calls: int = 0
    act: int = 0                  # elements of forward outputs, summed over calls
    act_bytes: int = 0
    cache: int = 0                # elements of temporaries (not outputs), summed over calls
    peak_bytes: int = 0           # max over calls
    latency_s: float = 0.0        # wall time of its forward calls (counting included)
    params: tuple[int, int] = (0, 0)          # (elements, bytes) of the module and its children
    params_self: tuple[int, int] = (0, 0)     # (elements, bytes) it owns directly
    buffers: tuple[int, int] = (0, 0)
    buffers_self: tuple[int, int] = (0, 0)
    causal_hint: bool | None = None


class ModuleTracker:
    """The scope stack; ``start()`` installs the global hooks, ``stop()`` removes them."""

    def __init__(self, model: nn.Module | None, on_push: Callable[[Frame], None],
                 on_pop: Callable[[Frame, Any], None]) -> None:
        #: storage keys of every parameter and buffer of the modules seen: resident tensors
        self.resident: set[int] = set()
        self._owned: set[int] = set()    # ids of parameters already given to a scope as its own
        self.root_model = model
        self.stack: list[Frame] = [Frame("", None, 0)]
        self.scopes: dict[str, ScopeInfo] = {"": ScopeInfo("", type(model).__name__ if model else "", None)}
        self._tree: ModuleTree | None = None
        self._direct: dict[int, dict[int, str]] = {}
        self._seq: list[int] = []
        self._seq_scope: list[str] = []
        self._handles: list[Any] = []
        self._thread = 0        # the counting thread: module hooks are process-wide
        self._on_push, self._on_pop = on_push, on_pop
        #: the host clock: the hooks' own time is the counter's (dispatchprof.count.hostclock)
        self.clock: HostClock | None = None
        if model is not None:
            self._adopt_root(model)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.get_ident()
        self._handles.append(register_module_forward_pre_hook(self._pre_hook))
        self._handles.append(register_module_forward_hook(self._post_hook, always_call=True))

    def stop(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        del self.stack[1:]

    # --- scope queries ---------------------------------------------------------------------
    @property
    def current(self) -> Frame:
        return self.stack[-1]

    def backward_scope(self) -> str:
        """Scope of the forward that made the autograd node now running (root if none)."""
        top = self.stack[-1]
        if top.in_backward:            # modules re-run inside backward (checkpointing)
            return top.name
        node = torch._C._current_autograd_node()
        if node is None:
            return ""
        nr = node._sequence_nr()
        if nr >= _NO_SEQUENCE:
            return ""
        i = bisect.bisect_right(self._seq, nr) - 1
        return self._seq_scope[i] if i >= 0 else ""

    # --- hooks -----------------------------------------------------------------------------
    def _pre_hook(self, module: nn.Module, args: Any) -> None:
        if threading.get_ident() != self._thread:
            return
        clock = self.clock
        if clock is not None and not clock.depth:
            clock.arrive_hook()
        with NO_TORCH_FUNCTION():      # the tracker's own tensor reads skip torch function modes
            self._push(module)
        if clock is not None and not clock.depth:
            clock.leave()

    def _push(self, module: nn.Module) -> None:
        parent = self.stack[-1]
        name = self._name_of(module, parent)
        info = self.scopes.get(name)
        if info is None:
            info = self.scopes[name] = ScopeInfo(name, type(module).__name__,
                                                 None if name == "" else parent.name)
            self._own_tensors(info, module)
        info.calls += 1
        if info.causal_hint is None:
            hint = _is_causal(module)
            if isinstance(hint, bool):
                info.causal_hint = hint
        frame = Frame(name, module, 0, in_backward=torch._C._current_graph_task_id() != -1)
        self._on_push(frame)
        self.stack.append(frame)
        self._mark(name)

    def _post_hook(self, module: nn.Module, args: Any, output: Any) -> None:
        if threading.get_ident() != self._thread:
            return
        clock = self.clock
        if clock is not None and not clock.depth:
            clock.arrive_hook()
        with NO_TORCH_FUNCTION():
            self._pop(module, output)
        if clock is not None and not clock.depth:
            clock.leave()

    def _pop(self, module: nn.Module, output: Any) -> None:
        # Pop down to this module's frame (a frame left by a forward that raised is dropped too).
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].module is module:
                while len(self.stack) > depth:
                    frame = self.stack.pop()
                    self._on_pop(frame, output if frame.module is module else None)
                self._mark(self.stack[-1].name)
                return

    def _mark(self, name: str) -> None:
        """From the next autograd sequence number on, nodes belong to scope ``name`` (also while
        a reentrant checkpoint recomputes its forward inside the backward)."""
        nr = _next_sequence_nr()
        if self._seq and nr <= self._seq[-1]:
            self._seq_scope[-1] = name
            return
        self._seq.append(nr)
        self._seq_scope.append(name)

    # --- naming ----------------------------------------------------------------------------
    def _adopt_root(self, model: nn.Module) -> None:
        self.root_model = model
        self.scopes[""].module_type = type(model).__name__
        self._tree = ModuleTree(model)
        for t in self._tree.tensors:
            key = storage_key(t)
            if key is not None:
                self.resident.add(key)
        self._own_tensors(self.scopes[""], model)

    def _name_of(self, module: nn.Module, parent: Frame) -> str:
        if parent.module is None:
            if self.root_model is None:
                self._adopt_root(module)
            if module is self.root_model:
                return ""
            return self._canonical(module) or type(module).__name__
        if module is parent.module:
            return parent.name
        rel = relative_name(parent.module, module, self._tree, self._direct_children(parent.module))
        if rel is not None:
            return f"{parent.name}.{rel}" if parent.name else rel
        canonical = self._canonical(module)
        if canonical is not None:
            return canonical
        own = type(module).__name__
        return f"{parent.name}.{own}" if parent.name else own

    def _canonical(self, module: nn.Module) -> str | None:
        return self._tree.names.get(id(module)) if self._tree is not None else None

    def _direct_children(self, parent: nn.Module) -> dict[int, str]:
        direct = self._direct.get(id(parent))
        if direct is None:
            direct = {}
            for name, sub in parent._modules.items():
                if sub is not None:
                    direct.setdefault(id(sub), name)
            self._direct[id(parent)] = direct
        return direct

    def _own_tensors(self, info: ScopeInfo, module: nn.Module) -> None:
        """PARAMS and BUFFERS (inclusive from the tree when the module is in it)."""
        if self._tree is None or id(module) not in self._tree.names:
            for t in (*module.parameters(), *module.buffers()):
                key = storage_key(t)
                if key is not None:
                    self.resident.add(key)
        tree = self._tree
        info.params = tree.params(module) if tree is not None else size_of(module.parameters())
        own = [p for p in _direct(module, "_parameters") if id(p) not in self._owned]
        self._owned.update(id(p) for p in own)     # a tied parameter is owned by the first scope
        info.params_self = size_of(own)
        info.buffers = tree.buffers(module) if tree is not None else size_of(module.buffers())
        info.buffers_self = size_of(_direct(module, "_buffers"))


_ITERATORS = {"_parameters": "named_parameters", "_buffers": "named_buffers"}


def _direct(module: nn.Module, kind: str) -> Any:
    """``module.parameters(recurse=False)`` (kind "_parameters") or ``buffers(recurse=False)``
    ("_buffers"): each tensor once, in order. Read off the module's dict, without torch's
    generator, unless its class overrides the iterator."""
    method = _ITERATORS[kind]
    if getattr(type(module), method) is not getattr(nn.Module, method):
        return [t for _, t in getattr(module, method)(recurse=False)]
    return list({id(t): t for t in getattr(module, kind).values() if t is not None}.values())
