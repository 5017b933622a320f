"""On meta tensors, attention in the memory layouts the CPU kernels give it.

``F.scaled_dot_product_attention`` on CPU tensors runs a fused kernel
(``_scaled_dot_product_flash_attention_for_cpu``) whose output follows the query's layout, and
whose backward returns the input gradients in layouts of its own; on meta tensors torch picks the
math backend, whose output is contiguous and whose gradients follow its decomposition. A model
that reshapes the output then copies it on meta but not on the CPU: nn.MultiheadAttention's slow
path (``attn_output.permute(2, 0, 1, 3).contiguous()``) adds one ``aten.clone`` of B*L*E elements
on meta, and the backward more.

Rule: on meta tensors the counter runs attention as `_MetaAttention`: an output without values in
the strides of the CPU's own call, and in the backward input gradients without values in the
strides of the CPU's own backward, both read from torch itself (the same call on fake CPU tensors
of the same shapes, strides and dtypes, which run the CPU's backend choice and its fused kernels'
shape functions; cached per signature). Its one autograd node belongs to the attention call, so
its backward is attention's one backward record. Where the CPU's call refuses the arguments, the
meta call runs as torch makes it. Fake tensors run the CPU's path already; real tensors are not
touched.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses import FakeTensorMode
from torch.utils._python_dispatch import _disable_current_modes

from dispatchprof.count.tensors import NO_TORCH_FUNCTION

_SDPA = torch.nn.functional.scaled_dot_product_attention
_strides: dict[tuple, tuple[int, ...]] = {}
_grad_strides: dict[tuple, list | None] = {}
_fake: list[FakeTensorMode] = []


def _signature(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.stride(), value.dtype)
    return value


def cpu_strides(args: tuple, kwargs: dict) -> tuple[int, ...] | None:
    """The strides of ``F.scaled_dot_product_attention(*args, **kwargs)``'s output on the CPU,
    for arguments given as meta tensors (module docstring); None where the CPU's call refuses
    them (the meta output is then kept as torch made it)."""
    key = (tuple(_signature(a) for a in args), tuple(sorted((k, _signature(v)) for k, v in kwargs.items())))
    strides = _strides.get(key)
    if strides is None:
        with _disable_current_modes(), NO_TORCH_FUNCTION():
            if not _fake:
                _fake.append(FakeTensorMode())
            try:
                with _fake[0]:
                    twin = [_cpu_twin(a) for a in args]
                    out = _SDPA(*twin, **{k: _cpu_twin(v) for k, v in kwargs.items()})
            except (RuntimeError, TypeError, ValueError, NotImplementedError):
                return None
            strides = _strides[key] = tuple(out.stride())
    return strides


def _cpu_twin(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(tuple(value.shape), value.stride(), dtype=value.dtype, device="cpu")
    return value


def _twins(args: tuple, kwargs: dict, grads: tuple[bool, ...]) -> tuple[list, dict]:
    twin = [_cpu_twin(a) for a in args]
    for t, needed in zip(twin, grads):
        if needed:
            t.requires_grad_(True)
    return twin, {k: _cpu_twin(v) for k, v in kwargs.items()}


def cpu_grad_strides(args: tuple, kwargs: dict, grads: tuple[bool, ...], grad: torch.Tensor) -> list | None:
    """The strides of the input gradients the CPU's backward of this call returns for ``grad``
    (None for an input that needs none), read from torch's fake CPU kernels; cached."""
    key = (tuple(_signature(a) for a in args), tuple(sorted((k, _signature(v)) for k, v in kwargs.items())),
           grads, _signature(grad))
    if key in _grad_strides:
        return _grad_strides[key]
    with _disable_current_modes(), NO_TORCH_FUNCTION():
        if not _fake:
            _fake.append(FakeTensorMode())
        try:
            with _fake[0], torch.enable_grad():
                twin, twin_kwargs = _twins(args, kwargs, grads)
                out = _SDPA(*twin, **twin_kwargs)
                wanted = [t for t, needed in zip(twin, grads) if needed]
                got = iter(torch.autograd.grad(out, wanted, _cpu_twin(grad), allow_unused=True))
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            _grad_strides[key] = None
            return None
        strides = [None if not needed else _stride_of(next(got)) for needed in grads]
    _grad_strides[key] = strides
    return strides


def _stride_of(t: Any) -> tuple[int, ...] | None:
    return None if t is None else tuple(t.stride())


class _MetaAttention(torch.autograd.Function):
    """Attention on meta tensors with the CPU's layouts: the output in the strides of the CPU's
    call, the input gradients in the strides of the CPU's backward. No values either way."""

    @staticmethod
    def forward(ctx: Any, strides: tuple[int, ...], kwargs: dict, *args: Any) -> torch.Tensor:
        q, v = args[0], args[2]
        ctx.call = (tuple(torch.empty_strided(tuple(a.shape), a.stride(), dtype=a.dtype, device="meta")
                          if isinstance(a, torch.Tensor) else a for a in args), kwargs)
        shape = tuple(q.shape[:-1]) + (v.shape[-1],)
        return torch.empty_strided(shape, strides, dtype=q.dtype, device="meta")

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        args, kwargs = ctx.call
        grads = tuple(ctx.needs_input_grad[2:2 + len(args)])
        strides = cpu_grad_strides(args, kwargs, grads, grad)
        out = []
        for i, (a, needed) in enumerate(zip(args, grads)):
            if not needed:
                out.append(None)
                continue
            stride = strides[i] if strides is not None and strides[i] is not None else a.stride()
            out.append(torch.empty_strided(tuple(a.shape), stride, dtype=a.dtype, device="meta"))
        return (None, None, *out)


def meta_attention(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """``F.scaled_dot_product_attention(*args, **kwargs)`` on meta tensors in the CPU's layouts
    (module docstring); None where the CPU's call refuses the arguments (torch's own meta call
    then runs, and raises what it raises)."""
    strides = cpu_strides(args, kwargs)
    if strides is None:
        return None
    return _MetaAttention.apply(strides, kwargs, *args)
