"""Normalisation layers: layer norm, RMS norm, batch norm, group norm; forward and backward.

Rules (COUNTING.md), per row of n normalised elements:
layer_norm: mean (n-1 ADD + 1 DIV), x - mean (n ADD), variance (n MULT + n-1 ADD + 1 DIV),
    + eps (1 ADD), rsqrt (1 SQRT + 1 DIV), normalise (n MULT); affine +n MULT (weight) +n ADD (bias).
rms_norm: n MULT + n-1 ADD + 1 DIV (mean of squares) + 1 ADD (eps) + rsqrt + n MULT, +n MULT with weight.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from op_formulas.args import numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


def layer_norm_row(n: int, weight: bool, bias: bool) -> Cost:
    """The layer_norm rule for one row of n (module docstring)."""
    stats = Cost(add=(n - 1) + n + (n - 1) + 1, mult=n, div=2) + Cost(sqrt=1, div=1)
    return stats + Cost(mult=n) + Cost(mult=n * int(weight), add=n * int(bias))


def rms_norm_row(n: int, weight: bool) -> Cost:
    """The rms_norm rule for one row of n (module docstring)."""
    return Cost(mult=n + n + n * int(weight), add=(n - 1) + 1, div=1 + 1, sqrt=1)


def rows_of(x: TensorMeta, normalized_shape: Sequence[int]) -> tuple[int, int]:
    n = numel(normalized_shape)
    return (x.numel // n if n else 0), n


@formula(aten.native_layer_norm)
def layer_norm(x: TensorMeta, normalized_shape: Sequence[int], weight: Any = None, bias: Any = None,
               *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Per row: see `layer_norm_row`."""
    rows, n = rows_of(x, normalized_shape)
    return layer_norm_row(n, weight is not None, bias is not None) * rows


