"""torch's own conditions for nn.MultiheadAttention's fast path, read before the module runs.

``nn.MultiheadAttention``'s slow path calls no submodule, so nothing seen from outside tells the
counter, once the module runs, which path torch took; the counter must know before it steps off
the torch-function stack (`dispatchprof.count.fastpath`). `mha_takes_fast_path` restates the
checks of ``MultiheadAttention.forward`` (torch 2.13) that depend neither on the counter (torch-
function modes) nor on the device; ``tests/test_fast_paths.py`` compares it with what torch
does, over a table of calls. A global forward pre-hook sees positional arguments only; the
keyword arguments are read from the frame of the call (`call_kwargs`).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

#: MultiheadAttention.forward's parameters, in order (the ones its fast path looks at first).
MHA_PARAMETERS = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask")
_CALL_IMPL = nn.Module._call_impl.__code__


def call_kwargs(depth: int) -> dict | None:
    """The keyword arguments of the module call whose forward pre-hook is ``depth`` frames up:
    the ``kwargs`` of ``nn.Module._call_impl``'s ``inner``, which calls the hooks (torch 2.13).
    None where that frame is not there (another torch)."""
    frame = sys._getframe(depth + 1)
    if frame.f_code.co_name != "inner" or frame.f_back is None or frame.f_back.f_code is not _CALL_IMPL:
        return None
    kwargs = frame.f_locals.get("kwargs")
    return kwargs if isinstance(kwargs, dict) else None


def _float_mask(mask: Any) -> bool:
    return isinstance(mask, torch.Tensor) and mask.is_floating_point()


def mha_takes_fast_path(m: nn.MultiheadAttention, args: tuple, kwargs: dict) -> bool:
    """Whether ``m(*args, **kwargs)`` takes the fast path on a supported device with no torch-
    function mode active: the checks of MultiheadAttention.forward in its order (boolean masks
    only, fast path enabled, batched self-attention with one tensor for query, key and value,
    dtypes matching the projection, eval, an even head count, batch_first, no bias_k / bias_v /
    zero attention, one packed projection with its bias, no mask with a nested query, no autocast,
    no gradient needed)."""
    given = dict(zip(MHA_PARAMETERS, args), **kwargs)
    q, k, v = given.get("query"), given.get("key"), given.get("value")
    kpm, mask = given.get("key_padding_mask"), given.get("attn_mask")
    if _float_mask(kpm) or _float_mask(mask) or not torch.backends.mha.get_fastpath_enabled():
        return False
    if not isinstance(q, torch.Tensor) or q.dim() != 3 or q is not k or k is not v:
        return False
    if m.in_proj_weight is None or m.in_proj_bias is None:
        return False
    if q.dtype != m.in_proj_bias.dtype or q.dtype != m.in_proj_weight.dtype:
        return False
    if m.training or m.num_heads % 2 or not m.batch_first or m.bias_k is not None or m.bias_v is not None:
        return False
    if m.add_zero_attn or not m._qkv_same_embed_dim or (q.is_nested and (kpm is not None or mask is not None)):
        return False
    if torch.is_autocast_enabled():
        return False
    tensors = (q, m.in_proj_weight, m.in_proj_bias, m.out_proj.weight, m.out_proj.bias)
    return not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors))
