"""Exact least squares: the pseudo-inverse of an integer design matrix in rational arithmetic, as
an integer matrix over one common denominator (pure; no unit)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence


def integer_pseudo_inverse(rows: Sequence[Sequence[int]]) -> tuple[list[list[int]], int]:
    """(X^T X)^-1 X^T of an integer design matrix X, exactly, as an integer matrix and one
    common denominator: coefficients = (P values) / denominator, rational for integer values."""
    x = [[Fraction(v) for v in row] for row in rows]
    m, n = len(x), len(x[0])
    xtx = [[sum(x[r][i] * x[r][j] for r in range(m)) for j in range(n)] for i in range(n)]
    inv = _invert(xtx)
    exact = [[sum(inv[i][j] * x[r][j] for j in range(n)) for r in range(m)] for i in range(n)]
    denominator = math.lcm(*(f.denominator for row in exact for f in row))
    return [[int(f * denominator) for f in row] for row in exact], denominator


def _invert(a: list[list[Fraction]]) -> list[list[Fraction]]:
    n = len(a)
    aug = [row[:] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if aug[r][col] != 0), None)
        if pivot is None:
            raise ValueError("the counted compositions do not determine the step cost (singular design)")
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                f = aug[r][col]
                aug[r] = [v - f * w for v, w in zip(aug[r], aug[col])]
    return [row[n:] for row in aug]
