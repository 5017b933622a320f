"""Dense linear algebra: factorisations and solves, by their reference algorithms (n x n
matrices unless said; every count times the batch of leading dims).

Exact counts of the textbook algorithms:
- LU with partial pivoting (Doolittle): column k searches its pivot ((n-k-1) CMP), divides
  (n-k-1) multipliers (DIV) and updates the (n-k-1)^2 trailing block (1 MULT + 1 ADD each):
  CMP = DIV = n(n-1)/2, MULT = ADD = (n-1)n(2n-1)/6.
- Triangular solve, per right-hand side: x_i = (b_i - sum_j a_ij x_j) / a_ii:
  MULT = ADD = n(n-1)/2, DIV = n (none for a unit triangle, the L of LU).
- Cholesky (Banachiewicz): L_jj = sqrt(a_jj - sum_k L_jk^2), L_ij = (a_ij - sum_k L_ik L_jk)/L_jj:
  MULT = ADD = n(n-1)/2 + n(n-1)(n-2)/6, DIV = n(n-1)/2, SQRT = n.
- solve = LU + unit-lower and upper solves per rhs; inv = solve with the n columns of I;
  det = LU + (n-1) MULT; slogdet = LU + n OTHER (log|u_ii|) + (n-1) ADD + n CMP (signs).
- Householder QR of m x n (m >= n), column k (l = m-k rows, c = n-k-1 columns right of it):
  the reflector (l MULT + (l-1) ADD for the norm, 1 SQRT, 1 CMP for the sign, 1 ADD, 1 DIV)
  and its application to c columns (each 2l+1 MULT, 2l-1 ADD); forming the reduced Q applies
  the n reflectors to n columns of I (column k: n-k columns of 2l+1 MULT, 2l-1 ADD).
Iterative eigen/singular value algorithms have data-dependent iteration counts; they are
counted by the standard closed forms of Golub & Van Loan, Matrix Computations (4th ed.,
tables 8.3.x and 8.6.x), split evenly between ADD and MULT (the odd flop to ADD):
symmetric eig 4n^3/3 (values) or 9n^3 (with vectors); general eig 10n^3 or 25n^3;
SVD of m x n (m >= n) 4mn^2 - 4n^3/3 (values), 6mn^2 + 11n^3 (thin U, V), 4m^2n + 8mn^2 + 9n^3
(full U). Least squares (QR): QR + per rhs Q^T b (4mn - 2n^2: 2mn - n^2 MULT and ADD) and
the triangular solve. pinv: thin SVD + k DIV (1/s) + m*k MULT (scale U) + the [n,k] @ [k,m] product.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta, numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.matmul import matmul_cost
from op_formulas.registry import formula

aten = torch.ops.aten


def lu_cost(n: int) -> Cost:
    half, square = n * (n - 1) // 2, (n - 1) * n * (2 * n - 1) // 6
    return Cost(cmp=half, div=half, mult=square, add=square)


def triangular_solve_cost(n: int, rhs: int, unit: bool = False) -> Cost:
    half = n * (n - 1) // 2
    return Cost(mult=half, add=half, div=0 if unit else n) * rhs


def cholesky_cost(n: int) -> Cost:
    products = n * (n - 1) // 2 + n * (n - 1) * (n - 2) // 6
    return Cost(mult=products, add=products, div=n * (n - 1) // 2, sqrt=n)


def householder_qr_cost(m: int, n: int, form_q: bool) -> Cost:
    cost = Cost()
    for k in range(min(m, n)):
        lk, cols = m - k, n - k - 1
        cost += Cost(mult=lk, add=lk, sqrt=1, cmp=1, div=1)      # norm (l-1 ADD), v0 += sign*norm (1 ADD)
        cost += Cost(mult=2 * lk + 1, add=2 * lk - 1) * cols
        if form_q:
            cost += Cost(mult=2 * lk + 1, add=2 * lk - 1) * (min(m, n) - k)
    return cost


def flops(total: int) -> Cost:
    """A closed-form flop count split between MULT and ADD (the odd one to ADD)."""
    return Cost(mult=total // 2, add=total - total // 2)


def svd_flops(m: int, n: int, compute_uv: bool, full: bool) -> int:
    m, n = max(m, n), min(m, n)
    if not compute_uv:
        return 4 * m * n * n - 4 * n ** 3 // 3
    return 4 * m * m * n + 8 * m * n * n + 9 * n ** 3 if full else 6 * m * n * n + 11 * n ** 3


def _batch(a: TensorMeta) -> int:
    return numel(a.shape[:-2])


def _rhs(b: TensorMeta) -> int:
    return b.shape[-1] if len(b.shape) >= 2 else 1


@formula(aten.linalg_lu_factor_ex, aten.linalg_lu)
def lu_factor(a: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """LU with partial pivoting."""
    return lu_cost(a.shape[-1]) * _batch(a)


@formula(aten._linalg_solve_ex)
def solve(a: TensorMeta, b: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """LU, then a unit-lower and an upper triangular solve per right-hand side."""
    n = a.shape[-1]
    rhs = _rhs(b) if len(b.shape) == len(a.shape) else 1
    return (lu_cost(n) + triangular_solve_cost(n, rhs, unit=True) + triangular_solve_cost(n, rhs)) * _batch(a)


@formula(aten.linalg_lu_solve)
def lu_solve(lu: TensorMeta, pivots: TensorMeta, b: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """The two triangular solves of a given LU, per right-hand side."""
    n = lu.shape[-1]
    return (triangular_solve_cost(n, _rhs(b), unit=True) + triangular_solve_cost(n, _rhs(b))) * _batch(lu)


@formula(aten.linalg_inv_ex)
def inv(a: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """solve(A, I): LU and 2n triangular solves."""
    n = a.shape[-1]
    return (lu_cost(n) + triangular_solve_cost(n, n, unit=True) + triangular_solve_cost(n, n)) * _batch(a)


@formula(aten.linalg_solve_triangular)
def solve_triangular(a: TensorMeta, b: TensorMeta, *, result: Any, upper: bool = True, left: bool = True,
                     unitriangular: bool = False, **kwargs: Any) -> Cost:
    """One triangular solve per right-hand side (columns of B, or rows with left=False)."""
    n = a.shape[-1]
    rhs = b.shape[-1] if left else b.shape[-2]
    return triangular_solve_cost(n, rhs, unitriangular) * numel(first_meta(result).shape[:-2])


@formula(aten.linalg_cholesky_ex)
def cholesky(a: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Cholesky-Banachiewicz."""
    return cholesky_cost(a.shape[-1]) * _batch(a)


