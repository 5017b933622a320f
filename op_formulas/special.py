"""Special functions and their element-wise relatives: gamma-family functions, Bessel functions,
hypot, logaddexp, logit, logcumsumexp, membership tests (isin), complex from parts.

Rules (COUNTING.md: every elementwise special function is 1 OTHER; the rest by their math
decomposition, per output element unless said):
- digamma, lgamma, polygamma, i0, i0e, i1, i1e, erfcx, ndtri, igamma, igammac:
  1 OTHER;
- hypot(a, b) = sqrt(a*a + b*b): 2 MULT + 1 ADD + 1 SQRT;
- logaddexp(a, b) = log(exp(a) + exp(b)): 2 EXP + 1 ADD + 1 OTHER (logaddexp2 with 2^x, log2);
- logit(x) = log(x / (1 - x)): 1 ADD + 1 DIV + 1 OTHER, and with eps the clamp to
  [eps, 1-eps]: +2 CMP; logit_backward: g / (x * (1 - x)): 1 ADD + 1 MULT + 1 DIV, with eps the
  range test: +2 CMP;
- logcumsumexp over n per row = log(cumsum(exp(x))): n EXP + (n-1) ADD + n OTHER;
- isin(elements [E], test [T]): each element compared with each test element and the T results
  or-ed: E*T + E*(T-1) CMP; ``invert`` adds E CMP (the negation);
- complex(real, imag): no arithmetic (the parts interleaved), bytes by the generic rule.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta, reduction_size
from op_formulas.cost import Cost, TensorMeta
from op_formulas.pointwise import register_per_element
from op_formulas.registry import formula

aten = torch.ops.aten

register_per_element(Cost(other=1), aten.digamma, aten.digamma_, aten.lgamma, aten.lgamma_, aten.polygamma,
                     aten.polygamma_, aten.i0, aten.i0_, aten.special_i0e, aten.special_i1,
                     aten.special_i1e, aten.special_erfcx, aten.special_ndtri,
                     aten.igamma, aten.igammac)
register_per_element(Cost(mult=2, add=1, sqrt=1), aten.hypot, aten.hypot_)
register_per_element(Cost(exp=2, add=1, other=1), aten.logaddexp, aten.logaddexp2)


@formula(aten.complex)
def complex_(real: TensorMeta, imag: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """No arithmetic: real and imaginary parts interleaved."""
    return Cost()


@formula(aten.logit, aten.logit_)
def logit(x: TensorMeta, eps: Any = None, *, result: Any, **kwargs: Any) -> Cost:
    """log(x / (1 - x)): 1 ADD + 1 DIV + 1 OTHER; eps given: +2 CMP (the clamp)."""
    return Cost(add=1, div=1, other=1, cmp=2 * int(eps is not None)) * first_meta(result).numel


@formula(aten.logit_backward)
def logit_backward(grad: TensorMeta, x: TensorMeta, eps: Any = None, *, result: Any, **kwargs: Any) -> Cost:
    """g / (x * (1 - x)): 1 ADD + 1 MULT + 1 DIV; eps given: +2 CMP (the range test)."""
    return Cost(add=1, mult=1, div=1, cmp=2 * int(eps is not None)) * first_meta(result).numel


@formula(aten.logcumsumexp, aten._logcumsumexp)
def logcumsumexp(x: TensorMeta, dim: int, *, result: Any, **kwargs: Any) -> Cost:
    """log(cumsum(exp(x))) over n per row: n EXP + (n-1) ADD + n OTHER."""
    rows, n = reduction_size(x.shape, dim) if x.shape else (1, 1)
    return Cost(exp=n, add=max(n - 1, 0), other=n) * rows


def _count(value: Any) -> int:
    return value.numel if isinstance(value, TensorMeta) else 1


@formula(aten.isin)
def isin(elements: Any, test_elements: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """E*T comparisons and E*(T-1) ors; invert: +E CMP (a scalar on either side counts 1)."""
    e, t = _count(elements), _count(test_elements)
    invert = bool(kwargs.get("invert", False))
    return Cost(cmp=e * t + e * max(t - 1, 0) + e * int(invert))


@formula(aten.mvlgamma, aten.mvlgamma_)
def mvlgamma(x: TensorMeta, p: int, *, result: Any, **kwargs: Any) -> Cost:
    """log of the multivariate gamma, C + sum_{i<p} lgamma(x - i/2): p OTHER, p-1 ADD for the
    shifts, p-1 ADD for the sum and 1 ADD for the constant: 2p - 1 ADD per element."""
    return Cost(other=p, add=2 * p - 1) * first_meta(result).numel