@formula(aten._fused_rms_norm, aten.rms_norm)
def rms_norm(x: TensorMeta, normalized_shape: Sequence[int], weight: Any = None,
             *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Per row: see `rms_norm_row`."""
    rows, n = rows_of(x, normalized_shape)
    return rms_norm_row(n, weight is not None) * rows


def normalise_backward_row(n: int, weight: bool) -> Cost:
    """Input gradient of a normalisation over n elements with saved mean and rstd:
    x_hat = (x - mean) * rstd (n ADD + n MULT); g = grad * weight (n MULT if weight);
    dx = rstd / n * (n*g - sum(g) - x_hat * sum(g * x_hat)):
    sum(g) n-1 ADD; g*x_hat n MULT; its sum n-1 ADD; x_hat*s n MULT; n*g n MULT;
    two subtractions 2n ADD; rstd/n 1 DIV; final scale n MULT."""
    return Cost(add=n + 2 * (n - 1) + 2 * n, mult=n + n * int(weight) + 4 * n, div=1)


@formula(aten.native_layer_norm_backward)
def layer_norm_backward(grad: TensorMeta, x: TensorMeta, normalized_shape: Sequence[int],
                        mean: TensorMeta, rstd: TensorMeta, weight: Any, bias: Any,
                        output_mask: Sequence[bool], *, result: Any, **kwargs: Any) -> Cost:
    """grad_input per row: `normalise_backward_row`; grad_weight: rows*n MULT (grad*x_hat)
    + (rows-1)*n ADD (x_hat recomputed when grad_input is not asked: + rows*n ADD + MULT);
    grad_bias: (rows-1)*n ADD."""
    rows, n = rows_of(x, normalized_shape)
    cost = Cost()
    if output_mask[0]:
        cost += normalise_backward_row(n, weight is not None) * rows
    if output_mask[1] and weight is not None:
        x_hat = Cost() if output_mask[0] else Cost(add=rows * n, mult=rows * n)
        cost += x_hat + Cost(mult=rows * n, add=(rows - 1) * n)
    if output_mask[2] and bias is not None:
        cost += Cost(add=(rows - 1) * n)
    return cost


def channels_and_count(x: TensorMeta) -> tuple[int, int]:
    """(C, m): channels (dim 1) and elements per channel (N * spatial)."""
    c = x.shape[1] if len(x.shape) > 1 else 1
    return c, (x.numel // c if c else 0)


def batch_norm_cost(x: TensorMeta, weight: Any, bias: Any, running: bool, training: bool) -> Cost:
    """Per channel over m elements. Training: mean (m-1 ADD + 1 DIV), variance
    (m ADD + m MULT + m-1 ADD + 1 DIV); running-stat update (when buffers exist):
    mean and var each (1-mom)*r + mom*s: 2 MULT + 1 ADD, unbiased var: +1 MULT.
    Both modes: + eps (1 ADD), rsqrt (1 SQRT + 1 DIV); per element x - mean (m ADD) and
    * rstd (m MULT); affine +m MULT (weight), +m ADD (bias)."""
    c, m = channels_and_count(x)
    per_channel = Cost(add=1, sqrt=1, div=1)
    if training:
        per_channel += Cost(add=(m - 1) + m + (m - 1), mult=m, div=2)
        if running:
            per_channel += Cost(mult=5, add=2)
    per_channel += Cost(add=m, mult=m) + Cost(mult=m * int(weight is not None), add=m * int(bias is not None))
    return per_channel * c


@formula(aten.native_batch_norm, aten._native_batch_norm_legit_functional, aten.cudnn_batch_norm,
         aten.miopen_batch_norm)
def batch_norm(x: TensorMeta, weight: Any, bias: Any, running_mean: Any, running_var: Any,
               training: bool, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """See `batch_norm_cost`. Writes the output, and in training the saved mean and inverse std
    (evaluation saves nothing: CPU kernels return empty tensors where meta kernels return C
    elements, so the rule, not the kernel, decides). cuDNN's and MIOpen's batch norm (what
    torch runs on CUDA and ROCm) take the same first six arguments; cuDNN's reserve space (its
    4th result) is its own scratch, not counted."""
    saved = result[1].nbytes + result[2].nbytes if training else 0
    return batch_norm_cost(x, weight, bias, running_mean is not None, training).with_bytes(
        None, result[0].nbytes + saved)


@formula(aten._native_batch_norm_legit)
def batch_norm_legit(x: TensorMeta, weight: Any, bias: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """_native_batch_norm_legit(x, w, b, running_mean, running_var, training, ...) or the
    overload without running stats (x, w, b, training, ...): see `batch_norm_cost`."""
    if args and isinstance(args[0], bool):
        return batch_norm_cost(x, weight, bias, False, args[0])
    return batch_norm_cost(x, weight, bias, args[0] is not None, bool(args[2]))


@formula(aten._native_batch_norm_legit_no_training)
def batch_norm_eval(x: TensorMeta, weight: Any, bias: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Evaluation-mode batch norm: see `batch_norm_cost` with training False."""
    return batch_norm_cost(x, weight, bias, True, False)


@formula(aten.native_batch_norm_backward)
def batch_norm_backward(grad: TensorMeta, x: TensorMeta, weight: Any, running_mean: Any,
                        running_var: Any, save_mean: Any, save_invstd: Any, training: bool,
                        eps: float, output_mask: Sequence[bool], *, result: Any, **kwargs: Any) -> Cost:
    """Per channel of m elements. Training, grad_input: `normalise_backward_row(m)`;
    eval, grad_input: g * weight * rstd (m MULT + m MULT with weight) after rstd from the
    running variance (1 ADD + 1 SQRT + 1 DIV). grad_weight: sum(g * x_hat) (m ADD + m MULT
    for x_hat, m MULT + m-1 ADD); grad_bias: m-1 ADD."""
    c, m = channels_and_count(x)
    cost = Cost()
    if output_mask[0]:
        if training:
            cost += normalise_backward_row(m, weight is not None) * c
        else:
            cost += (Cost(add=1, sqrt=1, div=1) + Cost(mult=m * (1 + int(weight is not None)))) * c
    if output_mask[1]:
        cost += Cost(add=m + (m - 1), mult=2 * m) * c
    if output_mask[2]:
        cost += Cost(add=m - 1) * c
    return cost


