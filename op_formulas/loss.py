"""Losses: negative log-likelihood (the tail of cross-entropy) and mean squared error.

nll_loss over N targets: N CMP (the ignore_index test), N-1 ADD (sum of the picked
log-probabilities), 1 ADD (negation), and with reduction 'mean' 1 DIV; class weights add
N MULT and N-1 ADD (their total). Its backward writes -g/total at each target: N CMP,
1 ADD (negation), 1 DIV (mean) or, with weights, N MULT.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten
MEAN, SUM = 1, 2  # torch's Reduction enum: 0 none, 1 mean, 2 sum


@formula(aten.nll_loss_forward, aten.nll_loss2d_forward)
def nll_loss(x: TensorMeta, target: TensorMeta, weight: Any, reduction: int, ignore_index: int,
             *, result: Any, **kwargs: Any) -> Cost:
    """See module docstring; reduction 'none' has no sum and no DIV."""
    n = target.numel
    cost = Cost(cmp=n, add=n)  # ignore test and negation, per target, for 'none'
    if reduction != 0:
        cost = Cost(cmp=n, add=max(n - 1, 0) + 1, div=int(reduction == MEAN))
    if weight is not None:
        cost += Cost(mult=n, add=max(n - 1, 0) * int(reduction != 0))
    return cost


@formula(aten.nll_loss_backward, aten.nll_loss2d_backward)
def nll_loss_backward(grad: TensorMeta, x: TensorMeta, target: TensorMeta, weight: Any,
                      reduction: int, ignore_index: int, total_weight: Any, *, result: Any,
                      **kwargs: Any) -> Cost:
    """See module docstring."""
    n = target.numel
    scale = Cost(div=int(reduction == MEAN), add=1) if reduction != 0 else Cost(add=n)
    return Cost(cmp=n, mult=n * int(weight is not None)) + scale


@formula(aten.mse_loss)
def mse_loss(x: TensorMeta, y: TensorMeta, reduction: int = MEAN, *, result: Any, **kwargs: Any) -> Cost:
    """(x - y)^2 summed: n ADD + n MULT, then n-1 ADD and 1 DIV for 'mean'."""
    n = max(x.numel, y.numel)
    if reduction == 0:
        return Cost(add=n, mult=n)
    return Cost(add=n + n - 1, mult=n, div=int(reduction == MEAN))


@formula(aten.mse_loss_backward)
def mse_loss_backward(grad: TensorMeta, x: TensorMeta, y: TensorMeta, reduction: int, *,
                      result: Any, **kwargs: Any) -> Cost:
    """2 * (x - y) * g (/ n for 'mean'): per element 1 ADD + 2 MULT (+1 DIV for 'mean')."""
    n = max(x.numel, y.numel)
    return Cost(add=n, mult=2 * n, div=n * int(reduction == MEAN))
