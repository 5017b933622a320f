"""``F.scaled_dot_product_attention`` on meta tensors, run as the CPU runs it.

torch picks an attention backend per device type. A CPU tensor and a fake CPU tensor get the
CPU's choice (``aten._fused_sdp_choice``'s CPU kernel, which reads shapes, dtypes, strides, the
mask's shape, dropout and the global backend switches, never values), which is the fused
``aten._scaled_dot_product_flash_attention_for_cpu`` wherever its conditions hold. The meta device
has no choice of its own, so torch runs the math decomposition there (``bmm``, ``_safe_softmax``,
an ``expand`` + ``clone`` of grouped key/value heads). The counter records attention as one op
above that choice either way, but the decomposition's output and its gradients come out in other
layouts than the fused kernel's (output [B, H, L, E] contiguous instead of [B, L, H, E]
underneath; the query/key/value gradients likewise), so the model's next ``transpose`` +
``contiguous`` or ``view`` makes ``clone``s a real run does not make (Llama: 2 in the forward, 2
in the backward per step).

Rule: where the query is a meta tensor, the counter asks the CPU's choice with the same arguments
and, where it is the fused kernel, runs ``aten._scaled_dot_product_flash_attention_for_cpu`` on the
meta tensors (its meta kernel gives the CPU kernel's layouts, and autograd then runs its backward,
as on the CPU), after converting a boolean mask to an additive one as the CPU does
(``where(mask, 0, -inf)``). Where the CPU would run the math path, meta runs it too, unchanged.
Real and fake tensors always run the call unchanged. What runs inside the call is not counted
(the counter records the one attention op), so only the layouts that leave it change.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from dispatchprof.count.sdpa_args import PARAMETERS

aten = torch.ops.aten
_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
#: What ``aten._fused_sdp_choice`` returns for the fused flash kernel (``sdp::SDPBackend::flash_attention``).
FLASH_CHOICE = 1
_POSITIONAL = tuple(p.name for p in PARAMETERS if not p.kwarg_only)
_DEFAULTS = {p.name: p.default for p in PARAMETERS if p.has_default}


def cpu_choice(args: tuple, kwargs: dict) -> int:
    """The backend the CPU picks for an attention call of these arguments (any tensor kind: the
    CPU kernel of ``aten._fused_sdp_choice`` reads metadata only)."""
    return aten._fused_sdp_choice.default.redispatch(_CPU, *args, **kwargs)


def additive_mask(mask: Any, dtype: torch.dtype) -> Any:
    """A boolean mask as the CPU's fused kernel takes it (0 where kept, -inf where masked); any other
    mask unchanged."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        return mask
    zero = torch.scalar_tensor(0.0, dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.scalar_tensor(-math.inf, dtype=dtype, device=mask.device))


def run_attention(call: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``call(*args, **kwargs)`` (``F.scaled_dot_product_attention`` in the counter's form,
    `dispatchprof.count.sdpa_args`), with the CPU's fused kernel on meta tensors (module docstring)."""
    query = args[0] if args else None
    if (not isinstance(query, torch.Tensor) or query.device.type != "meta" or len(args) > len(_POSITIONAL)
            or not set(kwargs) <= set(_DEFAULTS)):
        return call(*args, **kwargs)
    given = {**_DEFAULTS, **dict(zip(_POSITIONAL, args)), **kwargs}
    if any(name not in given for name in _POSITIONAL) or cpu_choice(args, kwargs) != FLASH_CHOICE:
        return call(*args, **kwargs)
    mask = additive_mask(given["attn_mask"], query.dtype)
    out, _ = aten._scaled_dot_product_flash_attention_for_cpu(
        query, given["key"], given["value"], given["dropout_p"], given["is_causal"],
        attn_mask=mask, scale=given["scale"])
    return out
