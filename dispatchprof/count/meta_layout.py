"""On meta tensors, attention's output in the memory layout the CPU kernel gives it.

``F.scaled_dot_product_attention`` on CPU tensors runs a fused kernel
(``_scaled_dot_product_flash_attention_for_cpu``) whose output follows the query's layout; on
meta tensors torch picks the math backend, whose output is contiguous. A model that reshapes the
output then copies it on meta but not on the CPU: nn.MultiheadAttention's slow path
(``attn_output.permute(2, 0, 1, 3).contiguous()``) adds one ``aten.clone`` of B*L*E elements on
meta that the real run does not run.

Rule: on meta tensors the counter gives attention's output the strides the CPU's own call gives
it, read from torch itself (the same call on fake CPU tensors of the same shapes, strides and
dtypes, which run the CPU's backend choice and its fused kernel's shape function; cached per
signature). The output has no values either way; where it needs a gradient it becomes a strided
view of the math backend's output (differentiable, inside the attention call, so its backward
belongs to attention's one backward record). Fake tensors run the CPU's path already; real
tensors are not touched.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses import FakeTensorMode
from torch.utils._python_dispatch import _disable_current_modes

from dispatchprof.count.tensors import NO_TORCH_FUNCTION

_SDPA = torch.nn.functional.scaled_dot_product_attention
_strides: dict[tuple, tuple[int, ...]] = {}
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


def as_on_cpu(out: torch.Tensor, args: tuple, kwargs: dict) -> torch.Tensor:
    """``out``, attention's output on meta tensors, with the CPU's layout (module docstring)."""
    strides = cpu_strides(args, kwargs)
    if strides is None or strides == tuple(out.stride()):
        return out
    if out.requires_grad:
        return out.as_strided(tuple(out.shape), strides)
    return torch.empty_strided(tuple(out.shape), strides, dtype=out.dtype, device="meta")
