"""Harness cases of issue #40's element-wise formulas (special functions, hypot, logaddexp,
logit, logcumsumexp, the sweep's additions): batch scaling, the generic traffic rule and equal
counts on real, meta and fake tensors (scripts/formula_harness.py adds them to the cases)."""

from __future__ import annotations

import torch

from formula_cases import Case, binary, reduction, unary

UNARY_2026 = ["digamma", "lgamma", "i0", "logit", "sinc", "deg2rad", "rad2deg", "signbit", "nan_to_num",
              "asinh", "acosh", "atanh"]
BINARY_2026 = ["hypot", "logaddexp", "logaddexp2", "heaviside", "copysign", "nextafter"]


def cases_2026() -> list[Case]:
    out = [unary(n) for n in UNARY_2026] + [binary(n) for n in BINARY_2026]
    out += [unary("special_i0e", torch.special.i0e), unary("special_bessel_j0", torch.special.bessel_j0),
            reduction("aten.logcumsumexp", lambda x: torch.logcumsumexp(x, -1)),
            reduction("aten.count_nonzero", lambda x: torch.count_nonzero(x, -1))]
    return out
