"""Rules found by the sweep over torch.ops.aten (scripts/op_sweep.py): the in-place twins of
counted ops, element-wise special functions, small element-wise ops and bookkeeping ops.

- In-place twin: ``aten.x_`` counts as ``aten.x`` (same arguments; the output is the mutated
  tensor), for every ``x`` with a formula and no formula of its own for ``x_``.
- Special functions (Bessel, orthogonal polynomials, zeta, entr, log_ndtr, Airy): 1 OTHER per
  output element (COUNTING.md: every other element-wise special function).
- acosh, asinh, atanh: 1 OTHER; _add_relu: 1 ADD + 1 CMP; _masked_scale: 2 MULT;
  linalg_cross: 2 MULT + 1 ADD per output element (6 MULT + 3 ADD per 3-vector); aminmax over n:
  2(n-1) CMP per output;
- sinc(x) = sin(pi x) / (pi x), with the x == 0 test: 1 MULT + 1 OTHER + 1 DIV + 1 CMP;
  deg2rad, rad2deg: 1 MULT; ldexp(x, e) = x * 2^e: 1 EXP + 1 MULT; signbit, isposinf,
  isneginf: 1 CMP; heaviside: 2 CMP (x < 0, x == 0); copysign: 2 CMP (|x| and the sign);
  nan_to_num: 3 CMP (nan, +inf, -inf); hardshrink: 2 CMP; softshrink: 2 CMP + 1 ADD;
  bit shifts, gcd, lcm, nextafter: 1 OTHER; trace of [n,m]: min(n,m)-1 ADD.
- Bookkeeping (no arithmetic, no bytes): asserts, dependency tokens, symbolic-size
  constraints, print, pinned-memory queries, resizes of an output's metadata.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.pointwise import register_per_element
from op_formulas.registry import ZERO_COST, formula, lookup, registered, zero_cost

aten = torch.ops.aten

register_per_element(Cost(other=1), *[getattr(aten, n) for n in (
    "special_airy_ai", "special_bessel_j0", "special_bessel_j1", "special_bessel_y0", "special_bessel_y1",
    "special_chebyshev_polynomial_t", "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_v",
    "special_chebyshev_polynomial_w", "special_entr", "special_hermite_polynomial_h",
    "special_hermite_polynomial_he", "special_laguerre_polynomial_l", "special_legendre_polynomial_p",
    "special_log_ndtr", "special_modified_bessel_i0", "special_modified_bessel_i1", "special_modified_bessel_k0",
    "special_modified_bessel_k1", "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1",
    "special_shifted_chebyshev_polynomial_t", "special_shifted_chebyshev_polynomial_u",
    "special_shifted_chebyshev_polynomial_v", "special_shifted_chebyshev_polynomial_w",
    "special_spherical_bessel_j0", "special_zeta", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm",
    "nextafter", "acosh", "asinh", "atanh")])
register_per_element(Cost(mult=1, other=1, div=1, cmp=1), aten.sinc)
register_per_element(Cost(mult=1), aten.deg2rad, aten.rad2deg)
register_per_element(Cost(exp=1, mult=1), aten.ldexp)
register_per_element(Cost(cmp=1), aten.signbit, aten.isposinf, aten.isneginf)
register_per_element(Cost(cmp=2), aten.heaviside, aten.copysign, aten.hardshrink)
register_per_element(Cost(cmp=3), aten.nan_to_num)
register_per_element(Cost(cmp=2, add=1), aten.softshrink)
register_per_element(Cost(add=1, cmp=1), aten._add_relu, aten._add_relu_)
register_per_element(Cost(mult=2), aten._masked_scale)
register_per_element(Cost(mult=2, add=1), aten.linalg_cross)


@formula(aten._aminmax)
def aminmax(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Min and max of each output's n elements: 2*(n-1) CMP per output."""
    outputs = result[0].numel if isinstance(result, (tuple, list)) else 1
    n = x.numel // outputs if outputs else 0
    return Cost(cmp=2 * max(n - 1, 0) * outputs)


@formula(aten.trace)
def trace(x: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """Sum of the min(n, m) diagonal elements: min(n, m) - 1 ADD."""
    return Cost(add=max(min(x.shape) - 1, 0))


zero_cost(aten._assert_async, aten._assert_scalar, aten._functional_assert_async, aten._assert_tensor_metadata,
          aten._make_dep_token, aten._functional_sym_constrain_range, aten._functional_sym_constrain_range_for_size,
          aten.sym_constrain_range, aten.sym_constrain_range_for_size, aten._print, aten.is_pinned,
          aten.resize, aten.resize_as, aten.resize_as_, aten._resize_output, aten._resize_output_, aten.set)


def register_inplace_twins() -> list[str]:
    """Give every ``aten.x_`` without a state the formula of ``aten.x``; returns their names."""
    done, known = [], registered()
    for name in dir(aten):
        if not name.endswith("_") or name.startswith("_") or name.endswith("__"):
            continue
        inplace, functional = getattr(aten, name, None), getattr(aten, name[:-1], None)
        if not isinstance(inplace, torch._ops.OpOverloadPacket) or functional is None or inplace in known:
            continue
        fn = lookup(functional)
        if fn is not None and inplace not in ZERO_COST:
            formula(inplace)(fn)
            done.append(name)
    return done


INPLACE_TWINS = register_inplace_twins()
