"""Losses: negative log-likelihood (the tail of cross-entropy), mean squared error, binary
cross-entropy (with logits), smooth L1, Huber and soft margin.

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


def reduce(n: int, reduction: int) -> Cost:
    """The reduction of n per-element losses: none 0; sum n-1 ADD; mean n-1 ADD + 1 DIV."""
    if reduction == 0:
        return Cost()
    return Cost(add=max(n - 1, 0), div=int(reduction == MEAN))


def per_element_loss(unit: Cost, weighted: Cost = Cost(mult=1)) -> Any:
    """Formula for ``loss(x, y, [weight,] reduction, ...)``: ``unit`` per element, ``weighted``
    per element when a weight tensor is given, then `reduce`."""

    def count(x: TensorMeta, y: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
        weight = args[0] if args and isinstance(args[0], TensorMeta) else kwargs.get("weight")
        ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
        reduction = kwargs.get("reduction", ints[0] if ints else MEAN)
        n = max(x.numel, y.numel)
        return unit * n + (weighted * n if isinstance(weight, TensorMeta) else Cost()) + reduce(n, reduction)

    count.__doc__ = f"{unit} per element (+{weighted} with a weight), then the reduction."
    return count


def per_element_loss_backward(unit: Cost) -> Any:
    """Formula for ``loss_backward(grad, x, y, [weight,] reduction, ...)``: ``unit`` per
    element, +1 MULT with a weight, +1 DIV for 'mean'."""

    def count(grad: TensorMeta, x: TensorMeta, y: TensorMeta, *args: Any, result: Any,
              **kwargs: Any) -> Cost:
        weight = args[0] if args and isinstance(args[0], TensorMeta) else None
        ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
        reduction = kwargs.get("reduction", ints[0] if ints else MEAN)
        n = max(x.numel, y.numel)
        return (unit + Cost(mult=int(weight is not None), div=int(reduction == MEAN))) * n

    count.__doc__ = f"{unit} per element, +1 MULT with a weight, +1 DIV for 'mean'."
    return count


# binary_cross_entropy: -(y log x + (1-y) log(1-x)), logs clamped at -100:
# 2 OTHER, 2 CMP, 2 MULT, 3 ADD (1-y, 1-x, the sum) + 1 ADD (negation).
formula(aten.binary_cross_entropy)(per_element_loss(Cost(other=2, cmp=2, mult=2, add=4)))
# its backward: g * (x - y) / max((1 - x) * x, eps): 2 ADD, 2 MULT, 1 CMP, 1 DIV
formula(aten.binary_cross_entropy_backward)(per_element_loss_backward(Cost(add=2, mult=2, cmp=1, div=1)))
# smooth_l1 (beta) and huber (delta): d = x - y, |d| < t ? quadratic : linear; the reference
# computes both branches and selects: smooth_l1 0.5*d*d/beta | |d| - 0.5*beta:
# 2 ADD, 2 CMP (abs, compare), 2 MULT, 1 DIV; huber 0.5*d*d | delta*(|d| - 0.5*delta): 3 MULT.
formula(aten.smooth_l1_loss)(per_element_loss(Cost(add=2, cmp=2, mult=2, div=1)))
formula(aten.huber_loss)(per_element_loss(Cost(add=2, cmp=2, mult=3)))
# backward: d = x - y (1 ADD); |d| < t (2 CMP); d / beta or sign(d) (1 DIV + 1 CMP); * g (1 MULT)
formula(aten.smooth_l1_loss_backward)(per_element_loss_backward(Cost(add=1, cmp=3, div=1, mult=1)))
# huber: d or delta * sign(d) (1 CMP + 1 MULT); * g (1 MULT)
formula(aten.huber_loss_backward)(per_element_loss_backward(Cost(add=1, cmp=3, mult=2)))
# soft_margin: log(1 + exp(-y*x)): 1 MULT, 2 ADD (negation, 1+), 1 EXP, 1 OTHER
formula(aten.soft_margin_loss)(per_element_loss(Cost(mult=1, add=2, exp=1, other=1)))
# backward: -y * g * e / (1 + e), e = exp(-y*x): 3 MULT, 2 ADD, 1 EXP, 1 DIV
formula(aten.soft_margin_loss_backward)(per_element_loss_backward(Cost(mult=3, add=2, exp=1, div=1)))


@formula(aten.binary_cross_entropy_with_logits)
def bce_with_logits(x: TensorMeta, y: TensorMeta, weight: Any = None, pos_weight: Any = None,
                    reduction: int = MEAN, *, result: Any, **kwargs: Any) -> Cost:
    """The stable form max(x, 0) - x*y + log(1 + exp(-|x|)) per element: 2 CMP (max, abs),
    1 MULT, 4 ADD (negation, 1+, two sums), 1 EXP, 1 OTHER. pos_weight p: the log term is
    scaled by (p - 1)*y + 1 (2 ADD, 1 MULT) (1 MULT); weight: 1 MULT; then `reduce`."""
    n = max(x.numel, y.numel)
    unit = Cost(cmp=2, mult=1, add=4, exp=1, other=1)
    if pos_weight is not None:
        unit += Cost(add=2, mult=2)
    if weight is not None:
        unit += Cost(mult=1)
    return unit * n + reduce(n, reduction)


#: One CTC recursion step of one state: a 3-term log-sum-exp (2 CMP for the max, 3 ADD to
#: subtract it, 3 EXP, 2 ADD to sum, 1 OTHER for the log, 1 ADD to add the max back) and
#: 1 ADD for the emission's log-probability.
CTC_STATE = Cost(cmp=2, add=7, exp=3, other=1)


@formula(aten._ctc_loss)
def ctc_loss(log_probs: TensorMeta, targets: TensorMeta, input_lengths: Any, target_lengths: Any,
             *args: Any, result: Any, **kwargs: Any) -> Cost:
    """CTC forward (alpha) recursion over log_probs [T,N,C] and L = 2*S+1 extended states
    (log_alpha [N,T,L]): every state of steps 1..T-1 costs `CTC_STATE` (the reference kernel's
    max over 3 predecessors, absent ones -inf); per sequence the final 2-term log-sum-exp
    (1 CMP + 4 ADD + 2 EXP + 1 OTHER) and the negation (1 ADD).
    NB: lengths are values: every sequence counts the padded T and L (real = fake = meta)."""
    n, t, states = result[1].shape
    return CTC_STATE * (n * max(t - 1, 0) * states) + Cost(cmp=1, add=5, exp=2, other=1) * n


@formula(aten._ctc_loss_backward)
def ctc_loss_backward(grad: TensorMeta, log_probs: TensorMeta, targets: TensorMeta, input_lengths: Any,
                      target_lengths: Any, nll: TensorMeta, log_alpha: TensorMeta, *args: Any,
                      result: Any, **kwargs: Any) -> Cost:
    """The beta recursion (as the forward's alpha: `CTC_STATE` per state of steps 0..T-2); per
    state and step alpha + beta (1 ADD) added into its label's log-sum (logaddexp: 2 EXP +
    1 ADD + 1 OTHER); per step, sequence and class (exp(lp) - exp(lsum + nll - lp)) * g:
    2 EXP + 3 ADD + 1 MULT. NB: padded lengths, as the forward."""
    n, t, states = log_alpha.shape
    classes = log_probs.shape[-1]
    return (CTC_STATE * (n * max(t - 1, 0) * states) + Cost(add=2, exp=2, other=1) * (n * t * states)
            + Cost(exp=2, add=3, mult=1) * (n * t * classes))
