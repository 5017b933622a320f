"""Pooling, forward and backward.

max pooling: per output, window-1 CMP. Average pooling: per output, window-1 ADD and
1 DIV. Adaptive pooling computes each output's window exactly as torch does:
start = floor(i*In/Out), end = ceil((i+1)*In/Out). Backward: max pooling adds each
output gradient into its argmax (numel(grad) ADD); average pooling divides each
gradient by its window (1 DIV) and adds it into each window element (window ADD).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from op_formulas.args import numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


def window(kernel_size: Sequence[int] | int, dims: int) -> int:
    ks = [kernel_size] * dims if isinstance(kernel_size, int) else list(kernel_size)
    if len(ks) == 1:
        ks = ks * dims
    return numel(ks)


def _max_pool(dims: int) -> Any:
    def count(x: TensorMeta, kernel_size: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
        """window-1 CMP per output."""
        out = result[0] if isinstance(result, (tuple, list)) else result
        return Cost(cmp=window(kernel_size, dims) - 1) * out.numel
    return count


def _avg_pool(dims: int) -> Any:
    def count(x: TensorMeta, kernel_size: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
        """window-1 ADD + 1 DIV per output."""
        return Cost(add=window(kernel_size, dims) - 1, div=1) * result.numel
    return count


def _avg_pool_backward(dims: int) -> Any:
    def count(grad: TensorMeta, x: TensorMeta, kernel_size: Any, *args: Any, result: Any,
              **kwargs: Any) -> Cost:
        """Per output gradient: 1 DIV + window ADD."""
        return Cost(div=1, add=window(kernel_size, dims)) * grad.numel
    return count


for _d, _max, _avg, _avg_bw in (
        (1, (aten.max_pool1d_with_indices,), (aten.avg_pool1d,), ()),
        (2, (aten.max_pool2d_with_indices, aten.max_pool2d), (aten.avg_pool2d,), (aten.avg_pool2d_backward,)),
        (3, (aten.max_pool3d_with_indices,), (aten.avg_pool3d,), (aten.avg_pool3d_backward,))):
    formula(*_max)(_max_pool(_d))
    formula(*_avg)(_avg_pool(_d))
    if _avg_bw:
        formula(*_avg_bw)(_avg_pool_backward(_d))


@formula(aten.max_pool2d_with_indices_backward, aten.max_pool3d_with_indices_backward,
         aten.adaptive_max_pool2d_backward)
def max_pool_backward(grad: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Each output gradient is added into its argmax: numel(grad) ADD."""
    return Cost(add=grad.numel)


def adaptive_windows(in_size: int, out_size: int) -> list[int]:
    """Window length of each output position along one dim (torch's start/end rule)."""
    return [-(-(i + 1) * in_size // out_size) - (i * in_size // out_size) for i in range(out_size)]


def adaptive_window_total(x: TensorMeta, out: TensorMeta, dims: int) -> int:
    """Sum over output positions of the window size (one batch-channel plane)."""
    total = 1
    for i, o in zip(x.shape[-dims:], out.shape[-dims:]):
        total *= sum(adaptive_windows(i, o))
    return total


def planes(out: TensorMeta, dims: int) -> int:
    return numel(out.shape[:-dims])


@formula(aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d, aten.adaptive_avg_pool1d)
def adaptive_avg_pool(x: TensorMeta, output_size: Any, *, result: Any, **kwargs: Any) -> Cost:
    """Per output: its window-1 ADD + 1 DIV."""
    dims = len(output_size)
    total = adaptive_window_total(x, result, dims)
    per_plane_outputs = numel(result.shape[-dims:])
    return Cost(add=total - per_plane_outputs, div=per_plane_outputs) * planes(result, dims)


def _adaptive_avg_pool_backward(dims: int) -> Any:
    def count(grad: TensorMeta, x: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
        """Per output gradient: 1 DIV + its window ADD."""
        total = adaptive_window_total(x, grad, dims)
        return Cost(add=total, div=numel(grad.shape[-dims:])) * planes(grad, dims)
    return count


formula(aten._adaptive_avg_pool2d_backward)(_adaptive_avg_pool_backward(2))
formula(aten._adaptive_avg_pool3d_backward)(_adaptive_avg_pool_backward(3))


@formula(aten.adaptive_max_pool2d, aten.adaptive_max_pool3d)
def adaptive_max_pool(x: TensorMeta, output_size: Any, *, result: Any, **kwargs: Any) -> Cost:
    """Per output: its window-1 CMP."""
    dims = len(output_size)
    out = result[0]
    total = adaptive_window_total(x, out, dims)
    return Cost(cmp=total - numel(out.shape[-dims:])) * planes(out, dims)
