"""Ops of nn.TransformerEncoder's nested-tensor fast path that take dense tensors.

``_nested_tensor_from_mask_left_aligned(t, mask)`` tests whether every row of the padding mask
is left-aligned (its kept positions first): each mask element compared with its neighbour,
1 CMP per mask element; it reads the mask only and returns a Python bool (0 bytes written).
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


@formula(aten._nested_tensor_from_mask_left_aligned)
def mask_left_aligned(t: TensorMeta, mask: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """1 CMP per mask element; reads the mask, writes nothing."""
    return Cost(cmp=mask.numel, bytes_read=mask.nbytes, bytes_written=0)
