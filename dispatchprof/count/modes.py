"""The counter's two private modes.

`CountingMode`, a TorchDispatchMode, sees every aten op (forward and backward) and hands it to the
recorder; `FusedAttentionMode`, a TorchFunctionMode, records ``F.scaled_dot_product_attention`` as
one fused op before torch picks a backend, so attention counts the same on real, meta and fake
tensors. The autograd nodes that call creates (one fused kernel's, or the math decomposition's on
meta) are remembered by sequence number; in the backward their ops are recorded once, as
``aten.scaled_dot_product_attention_backward``. The attention mode steps aside where torch picks
a fast path by the modes active (`dispatchprof.count.fastpath`). Only `OpCounter` uses them.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch._ops import HigherOrderOperator
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.overrides import TorchFunctionMode, _pop_mode, _push_mode
from torch.utils._python_dispatch import TorchDispatchMode

from dispatchprof.count.fastpath import MHA_FORWARD, FastPathGuard, mha_forward_body
from dispatchprof.count.flex import FLEX_OPS, run_flex
from dispatchprof.count.interrupts import PENDING, raise_pending
from dispatchprof.count.meta_attention import run_attention
from dispatchprof.count.packing import NESTED_FAST_PATH_OPS, PACKED_OPS, NestedTensorNotSupported, Packing
from dispatchprof.count.recorder import Recorder
from dispatchprof.count.sdpa_args import sdpa_call
from dispatchprof.count.tensors import NO_TORCH_FUNCTION, iter_tensors
from dispatchprof.errors import DataDependentOpError

__all__ = ["CountingMode", "FusedAttentionMode", "NestedTensorNotSupported", "eager_flex_attention", "run_once"]

aten = torch.ops.aten
_next_sequence_nr = torch._C._autograd._get_sequence_nr
_eval_frame_callback = torch._C._dynamo.eval_frame.get_eval_frame_callback
_PROFILER = torch.autograd.profiler       # ``_is_profiler_enabled``: whether a profiler records ops now
_SDPA = torch.nn.functional.scaled_dot_product_attention


class CountingMode(TorchDispatchMode):
    """Sees every aten op; counts it unless a fused op above already did. An op with no formula
    that has a CompositeImplicit decomposition (``aten.linear`` reaches here undecomposed under
    ``torch.inference_mode``) is decomposed, so its parts are counted as they would be elsewhere.
    A higher-order op (cond, while_loop, map) runs its body with this mode active, so its ops
    are counted one by one; flex_attention is one record over the blocks its BlockMask keeps
    (`dispatchprof.count.flex`); any other runs as is and is reported unknown with the reason.
    nn.TransformerEncoder's padding-mask fast path on tensors without values runs through
    ``packing`` (`dispatchprof.count.packing`), shared with the attention mode's hooks. An op that
    needs values raises `DataDependentOpError` on meta tensors, and on fake tensors one that is
    also the exception fake tensors raise (`FakeValuesNeededError`, `FakeShapeNeedsValuesError`)."""

    supports_higher_order_operators = True

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch would wrap ``__torch_dispatch__`` in ``torch._disable_dynamo``, several
        Python frames on every op. Dynamo skips its frame instead (`_hide_from_dynamo`), and
        the op runs through that wrapper only while torch.compile is tracing (cond, while_loop
        and map compile themselves even in eager mode)."""
        return False

    def __init__(self, state: Recorder) -> None:
        super().__init__()
        self.state = state
        self.packing = Packing()
        _hide_from_dynamo()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if PENDING:                     # a signal held for a safe point: this op's entry is one
            raise_pending()
        tracing = _eval_frame_callback()
        if tracing is not None and tracing is not False:     # inside torch.compile's tracing
            return _dispatch_without_dynamo(self, func, types, args, kwargs)
        state = self.state
        info = state.op_infos.get(id(func))        # every op but the first call of each overload
        if info is None:
            if isinstance(func, HigherOrderOperator):
                return self._higher_order(func, args, kwargs or {})
            info = state.op_info(func)
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_nested and info.name not in NESTED_FAST_PATH_OPS:
                raise NestedTensorNotSupported(info.name)
        kwargs = kwargs or {}
        if state.inside_fused:
            return func(*args, **kwargs)
        if state.fused_starts and torch._C._current_graph_task_id() != -1 and state.in_fused_backward():
            return state.run_fused_backward(func, args, kwargs, info)
        if info.view:                              # views and metadata queries: the common case
            out = run_once(func, args, kwargs) if _PROFILER._is_profiler_enabled else info.call(*args, **kwargs)
            state.count_view(info)              # reads no tensor: no torch-function guard
            return out
        if info.data_dependent and any(t.device.type == "meta" for t in iter_tensors(args)):
            raise DataDependentOpError(info.name, state.scope_and_phase()[0])
        if info.name in PACKED_OPS and self.packing.diverts(info.name, args):
            with NO_TORCH_FUNCTION():
                return self.packing.run(func, info.name, args, kwargs, state.count)
        if info.formula is None and info.decomposable:
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        try:
            out = run_once(func, args, kwargs) if _PROFILER._is_profiler_enabled else info.call(*args, **kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as error:   # fake tensors' refusal
            raise _values_needed(error, info.name, state.scope_and_phase()[0]) from error
        with NO_TORCH_FUNCTION():      # the counter's own tensor reads skip torch function modes
            state.count(func, args, kwargs, out, info)
        return out

    def _higher_order(self, func: HigherOrderOperator, args: tuple, kwargs: dict) -> Any:
        body = _BODIES.get(func.name())
        if body is not None:
            with self:
                return body(*args, **kwargs)
        if func.name() in FLEX_OPS:
            return run_flex(self.state, func, args, kwargs)
        self.state.unknown_call(f"higher_order.{func.name()}", "higher-order op: its body is run but "
                                "not counted (no rule to run it under the counter)")
        return func(*args, **kwargs)


class FakeValuesNeededError(DataDependentOpError, DataDependentOutputException):
    """Fake tensors' DataDependentOutputException, still one (a model that catches it behaves as
    without the counter), with the op, the module scope and the way around in its message."""

    def __init__(self, func: Any, op: str, scope: str) -> None:
        DataDependentOpError.__init__(self, op, scope, "fake")
        self.func = func


class FakeShapeNeedsValuesError(DataDependentOpError, DynamicOutputShapeException):
    """As `FakeValuesNeededError`, for fake tensors' DynamicOutputShapeException."""

    def __init__(self, func: Any, op: str, scope: str) -> None:
        DataDependentOpError.__init__(self, op, scope, "fake")
        self.func = func


def _values_needed(error: RuntimeError, op: str, scope: str) -> DataDependentOpError:
    """The counter's message for fake tensors' refusal to run an op that needs values, of the
    refusal's own class too."""
    kind = FakeShapeNeedsValuesError if isinstance(error, DynamicOutputShapeException) else FakeValuesNeededError
    return kind(error.func, op, scope)


_dispatch_without_dynamo = torch._disable_dynamo(CountingMode.__torch_dispatch__, recursive=True)
_hidden = False


def _hide_from_dynamo() -> None:
    """Tell Dynamo never to trace `CountingMode.__torch_dispatch__` (once per process; imports
    torch._dynamo, as torch's own wrapper would on the first op)."""
    global _hidden
    if not _hidden:
        from torch._dynamo.eval_frame import skip_code

        skip_code(CountingMode.__torch_dispatch__.__code__)
        _hidden = True


def eager_flex_attention(value: bool | None) -> bool | None:
    """Set torch's switch that runs flex_attention eagerly (its HOP directly, no torch.compile:
    Dynamo refuses to compile while a dispatch mode is active); returns the previous value.
    Only when the user has imported flex_attention (the import is slow); None if not."""
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    if flex is None or value is None:
        return None
    old = flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = value
    return old


def _cond(pred: Any, true_fn: Any, false_fn: Any, operands: Any) -> Any:
    """cond: the branch the predicate picks (a data-dependent choice: real tensors only)."""
    return (true_fn if bool(pred) else false_fn)(*operands)


def _while_loop(cond_fn: Any, body_fn: Any, carried: Any, additional: Any = ()) -> Any:
    """while_loop: the body as many times as the condition holds."""
    carried = tuple(carried)
    while bool(cond_fn(*carried, *additional)):
        carried = tuple(body_fn(*carried, *additional))
    return carried


def _map(f: Any, xs: Any, pos_args: Any = ()) -> Any:
    """map: f over the leading dim of xs, results stacked."""
    xs = list(xs)
    outs = [f(*[x[i] for x in xs], *pos_args) for i in range(xs[0].shape[0])]
    if isinstance(outs[0], torch.Tensor):
        return torch.stack(outs)
    return type(outs[0])(torch.stack(parts) for parts in zip(*outs))


#: Higher-order ops run through their bodies with the counter active (ops counted one by one).
_BODIES = {"cond": _cond, "while_loop": _while_loop, "map_impl": _map}


_BELOW_PYTHON = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
_BACKEND_SELECT = torch._C.DispatchKeySet(torch._C.DispatchKey.BackendSelect)
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def run_once(func: Any, args: tuple, kwargs: dict) -> Any:
    """Run an op the mode has intercepted. ``func(*args)`` dispatches it again from the top, and
    the profiler (torch.profiler, accelerate's profile) records every op a second time; while a
    profiler is on, an op on plain tensors is redispatched below the Python key instead, a step
    the dispatcher does not record, so it is seen once. Tensor subclasses (fake tensors) and
    runs without a profiler take the ordinary path."""
    if not _PROFILER._is_profiler_enabled:
        return func(*args, **kwargs)
    keys = None
    for t in iter_tensors((args, kwargs)):
        if type(t) not in _PLAIN:
            return func(*args, **kwargs)
        k = torch._C._dispatch_keys(t)
        keys = k if keys is None else keys | k
    keys = _BACKEND_SELECT if keys is None else keys & _BELOW_PYTHON
    return func.redispatch(keys, *args, **kwargs)


class FusedAttentionMode(TorchFunctionMode):
    """Records F.scaled_dot_product_attention as one op, above torch's backend choice, with any
    calling convention (`dispatchprof.count.sdpa_args`). Invisible to torch's fast paths
    (`dispatchprof.count.fastpath`): it steps off the stack while a module whose fast path checks
    for torch-function modes could take that path, so the counted run runs the uncounted run's
    code; where the module's slow path runs instead, attention inside
    ``F.multi_head_attention_forward`` is still recorded as one fused op."""

    def __init__(self, state: Recorder, packing: Packing | None = None) -> None:
        super().__init__()
        self.state = state
        self._guard = FastPathGuard(self, packing if packing is not None else Packing())

    def __enter__(self) -> FusedAttentionMode:
        super().__enter__()
        try:
            self._guard.install()
        except BaseException:
            super().__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._guard.remove()
        finally:
            super().__exit__(*exc)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func is not _SDPA:           # every torch call of the model passes here: keep it short
            if func is MHA_FORWARD:     # its body, with this mode active: attention inside is seen
                return self._with_mode_on(mha_forward_body(), args, kwargs or {})
            return func(*args, **kwargs) if kwargs else func(*args)
        if self.state.inside_fused or torch._C._current_graph_task_id() != -1:
            return func(*args, **kwargs) if kwargs else func(*args)
        args, kwargs = sdpa_call(args, kwargs)      # positional as the formula takes them
        self.state.inside_fused += 1
        start = _next_sequence_nr()
        try:
            out = run_attention(func, args, kwargs)     # meta tensors: the CPU's fused kernel
        finally:
            self.state.inside_fused -= 1
        with NO_TORCH_FUNCTION():
            self.state.count(aten.scaled_dot_product_attention.default, args, kwargs, out)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            self.state.remember_fused(start, _next_sequence_nr(), args, kwargs)
        return out

    def _with_mode_on(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        """``fn(*args, **kwargs)`` with this mode back on the stack (torch takes it off while its
        ``__torch_function__`` runs). Pushed directly: ``with self`` would install the guard again."""
        _push_mode(self)
        try:
            return fn(*args, **kwargs)
        finally:
            _pop_mode()