@formula(aten.cholesky_solve)
def cholesky_solve(b: TensorMeta, l_factor: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Two triangular solves per right-hand side with the given factor."""
    n = l_factor.shape[-1]
    return triangular_solve_cost(n, _rhs(b)) * 2 * numel(first_meta(result).shape[:-2])


@formula(aten._linalg_det)
def det(a: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """LU and the product of the diagonal."""
    n = a.shape[-1]
    return (lu_cost(n) + Cost(mult=max(n - 1, 0))) * _batch(a)


@formula(aten._linalg_slogdet)
def slogdet(a: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """LU, log |u_ii| summed, the sign from the signs of u_ii and the pivots."""
    n = a.shape[-1]
    return (lu_cost(n) + Cost(other=n, add=max(n - 1, 0), cmp=n)) * _batch(a)


@formula(aten.linalg_qr)
def qr(a: TensorMeta, mode: str = "reduced", *, result: Any, **kwargs: Any) -> Cost:
    """Householder QR; the reduced Q is formed unless mode is 'r'."""
    m, n = a.shape[-2], a.shape[-1]
    return householder_qr_cost(m, n, mode != "r") * _batch(a)


@formula(aten._linalg_eigh)
def eigh(a: TensorMeta, uplo: str = "L", compute_v: bool = True, *, result: Any, **kwargs: Any) -> Cost:
    """Symmetric eig: 4n^3/3 flops (values) or 9n^3 (with vectors)."""
    n = a.shape[-1]
    return flops(9 * n ** 3 if compute_v else 4 * n ** 3 // 3) * _batch(a)


@formula(aten.linalg_eig)
def eig(a: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """General eig with vectors: 25n^3 flops."""
    return flops(25 * a.shape[-1] ** 3) * _batch(a)


@formula(aten.linalg_eigvals)
def eigvals(a: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """General eig, values only: 10n^3 flops."""
    return flops(10 * a.shape[-1] ** 3) * _batch(a)


@formula(aten._linalg_svd)
def svd(a: TensorMeta, full_matrices: bool = False, compute_uv: bool = True, *, result: Any,
        **kwargs: Any) -> Cost:
    """Golub-Reinsch SVD (module docstring)."""
    return flops(svd_flops(a.shape[-2], a.shape[-1], compute_uv, full_matrices)) * _batch(a)


@formula(aten.linalg_lstsq)
def lstsq(a: TensorMeta, b: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """QR (R only), Q^T b and an upper triangular solve per right-hand side."""
    m, n = a.shape[-2], a.shape[-1]
    rhs = _rhs(b)
    qtb = Cost(mult=2 * m * n - n * n, add=2 * m * n - n * n) * rhs
    return (householder_qr_cost(m, n, False) + qtb + triangular_solve_cost(min(m, n), rhs)) * _batch(a)


@formula(aten.linalg_pinv)
def pinv(a: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Thin SVD, k = min(m, n) reciprocals, U scaled (m*k MULT), V @ (S^-1 U^T)."""
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    return (flops(svd_flops(m, n, True, False)) + Cost(div=k, mult=m * k) + matmul_cost(n, m, k)) * _batch(a)


MATRIX_EXP_DEGREE = 18


@formula(aten.linalg_matrix_exp)
def matrix_exp(a: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """Taylor series of degree 18 (torch's highest) by Horner's scheme, per n x n matrix:
    P = I + A/18, then P = I + (A @ P)/k for k = 17..1: 17 products (n^3 MULT, n^2(n-1) ADD),
    18 n^2 DIV and 18 n ADD (the identity). NB: torch picks a lower degree for small norms and
    adds squarings for large ones (values decide both); a product here has no MACs, as every
    factorisation of this module."""
    n, k = a.shape[-1], MATRIX_EXP_DEGREE
    return Cost(mult=(k - 1) * n ** 3, add=(k - 1) * n * n * (n - 1) + k * n, div=k * n * n) * _batch(a)
