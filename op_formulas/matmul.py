"""Contractions: mm, bmm, addmm, baddbmm, mv, dot and their relatives.

Rule (COUNTING.md): ``[M,K] @ [K,N]`` costs MULT = M*N*K, ADD = M*N*(K-1),
MACs = M*N*K. An added term (addmm, baddbmm with beta != 0) adds M*N ADD, and
M*N MULT for each of alpha, beta that is not 1.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


def matmul_cost(m: int, n: int, k: int, batch: int = 1) -> Cost:
    """``batch`` products of [m,k] @ [k,n]."""
    products = batch * m * n
    return Cost(mult=products * k, add=products * (k - 1) if k else 0, macs=products * k)


def added_term(outputs: int, alpha: Any, beta: Any) -> Cost:
    """beta * self + alpha * (product): the extra work beyond the product."""
    if beta == 0:
        return Cost(mult=outputs * int(alpha != 1))
    return Cost(add=outputs, mult=outputs * (int(alpha != 1) + int(beta != 1)))


@formula(aten.mm)
def mm(a: TensorMeta, b: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """[M,K] @ [K,N]."""
    (m, k), (_, n) = a.shape, b.shape
    return matmul_cost(m, n, k)


@formula(aten.bmm)
def bmm(a: TensorMeta, b: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """[B,M,K] @ [B,K,N]: mm x B."""
    (bs, m, k), n = a.shape, b.shape[2]
    return matmul_cost(m, n, k, bs)


@formula(aten.addmm, aten.addmm_)
def addmm(self: TensorMeta, a: TensorMeta, b: TensorMeta, *, result: Any,
          beta: Any = 1, alpha: Any = 1, **kwargs: Any) -> Cost:
    """beta*self + alpha*(a @ b), a [M,K], b [K,N]."""
    (m, k), n = a.shape, b.shape[1]
    return matmul_cost(m, n, k) + added_term(m * n, alpha, beta)


@formula(aten._addmm_activation)
def addmm_activation(self: TensorMeta, a: TensorMeta, b: TensorMeta, *, result: Any,
                     beta: Any = 1, alpha: Any = 1, use_gelu: bool = False, **kwargs: Any) -> Cost:
    """addmm followed by relu (1 CMP) or erf-gelu (3 MULT + 1 ADD + 1 OTHER) per output."""
    (m, k), n = a.shape, b.shape[1]
    act = Cost(mult=3, add=1, other=1) if use_gelu else Cost(cmp=1)
    return matmul_cost(m, n, k) + added_term(m * n, alpha, beta) + act * (m * n)


@formula(aten.baddbmm, aten.baddbmm_)
def baddbmm(self: TensorMeta, a: TensorMeta, b: TensorMeta, *, result: Any,
            beta: Any = 1, alpha: Any = 1, **kwargs: Any) -> Cost:
    """beta*self + alpha*(a @ b), a [B,M,K], b [B,K,N]."""
    (bs, m, k), n = a.shape, b.shape[2]
    return matmul_cost(m, n, k, bs) + added_term(bs * m * n, alpha, beta)


@formula(aten.addbmm, aten.addbmm_)
def addbmm(self: TensorMeta, a: TensorMeta, b: TensorMeta, *, result: Any,
           beta: Any = 1, alpha: Any = 1, **kwargs: Any) -> Cost:
    """beta*self + alpha*sum_b(a[b] @ b[b]): B products, (B-1)*M*N ADD to sum them."""
    (bs, m, k), n = a.shape, b.shape[2]
    return (matmul_cost(m, n, k, bs) + Cost(add=(bs - 1) * m * n)
            + added_term(m * n, alpha, beta))


@formula(aten.mv)
def mv(a: TensorMeta, v: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """[M,K] @ [K]: an mm with N = 1."""
    m, k = a.shape
    return matmul_cost(m, 1, k)


@formula(aten.addmv, aten.addmv_)
def addmv(self: TensorMeta, a: TensorMeta, v: TensorMeta, *, result: Any,
          beta: Any = 1, alpha: Any = 1, **kwargs: Any) -> Cost:
    """beta*self + alpha*(a @ v)."""
    m, k = a.shape
    return matmul_cost(m, 1, k) + added_term(m, alpha, beta)


@formula(aten.dot, aten.vdot)
def dot(a: TensorMeta, b: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """[K] . [K]: K MULT, K-1 ADD, K MACs."""
    return matmul_cost(1, 1, a.shape[0])


@formula(aten.outer, aten.ger)
def outer(a: TensorMeta, b: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """[M] x [N]: M*N MULT (a contraction of length 1: M*N MACs)."""
    return matmul_cost(a.shape[0], b.shape[0], 1)


@formula(aten._int_mm)
def int_mm(a: TensorMeta, b: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """int8 [M,K] @ [K,N]: same counts as mm."""
    (m, k), n = a.shape, b.shape[1]
    return matmul_cost(m, n, k)


def batch_of(shape: tuple[int, ...]) -> int:
    return numel(shape[:-2])


@formula(aten._cdist_forward)
def cdist(x1: TensorMeta, x2: TensorMeta, p: float, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Distances between P rows of x1 and R rows of x2 of M features, per pair: M ADD (the
    differences), then p=2: M MULT + (M-1) ADD + 1 SQRT; p=1: M CMP (abs) + (M-1) ADD;
    p=inf: M CMP (abs) + (M-1) CMP; p=0: M CMP (!= 0) + (M-1) ADD; other p: M CMP (abs) +
    M OTHER (pow) + (M-1) ADD + 1 OTHER (the root)."""
    pairs = numel(result.shape)
    m = x1.shape[-1]
    diff = Cost(add=m)
    if p == 2:
        unit = Cost(mult=m, add=m - 1, sqrt=1)
    elif p == 1 or p == 0:
        unit = Cost(cmp=m, add=m - 1)
    elif p == float("inf"):
        unit = Cost(cmp=2 * m - 1)
    else:
        unit = Cost(cmp=m, other=m + 1, add=m - 1)
    return (diff + unit) * pairs


@formula(aten._cdist_backward)
def cdist_backward(grad: TensorMeta, x1: TensorMeta, x2: TensorMeta, p: float, dist: TensorMeta, *,
                   result: Any, **kwargs: Any) -> Cost:
    """p=2 reference: per pair g / d (1 DIV, 1 CMP for d == 0); per pair and feature
    (x1 - x2) (1 ADD), times it (1 MULT), summed over x2's rows (1 ADD). Other p count the same
    plus 1 OTHER per pair and feature (|diff|^(p-1))."""
    pairs, m = numel(grad.shape), x1.shape[-1]
    per_feature = Cost(add=2, mult=1, other=int(p != 2))
    return Cost(div=1, cmp=1) * pairs + per_feature * (pairs * m)
