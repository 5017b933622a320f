"""Scaled-dot-product attention recorded as one fused op, above torch's backend choice.

While a counter is active, ``torch.nn.functional.scaled_dot_product_attention`` is a wrapper
that records the call once as ``aten.scaled_dot_product_attention`` (by the attention rule,
`op_formulas.attention`), so attention counts the same on real, meta and fake tensors: the
backend torch then picks (a fused kernel, or on meta the math decomposition) runs uncounted.
The autograd nodes that call creates are remembered by sequence number, and in the backward
their ops are recorded once, as ``aten.scaled_dot_product_attention_backward``.

Why a wrapper and not a TorchFunctionMode: a function mode sends every torch call of the model
through Python (about a tenth of a forward on fake tensors) to find this one function. The
wrapper is installed when the first counter of the process starts and the original put back
when the last one stops; it counts for the counters of the calling thread only. A call that
bypasses it (code that bound the function before counting began) still reaches the counter as
the backend's aten op, which has its own attention formula; only on meta tensors, where that
backend is the math decomposition, are its parts counted one by one instead.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
import torch.nn.functional as F

from dispatchprof.count.recorder import Recorder
from dispatchprof.count.tensors import NO_TORCH_FUNCTION

aten = torch.ops.aten
_next_sequence_nr = torch._C._autograd._get_sequence_nr
_graph_task_id = torch._C._current_graph_task_id

_lock = threading.Lock()
_active: dict[int, list[Recorder]] = {}      # thread id -> recorders counting there, oldest first
_installed: list[Any] = []                   # [the function the wrapper replaced] while installed


def start(state: Recorder) -> None:
    """Count this thread's attention calls into ``state`` (install the wrapper if needed)."""
    with _lock:
        _active.setdefault(threading.get_ident(), []).append(state)
        if not _installed:
            _installed.append(F.scaled_dot_product_attention)
            F.scaled_dot_product_attention = _counted_attention


def stop(state: Recorder) -> None:
    """Stop counting into ``state``; the last counter to stop puts the original back (unless
    something else replaced the wrapper meanwhile: then that is left as it is)."""
    with _lock:
        for thread, states in list(_active.items()):
            if state in states:
                states.remove(state)
                if not states:
                    del _active[thread]
        if not _active and _installed:
            original = _installed.pop()
            if F.scaled_dot_product_attention is _counted_attention:
                F.scaled_dot_product_attention = original


def _counted_attention(*args: Any, **kwargs: Any) -> Any:
    """``F.scaled_dot_product_attention`` while counting: one record per counter of this thread
    (none inside a backward pass, or inside another fused call)."""
    original = _installed[0] if _installed else torch._C._nn.scaled_dot_product_attention
    states = _active.get(threading.get_ident())
    if not states or _graph_task_id() != -1:
        return original(*args, **kwargs)
    states = [s for s in states if not s.inside_fused]
    for s in states:
        s.inside_fused += 1
    start_nr = _next_sequence_nr()
    try:
        out = original(*args, **kwargs)
    finally:
        for s in states:
            s.inside_fused -= 1
    for s in states:
        with NO_TORCH_FUNCTION():
            s.count(aten.scaled_dot_product_attention.default, args, kwargs, out)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            s.remember_fused(start_nr, _next_sequence_nr(), args, kwargs)
    return out


__all__ = ["start", "stop"]
