"""Resampling: interpolation (nearest, linear, bilinear, bicubic, trilinear, anti-aliased), the
backward of padding, folding (col2im), affine grids, grid sampling; forward and backward.

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


@formula(aten.affine_grid_generator)
def affine_grid_generator(theta: TensorMeta, size: Any, align_corners: Any = False, *, result: Any,
                          **kwargs: Any) -> Cost:
    """Per output coordinate, the affine map of the homogeneous base point over d spatial dims:
    d+1 MULT + d ADD (2-D: 3 MULT + 2 ADD). A per-point map, not a contraction: no MACs.
    NB: the base grid's linspace values (one per row and column) are not counted."""
    d = len(size) - 2
    return Cost(mult=d + 1, add=d) * first_meta(result).numel


@formula(aten.grid_sampler_3d)
def grid_sampler_3d(x: TensorMeta, grid: TensorMeta, mode: int = 0, *args: Any, result: Any,
                    **kwargs: Any) -> Cost:
    """As grid_sampler_2d over 3 coordinates. Per grid point: 3 MULT + 6 ADD + 3 OTHER; per output
    element: trilinear (mode 0) 14 MULT + 7 ADD, nearest (mode 1) 3 OTHER."""
    out = first_meta(result)
    per_point = Cost(mult=3, add=6, other=3) * (grid.numel // 3)
    if mode == 1:
        return per_point + Cost(other=3) * out.numel
    return per_point + interpolation_cost(out.numel, 2, 3)


@formula(aten.grid_sampler_3d_backward)
def grid_sampler_3d_backward(grad: TensorMeta, x: TensorMeta, grid: TensorMeta, mode: int = 0,
                             *args: Any, result: Any, **kwargs: Any) -> Cost:
    """grid_sampler_2d_backward's rule over d = 3 coordinates and 2^d = 8 taps, per output
    element: grad_input d MULT + 1 ADD per tap (24 MULT + 8 ADD); grad_grid, per tap and
    coordinate, the other d-1 weights times the value and the sum (48 MULT + 24 ADD); per grid
    point the forward's coordinate work and the unnormalising scale (6 MULT + 6 ADD + 3 OTHER)."""
    return Cost(mult=72, add=32) * grad.numel + Cost(mult=6, add=6, other=3) * (grid.numel // 3)


def _aa_scale(n_in: int, n_out: int, align_corners: bool, scale: Any) -> float:
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


@lru_cache(maxsize=1024)
def aa_ranges(n_in: int, n_out: int, interp: int, align_corners: bool, scale: Any = None
              ) -> tuple[tuple[int, int], ...]:
    """(first input, taps) of each output index along one dim of anti-aliased interpolation
    (torch's support: interp/2 input pixels, times the scale when downsampling)."""
    s = _aa_scale(n_in, n_out, align_corners, scale)
    support = interp * 0.5 * s if s >= 1.0 else interp * 0.5
    ranges = []
    for i in range(n_out):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        ranges.append((lo, min(int(center + support + 0.5), n_in) - lo))
    return tuple(ranges)


def aa_taps(n_in: int, n_out: int, interp: int, align_corners: bool, scale: Any = None) -> tuple[int, ...]:
    """Taps of each output index along one dim (`aa_ranges`)."""
    return tuple(t for _, t in aa_ranges(n_in, n_out, interp, align_corners, scale))


def aa_reached(n_in: int, n_out: int, interp: int, align_corners: bool, scale: Any = None) -> int:
    """Input positions along one dim that some output's taps cover."""
    return len({lo + k for lo, t in aa_ranges(n_in, n_out, interp, align_corners, scale) for k in range(t)})


def _aa(interp: int) -> Any:
    def count(x: TensorMeta, output_size: Any, align_corners: bool = False, scales_h: Any = None,
              scales_w: Any = None, *, result: Any, **kwargs: Any) -> Cost:
        (n, c, h_in, w_in), (h_out, w_out) = x.shape, output_size
        cost = Cost()
        if w_out != w_in:                     # horizontal pass: [N,C,H_in,W_in] -> [N,C,H_in,W_out]
            sx = sum(aa_taps(w_in, w_out, interp, bool(align_corners), scales_w))
            cost += Cost(mult=sx, add=sx - w_out) * (n * c * h_in)
        if h_out != h_in:                     # vertical pass -> [N,C,H_out,W_out]
            sy = sum(aa_taps(h_in, h_out, interp, bool(align_corners), scales_h))
            cost += Cost(mult=sy, add=sy - h_out) * (n * c * w_out)
        return cost

    count.__doc__ = (f"Anti-aliased {interp}-tap interpolation, two separable passes (a dim of equal size is "
                     f"skipped): each output takes its taps (`aa_taps`): taps MULT + taps-1 ADD.")
    return count


def _aa_backward(interp: int) -> Any:
    def count(grad: TensorMeta, output_size: Any, input_size: Any, align_corners: bool = False,
              scales_h: Any = None, scales_w: Any = None, *, result: Any, **kwargs: Any) -> Cost:
        planes, (h_in, w_in), (h_out, w_out) = numel(input_size[:2]), input_size[2:], output_size
        dims = ((int(h_in), int(h_out), scales_h), (int(w_in), int(w_out), scales_w))
        products, reached = planes, planes
        for n_in, n_out, scale in dims:
            products *= sum(aa_taps(n_in, n_out, interp, bool(align_corners), scale))
            reached *= aa_reached(n_in, n_out, interp, bool(align_corners), scale)
        return Cost(mult=2 * products, add=products - reached)

    count.__doc__ = (f"Scatter of anti-aliased {interp}-tap interpolation: per output and tap pair 2 MULT "
                     f"(weights, gradient); ADD = products - inputs reached.")
    return count


for _interp, _fwd, _bwd in ((2, aten._upsample_bilinear2d_aa, aten._upsample_bilinear2d_aa_backward),
                            (4, aten._upsample_bicubic2d_aa, aten._upsample_bicubic2d_aa_backward)):
    formula(_fwd)(_aa(_interp))
    formula(_bwd)(_aa_backward(_interp))
