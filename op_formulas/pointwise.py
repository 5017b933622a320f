"""Element-wise ops: arithmetic, activations, comparisons, selections.

Each op costs a fixed `Cost` per output element (COUNTING.md, per-op table); the
factory `per_element` turns that per-element cost into a formula. In-place variants
(``add_``) count like their functional twins: the output is the mutated tensor.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import arg, first_meta
from op_formulas.cost import Cost
from op_formulas.registry import Formula, formula

aten = torch.ops.aten


def per_element(unit: Cost) -> Formula:
    """Formula: ``unit`` arithmetic for every element of the (first) output."""

    def count(*args: Any, result: Any, **kwargs: Any) -> Cost:
        return unit * first_meta(result).numel

    count.__doc__ = f"{unit} per output element."
    return count


def register_per_element(unit: Cost, *packets: torch._ops.OpOverloadPacket) -> None:
    formula(*packets)(per_element(unit))


# --- fixed per-element costs (name: cost, ops) -------------------------------------------
_ADD, _MULT, _DIV, _EXP, _CMP, _OTHER = (Cost(add=1), Cost(mult=1), Cost(div=1), Cost(exp=1),
                                        Cost(cmp=1), Cost(other=1))
SIGMOID = Cost(exp=1, add=1, div=1)       # 1 / (1 + exp(-x))
SILU = SIGMOID + _MULT                    # x * sigmoid(x)

register_per_element(_ADD, aten.neg, aten.neg_)
register_per_element(_MULT, aten.mul, aten.mul_, aten.square)
register_per_element(_DIV, aten.reciprocal, aten.reciprocal_)
register_per_element(Cost(sqrt=1), aten.sqrt, aten.sqrt_)
register_per_element(Cost(sqrt=1, div=1), aten.rsqrt, aten.rsqrt_)
register_per_element(_EXP, aten.exp, aten.exp_, aten.exp2, aten.exp2_, aten.expm1, aten.expm1_)
register_per_element(SIGMOID, aten.sigmoid, aten.sigmoid_)
register_per_element(SILU, aten.silu, aten.silu_)
register_per_element(_OTHER, aten.tanh, aten.tanh_, aten.erf, aten.erf_, aten.erfinv,
                     aten.log, aten.log_, aten.log2, aten.log10, aten.log1p, aten.sin, aten.sin_,
                     aten.cos, aten.cos_, aten.tan, aten.atan, aten.atan2, aten.asin, aten.acos,
                     aten.sinh, aten.cosh, aten.floor, aten.ceil, aten.round, aten.trunc, aten.frac)
# Comparisons and selections: 1 CMP per element.
register_per_element(_CMP, aten.relu, aten.relu_, aten.where, aten.masked_fill, aten.masked_fill_,
                     aten.eq, aten.ne, aten.lt, aten.le, aten.gt, aten.ge, aten.maximum, aten.minimum,
                     aten.fmax, aten.fmin, aten.clamp_min, aten.clamp_min_, aten.clamp_max,
                     aten.clamp_max_, aten.abs, aten.abs_, aten.sign, aten.isnan, aten.isinf,
                     aten.logical_not, aten.logical_and, aten.logical_or, aten.logical_xor,
                     aten.bitwise_and, aten.bitwise_or, aten.bitwise_xor, aten.bitwise_not,
                     aten.threshold, aten.threshold_backward, aten.eq_, aten.ne_, aten.lt_,
                     aten.le_, aten.gt_, aten.ge_, aten.bitwise_and_, aten.bitwise_or_)
# hardtanh clamps at two bounds; leaky_relu selects and scales.
register_per_element(Cost(cmp=2), aten.hardtanh, aten.hardtanh_)
register_per_element(Cost(cmp=1, mult=1), aten.leaky_relu, aten.leaky_relu_)
# lerp: self + weight * (end - self).
register_per_element(Cost(add=2, mult=1), aten.lerp, aten.lerp_)
# Backward of element-wise activations (reference algorithms, see each line).
register_per_element(Cost(mult=2, add=1), aten.tanh_backward)        # g * (1 - y*y)
register_per_element(Cost(mult=2, add=1), aten.sigmoid_backward)     # g * y * (1 - y)
# silu_backward: s = 1/(1+exp(-x)); g * s * (1 + x*(1-s))
register_per_element(Cost(exp=1, div=1, add=3, mult=3), aten.silu_backward)
register_per_element(Cost(cmp=2), aten.hardtanh_backward)


@formula(aten.add, aten.add_, aten.sub, aten.sub_, aten.rsub)
def add(self: Any, other: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """1 ADD per output element; alpha != 1 adds 1 MULT (alpha * other)."""
    alpha = arg(args, kwargs, 0, "alpha", 1)
    return Cost(add=1, mult=int(alpha != 1)) * first_meta(result).numel


@formula(aten.div, aten.div_)
def div(self: Any, other: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """1 DIV per output element; a rounding_mode ('floor', 'trunc') adds 1 OTHER."""
    rounding = kwargs.get("rounding_mode")
    return Cost(div=1, other=int(rounding is not None)) * first_meta(result).numel


@formula(aten.floor_divide, aten.remainder, aten.fmod)
def rounding_div(self: Any, other: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """1 DIV + 1 OTHER (the rounding) per output element."""
    return Cost(div=1, other=1) * first_meta(result).numel


def pow_unit(exponent: Any) -> Cost:
    """Per-element cost of x ** exponent.

    2 -> 1 MULT; 0.5 -> 1 SQRT; integer k >= 2 -> k-1 MULT (repeated multiplication);
    -1 -> 1 DIV; negative integer -k -> k-1 MULT + 1 DIV; 0 and 1 -> nothing;
    -0.5 -> 1 SQRT + 1 DIV (as rsqrt); any other exponent (or a tensor) -> 1 OTHER.
    """
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        return _OTHER
    if exponent == 0.5:
        return Cost(sqrt=1)
    if exponent == -0.5:
        return Cost(sqrt=1, div=1)
    if float(exponent).is_integer():
        k = int(exponent)
        if k in (0, 1):
            return Cost()
        return Cost(mult=abs(k) - 1, div=int(k < 0))
    return _OTHER


@formula(aten.pow, aten.pow_)
def pow_(self: Any, exponent: Any, *, result: Any, **kwargs: Any) -> Cost:
    """pow: see `pow_unit`; a scalar base with a tensor exponent is 1 OTHER."""
    return pow_unit(exponent) * first_meta(result).numel


@formula(aten.clamp, aten.clamp_)
def clamp(self: Any, min: Any = None, max: Any = None, *, result: Any, **kwargs: Any) -> Cost:
    """1 CMP per element for each bound that is given."""
    bounds = int(min is not None) + int(max is not None)
    return Cost(cmp=bounds) * first_meta(result).numel


@formula(aten.addcmul, aten.addcmul_)
def addcmul(self: Any, t1: Any, t2: Any, value: Any = 1, *, result: Any, **kwargs: Any) -> Cost:
    """self + value * t1 * t2: 1 ADD + 1 MULT per element, +1 MULT when value != 1."""
    return Cost(add=1, mult=1 + int(value != 1)) * first_meta(result).numel


@formula(aten.addcdiv, aten.addcdiv_)
def addcdiv(self: Any, t1: Any, t2: Any, value: Any = 1, *, result: Any, **kwargs: Any) -> Cost:
    """self + value * t1 / t2: 1 ADD + 1 DIV per element, +1 MULT when value != 1."""
    return Cost(add=1, div=1, mult=int(value != 1)) * first_meta(result).numel


@formula(aten.gelu, aten.gelu_)
def gelu(self: Any, *, result: Any, approximate: str = "none", **kwargs: Any) -> Cost:
    """erf form 0.5*x*(1+erf(x/sqrt2)): 3 MULT + 1 ADD + 1 OTHER; tanh form
    0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))): 6 MULT + 2 ADD + 1 OTHER."""
    unit = Cost(mult=6, add=2, other=1) if approximate == "tanh" else Cost(mult=3, add=1, other=1)
    return unit * first_meta(result).numel


@formula(aten.gelu_backward)
def gelu_backward(grad: Any, self: Any, *, result: Any, approximate: str = "none", **kwargs: Any) -> Cost:
    """torch's reference kernels. erf: cdf = 0.5*(1+erf(x*c1)); pdf = a*exp(x*x*-0.5);
    g*(cdf + x*pdf): 7 MULT + 2 ADD + 1 EXP + 1 OTHER.  tanh: 12 MULT + 5 ADD + 1 OTHER
    (x^2, x^3, inner, tanh, 1+t, 1-t^2, inner derivative, products, final sum)."""
    unit = (Cost(mult=12, add=5, other=1) if approximate == "tanh"
            else Cost(mult=7, add=2, exp=1, other=1))
    return unit * first_meta(result).numel


@formula(aten.softplus)
def softplus(self: Any, beta: Any = 1, threshold: Any = 20, *, result: Any, **kwargs: Any) -> Cost:
    """log(1 + exp(beta*x)) / beta with a threshold: 1 EXP + 1 ADD + 1 OTHER + 1 CMP,
    +2 MULT when beta != 1."""
    return Cost(exp=1, add=1, other=1, cmp=1, mult=2 * int(beta != 1)) * first_meta(result).numel


@formula(aten.elu, aten.elu_)
def elu(self: Any, alpha: Any = 1, scale: Any = 1, input_scale: Any = 1, *, result: Any, **kwargs: Any) -> Cost:
    """x > 0 ? x : alpha*(exp(x)-1): 1 CMP + 1 EXP + 1 ADD + 1 MULT per element."""
    return Cost(cmp=1, exp=1, add=1, mult=1) * first_meta(result).numel

