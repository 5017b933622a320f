"""Resampling: interpolation (nearest, linear, bilinear, bicubic, trilinear), the backward of
padding, folding (col2im), grid sampling; forward and backward.

Interpolation with t taps per dim (linear 2, cubic 4) over d spatial dims, done separably:
each output element costs MULT = t + t^2 + ... + t^d and ADD = t^d - 1 (bilinear 6 MULT +
3 ADD, trilinear 14 + 7, bicubic 20 + 15). NB: the per-index source positions and tap weights
are computed once per output row/column, not per element, and are not counted.
Backward scatters each output gradient into its t^d source taps: d MULT per tap (the tap's
weight product and the product with the gradient), and ADD = products - inputs reached
(COUNTING.md's scatter rule; `reached` counts the inputs some tap lands on, per dim).
Nearest interpolation moves data (no arithmetic); its backward adds each output gradient into
its source: ADD = numel(grad) - inputs reached. Reflection/replication pad backward likewise
adds the padded positions' gradients back: ADD = numel(grad_output) - numel(input).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch

from op_formulas.args import first_meta, numel
from op_formulas.conv import reached_1d
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


def interpolation_cost(outputs: int, taps: int, dims: int) -> Cost:
    """Separable interpolation of ``outputs`` elements (module docstring)."""
    return Cost(mult=sum(taps ** j for j in range(1, dims + 1)), add=taps ** dims - 1) * outputs


@lru_cache(maxsize=1024)
def _taps_reached(n_in: int, n_out: int, taps: int, align_corners: bool) -> int:
    """Input positions of one dim that some tap of some output lands on (torch's source rule)."""
    hit = set()
    for i in range(n_out):
        if align_corners:
            src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            src = (i + 0.5) * n_in / n_out - 0.5
            if taps == 2:
                src = max(src, 0.0)
        i0 = math.floor(src)
        first = i0 if taps == 2 else i0 - 1
        hit.update(min(max(first + k, 0), n_in - 1) for k in range(taps))
    return len(hit)


def _interpolate(taps: int, dims: int) -> Any:
    def count(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
        return interpolation_cost(first_meta(result).numel, taps, dims)

    count.__doc__ = f"{taps}-tap interpolation over {dims} dims (module docstring)."
    return count


def _interpolate_backward(taps: int, dims: int) -> Any:
    def count(grad: TensorMeta, output_size: Any, input_size: Any, align_corners: bool = False,
              *args: Any, result: Any, **kwargs: Any) -> Cost:
        reached = numel(input_size[:2])
        for n_in, n_out in zip(input_size[2:], grad.shape[2:]):
            reached *= _taps_reached(int(n_in), int(n_out), taps, bool(align_corners))
        products = grad.numel * taps ** dims
        return Cost(mult=products * dims, add=products - reached)

    count.__doc__ = f"Scatter of {taps}-tap interpolation over {dims} dims (module docstring)."
    return count


for _taps, _dims, _fwd, _bwd in (
        (2, 1, aten.upsample_linear1d, aten.upsample_linear1d_backward),
        (2, 2, aten.upsample_bilinear2d, aten.upsample_bilinear2d_backward),
        (2, 3, aten.upsample_trilinear3d, aten.upsample_trilinear3d_backward),
        (4, 2, aten.upsample_bicubic2d, aten.upsample_bicubic2d_backward)):
    formula(_fwd)(_interpolate(_taps, _dims))
    formula(_bwd)(_interpolate_backward(_taps, _dims))


@formula(aten.upsample_nearest1d_backward, aten.upsample_nearest2d_backward,
         aten.upsample_nearest3d_backward, aten._upsample_nearest_exact1d_backward,
         aten._upsample_nearest_exact2d_backward, aten._upsample_nearest_exact3d_backward)
def nearest_backward(grad: TensorMeta, output_size: Any, input_size: Any, *args: Any, result: Any,
                     **kwargs: Any) -> Cost:
    """numel(grad) - inputs reached; along a dim min(In, Out) inputs are reached."""
    reached = numel(input_size[:2]) * numel([min(int(i), o) for i, o in zip(input_size[2:], grad.shape[2:])])
    return Cost(add=grad.numel - reached)


@formula(aten.reflection_pad1d_backward, aten.reflection_pad2d_backward, aten.reflection_pad3d_backward,
         aten.replication_pad1d_backward, aten.replication_pad2d_backward, aten.replication_pad3d_backward)
def pad_backward(grad: TensorMeta, x: TensorMeta, padding: Any, *, result: Any, **kwargs: Any) -> Cost:
    """Padded positions' gradients added into their sources: numel(grad) - numel(input) ADD."""
    return Cost(add=max(grad.numel - x.numel, 0))


@formula(aten.col2im)
def col2im(cols: TensorMeta, output_size: Any, kernel_size: Any, dilation: Any, padding: Any,
           stride: Any, *, result: Any, **kwargs: Any) -> Cost:
    """fold: every column element is added into its output position: numel(cols) - outputs
    reached ADD (blocks per dim: (out + 2p - dil*(k-1) - 1) // stride + 1)."""
    out = first_meta(result)
    reached = numel(out.shape[:-2])
    for d in range(2):
        k, dil, pad, st = kernel_size[d], dilation[d], padding[d], stride[d]
        blocks = (output_size[d] + 2 * pad - dil * (k - 1) - 1) // st + 1
        reached *= reached_1d(output_size[d], blocks, k, st, pad, dil)
    return Cost(add=cols.numel - reached)


@formula(aten.grid_sampler_2d)
def grid_sampler_2d(x: TensorMeta, grid: TensorMeta, mode: int = 0, *args: Any, result: Any,
                    **kwargs: Any) -> Cost:
    """Per grid point (N*Hout*Wout): unnormalise both coordinates (2 MULT + 2 ADD), floor
    (2 OTHER) and fractions (2 ADD). Per output element: bilinear (mode 0) 6 MULT + 3 ADD,
    bicubic (mode 2) 20 MULT + 15 ADD, nearest (mode 1) 2 OTHER (rounding) only."""
    out = first_meta(result)
    points = grid.numel // 2
    per_point = Cost(mult=2, add=4, other=2) * points
    if mode == 1:
        return per_point + Cost(other=2) * out.numel
    return per_point + interpolation_cost(out.numel, 4 if mode == 2 else 2, 2)


@formula(aten.grid_sampler_2d_backward)
def grid_sampler_2d_backward(grad: TensorMeta, x: TensorMeta, grid: TensorMeta, mode: int = 0,
                             *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Bilinear reference, per output element: grad_input scatters 4 taps (8 MULT + 4 ADD);
    grad_grid accumulates d/dx and d/dy over the 4 taps (8 MULT + 8 ADD); per grid point the
    forward's coordinate work again (2 MULT + 4 ADD + 2 OTHER) and the unnormalising scale
    (2 MULT)."""
    points = grid.numel // 2
    return Cost(mult=16, add=12) * grad.numel + Cost(mult=4, add=4, other=2) * points