@formula(aten.cudnn_batch_norm_backward, aten.miopen_batch_norm_backward)
def vendor_batch_norm_backward(x: TensorMeta, grad: TensorMeta, weight: Any, running_mean: Any, running_var: Any,
                               save_mean: Any, save_var: Any, eps: float, *args: Any, result: Any,
                               **kwargs: Any) -> Cost:
    """cuDNN's and MIOpen's batch-norm backward (training only; input before the gradient, no
    output mask): `batch_norm_backward` in training with the input, weight and bias gradients."""
    return batch_norm_backward(grad, x, weight, running_mean, running_var, save_mean, save_var, True, eps,
                               (True, weight is not None, weight is not None), result=result)


@formula(aten.native_group_norm)
def group_norm(x: TensorMeta, weight: Any, bias: Any, n_batch: int, channels: int, hw: int,
               group: int, eps: float, *, result: Any, **kwargs: Any) -> Cost:
    """Layer-norm statistics per (batch, group) over (C/G)*HxW elements; affine per channel."""
    n = (channels // group) * hw
    stats = layer_norm_row(n, False, False) * (n_batch * group)
    affine = Cost(mult=x.numel * int(weight is not None), add=x.numel * int(bias is not None))
    return stats + affine


@formula(aten.native_group_norm_backward)
def group_norm_backward(grad: TensorMeta, x: TensorMeta, mean: TensorMeta, rstd: TensorMeta,
                        weight: Any, n_batch: int, channels: int, hw: int, group: int,
                        output_mask: Sequence[bool], *, result: Any, **kwargs: Any) -> Cost:
    """As layer_norm_backward with rows = N*G of n = (C/G)*HxW elements: grad_input per row
    `normalise_backward_row`; grad_weight per channel sum over N*HxW of grad*x_hat
    (numel MULT + (N*HxW-1)*C ADD, x_hat recomputed when grad_input is not asked);
    grad_bias (N*HxW-1)*C ADD."""
    rows, n = n_batch * group, (channels // group) * hw if group else 0
    m = n_batch * hw                                   # elements per channel
    cost = Cost()
    if output_mask[0]:
        cost += normalise_backward_row(n, weight is not None) * rows
    if output_mask[1] and weight is not None:
        x_hat = Cost() if output_mask[0] else Cost(add=x.numel, mult=x.numel)
        cost += x_hat + Cost(mult=x.numel, add=(m - 1) * channels)
    if output_mask[2]:
        cost += Cost(add=(m - 1) * channels)
    return cost


def _weight_norm_rows(v: TensorMeta, dim: int) -> tuple[int, int]:
    """(rows, n): one norm per index of ``dim`` over the other n elements (dim -1: one norm)."""
    if dim == -1 or not v.shape:
        return 1, v.numel
    rows = v.shape[dim % len(v.shape)]
    return rows, (v.numel // rows if rows else 0)


@formula(aten._weight_norm_interface)
def weight_norm(v: TensorMeta, g: TensorMeta, dim: int = 0, *, result: Any, **kwargs: Any) -> Cost:
    """w = g * v / ||v||: per row the norm (n MULT + n-1 ADD + 1 SQRT) and g / norm (1 DIV);
    per element 1 MULT."""
    rows, n = _weight_norm_rows(v, dim)
    return Cost(mult=n, add=n - 1, sqrt=1, div=1) * rows + Cost(mult=v.numel)


@formula(aten._weight_norm_interface_backward)
def weight_norm_backward(grad_w: TensorMeta, v: TensorMeta, g: TensorMeta, norms: TensorMeta, dim: int,
                         *, result: Any, **kwargs: Any) -> Cost:
    """grad_g = sum(grad_w * v) / norm per row (n MULT + n-1 ADD + 1 DIV); grad_v =
    (g / norm) * (grad_w - v * grad_g / norm): per row 2 DIV, per element 2 MULT + 1 ADD."""
    rows, n = _weight_norm_rows(v, dim)
    return Cost(mult=n, add=n - 1, div=3) * rows + Cost(mult=2 * v.numel, add=v.numel)
