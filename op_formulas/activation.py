"""Activations and element-wise specials beyond pointwise.py, forward and backward.

Each costs a fixed `Cost` per output element, from the reference formula written beside it
(COUNTING.md categories: exp inside sigmoid/softplus is EXP, log/tanh/atan2 are OTHER).
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta
from op_formulas.cost import Cost, TensorMeta
from op_formulas.pointwise import SIGMOID, register_per_element
from op_formulas.registry import formula

aten = torch.ops.aten
SOFTPLUS = Cost(exp=1, add=1, other=1)    # log(1 + exp(x))

# mish: x * tanh(softplus(x))
register_per_element(SOFTPLUS + Cost(other=1, mult=1), aten.mish, aten.mish_)
# mish_backward: sp = softplus(x), t = tanh(sp), s = sigmoid(x) = e / (1 + e) reusing both;
# g * (t + x * s * (1 - t*t)): 4 MULT + 2 ADD, t*t 1 MULT; s 1 DIV.
register_per_element(SOFTPLUS + Cost(other=1, div=1, mult=4, add=2), aten.mish_backward)
# hardswish: x * min(max(x + 3, 0), 6) / 6;  hardsigmoid: min(max(x + 3, 0), 6) / 6
register_per_element(Cost(add=1, cmp=2, mult=1, div=1), aten.hardswish, aten.hardswish_)
register_per_element(Cost(add=1, cmp=2, div=1), aten.hardsigmoid, aten.hardsigmoid_)
# hardswish_backward: x < -3 ? 0 : x <= 3 ? g * (2x + 3) / 6 : g
register_per_element(Cost(cmp=2, mult=2, add=1, div=1), aten.hardswish_backward)
# hardsigmoid_backward: -3 < x < 3 ? g / 6 : 0
register_per_element(Cost(cmp=2, div=1), aten.hardsigmoid_backward)
# leaky_relu_backward: x > 0 ? g : g * slope
register_per_element(Cost(cmp=1, mult=1), aten.leaky_relu_backward)
# celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
register_per_element(Cost(cmp=2, exp=1, add=2, mult=1, div=1), aten.celu, aten.celu_)
# log_sigmoid (stable): min(x, 0) - log(1 + exp(-|x|)): 2 CMP, 1 EXP, 2 ADD, 1 OTHER
register_per_element(Cost(cmp=2, exp=1, add=2, other=1), aten.log_sigmoid_forward)
# log_sigmoid_backward: g * sigmoid(-x): negation, sigmoid, product
register_per_element(SIGMOID + Cost(add=1, mult=1), aten.log_sigmoid_backward)
# erfc = 1 OTHER; angle = atan2(imag, real) = 1 OTHER; xlogy: x == 0 ? 0 : x * log(y)
register_per_element(Cost(other=1), aten.erfc, aten.erfc_, aten.angle)
register_per_element(Cost(cmp=1, other=1, mult=1), aten.xlogy, aten.xlogy_, aten.special_xlog1py)
# polar: abs * cos(angle), abs * sin(angle)
register_per_element(Cost(other=2, mult=2), aten.polar)
# logical ops in place: 1 CMP
register_per_element(Cost(cmp=1), aten.logical_and_, aten.logical_or_, aten.logical_not_)


@formula(aten.sgn, aten.sgn_)
def sgn(x: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """Real: sign, 1 CMP. Complex z / |z|: |z| (2 MULT + 1 ADD + 1 SQRT), 1 CMP (z == 0), 2 DIV."""
    unit = Cost(mult=2, add=1, sqrt=1, cmp=1, div=2) if x.dtype.is_complex else Cost(cmp=1)
    return unit * first_meta(result).numel


@formula(aten.softplus_backward)
def softplus_backward(grad: TensorMeta, x: TensorMeta, beta: Any = 1, threshold: Any = 20, *,
                      result: Any, **kwargs: Any) -> Cost:
    """beta*x > threshold ? g : g * sigmoid(beta*x): 1 CMP + sigmoid + 1 MULT,
    +1 MULT when beta != 1."""
    return (Cost(cmp=1, mult=1 + int(beta != 1)) + SIGMOID) * first_meta(result).numel


@formula(aten.elu_backward)
def elu_backward(grad: TensorMeta, alpha: Any, scale: Any, input_scale: Any, is_result: bool,
                 x: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """x > 0 ? g * scale : g * input_scale * alpha * scale * exp(x * input_scale), with the
    constants folded: 1 CMP + 1 EXP + 3 MULT (x*input_scale, exp*coef, *g); from the result
    (is_result) y + alpha*scale replaces the exp: 1 CMP + 1 ADD + 2 MULT."""
    unit = Cost(cmp=1, add=1, mult=2) if is_result else Cost(cmp=1, exp=1, mult=3)
    return unit * first_meta(result).numel


@formula(aten._prelu_kernel)
def prelu(x: TensorMeta, weight: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """x > 0 ? x : w * x: 1 CMP + 1 MULT per element."""
    return Cost(cmp=1, mult=1) * first_meta(result).numel


@formula(aten._prelu_kernel_backward)
def prelu_backward(grad: TensorMeta, x: TensorMeta, weight: TensorMeta, *, result: Any,
                   **kwargs: Any) -> Cost:
    """Per element: x > 0 (1 CMP); grad_input g or w*g (1 MULT); grad_weight 0 or x*g (1 MULT)
    (torch sums grad_weight over broadcast dims in separate ops)."""
    return Cost(cmp=1, mult=2) * x.numel


@formula(aten.glu)
def glu(x: TensorMeta, dim: int = -1, *, result: Any, **kwargs: Any) -> Cost:
    """a * sigmoid(b) over the two halves: sigmoid + 1 MULT per output."""
    return (SIGMOID + Cost(mult=1)) * first_meta(result).numel


@formula(aten.glu_backward)
def glu_backward(grad: TensorMeta, x: TensorMeta, dim: int, *, result: Any, **kwargs: Any) -> Cost:
    """Per output element s = sigmoid(b): grad_a = g*s (1 MULT); grad_b = g*a*s*(1-s)
    (1 ADD + 3 MULT)."""
    return (SIGMOID + Cost(mult=4, add=1)) * grad.numel


@formula(aten._is_all_true, aten._is_any_true)
def is_all_true(x: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """A reduction of n booleans: n-1 CMP."""
    return Cost(cmp=max(x.numel - 1, 0))
