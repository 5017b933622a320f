"""Sparse tensors (COO, CSR, CSC, BSR, BSC): the bytes they store, the arithmetic of their stored
elements.

A sparse argument reaches a formula as a `SparseMeta`: ``numel`` and ``nbytes`` are its stored
elements (the values: nnz, times the block or dense-dim size) and the bytes of its values and
indices; asking for its ``shape`` raises, so an op without a sparse rule is reported unknown
rather than counted densely. Rules:

- element-wise ops (sin, mul by a scalar, relu, ..., sparse + sparse): their per-element cost on
  every stored element of the (sparse) output; sparse + dense (a dense output): on every stored
  element of the sparse operand (the dense rest is copied).
- sparse [M,K] (s stored) @ dense [K,N]: s*N MULT, s*N ADD (each product accumulated into the
  zeroed output), s*N MACs; dense [M,K] @ sparse [K,N] (s stored): M*s of each; a vector
  (mv): s of each. addmm / _sparse_addmm / addmv add the dense term by the dense rule (M*N ADD,
  +M*N MULT per alpha, beta != 1). sparse @ sparse: its products depend on the index pattern:
  unknown.
- sum of every stored element (``sum``, ``_sparse_sum``): s - 1 ADD (over dims: unknown).
- coalesce (s stored in, s' out): sort s*ceil(log2 s) CMP, sum duplicates s - s' ADD.
- dense -> sparse conversion: one test against zero per dense element (CMP); sparse -> dense and
  layout changes, constructors: data movement (0 arithmetic, the bytes stored).
- values, indices, crow/col/ccol/row_indices, _nnz and friends: views and metadata (zero-cost).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from op_formulas.cost import Cost, SparseMeta, TensorMeta
from op_formulas.matmul import added_term
from op_formulas.registry import Formula, UnsupportedCall, formula, wrap, zero_cost

aten = torch.ops.aten

zero_cost(aten.values, aten._values, aten.indices, aten._indices, aten.crow_indices, aten.col_indices,
          aten.ccol_indices, aten.row_indices, aten._nnz, aten.sparse_dim, aten.dense_dim, aten._dimI,
          aten._dimV, aten._coalesced)


def _sparse(*values: Any) -> bool:
    return any(isinstance(v, SparseMeta) for v in values)


def products(a: Any, b: Any) -> tuple[int, int]:
    """(products, dense outputs) of a @ b with one sparse operand (module docstring)."""
    if isinstance(a, SparseMeta) and isinstance(b, SparseMeta):
        raise UnsupportedCall("sparse @ sparse: the products depend on the index pattern")
    if isinstance(a, SparseMeta):
        n = b.shape[-1] if len(b.shape) > 1 else 1
        return a.numel * n, a.dense_shape[0] * n
    m = a.shape[0] if len(a.shape) > 1 else 1
    return m * b.numel, m * b.dense_shape[-1]


def _product_cost(p: int) -> Cost:
    return Cost(mult=p, add=p, macs=p)


def sparse_mm(a: Any, b: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """mm / mv with a sparse operand."""
    return _product_cost(products(a, b)[0])


def sparse_addmm(self: Any, a: Any, b: Any, *args: Any, result: Any, beta: Any = 1, alpha: Any = 1,
                 **kwargs: Any) -> Cost:
    """beta*self + alpha*(a @ b) with a sparse a or b."""
    p, outputs = products(a, b)
    return _product_cost(p) + added_term(outputs, alpha, beta)


def elementwise_on_stored(fn: Formula) -> Formula:
    """A per-element formula that, with a sparse operand and a dense output (sparse + dense),
    counts only the sparse operand's stored elements."""

    @functools.wraps(fn)
    def count(*args: Any, result: Any, **kwargs: Any) -> Cost:
        sparse = [a for a in args if isinstance(a, SparseMeta)]
        if sparse and isinstance(result, TensorMeta):
            stored = max(s.numel for s in sparse)
            return fn(*args, result=TensorMeta((stored,), result.dtype), **kwargs)
        return fn(*args, result=result, **kwargs)
    return count


def either(sparse_rule: Formula) -> Any:
    """Wrapper for `registry.wrap`: ``sparse_rule`` when an argument is sparse, else the formula."""

    def wrapper(fn: Formula) -> Formula:
        @functools.wraps(fn)
        def count(*args: Any, result: Any, **kwargs: Any) -> Cost:
            if _sparse(*args, *kwargs.values()):
                return sparse_rule(*args, result=result, **kwargs)
            return fn(*args, result=result, **kwargs)
        return count
    return wrapper


for _p in (aten.mm, aten.mv):
    wrap(_p, either(sparse_mm))
for _p in (aten.addmm, aten.addmv):
    wrap(_p, either(sparse_addmm))
for _p in (aten.add, aten.add_, aten.sub, aten.sub_):
    wrap(_p, elementwise_on_stored)
formula(aten._sparse_addmm, aten.sspaddmm)(sparse_addmm)
formula(aten._sparse_mm, aten.smm)(sparse_mm)


@formula(aten._sparse_sum)
def sparse_sum(x: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Sum of every stored element: s - 1 ADD."""
    if any(not isinstance(a, torch.dtype) for a in args) or kwargs.get("dim") is not None:
        raise UnsupportedCall("sparse sum over dims: no rule (the rows depend on the index pattern)")
    return Cost(add=max(x.numel - 1, 0))


wrap(aten.sum, either(sparse_sum))


@formula(aten.coalesce, aten._coalesce)
def coalesce(x: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Sort the s stored indices (s*ceil(log2 s) CMP), sum duplicates (s - s' ADD)."""
    s, out = x.nnz, result.nnz if isinstance(result, SparseMeta) else x.nnz
    return Cost(cmp=s * math.ceil(math.log2(s)) if s > 1 else 0, add=max(s - out, 0))


@formula(aten._to_sparse, aten._to_sparse_csr, aten._to_sparse_csc, aten._to_sparse_bsr, aten._to_sparse_bsc)
def to_sparse(x: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Dense -> sparse: one test against zero per element; sparse -> sparse: data movement."""
    return Cost() if isinstance(x, SparseMeta) else Cost(cmp=x.numel)


@formula(aten._to_dense, aten._sparse_coo_tensor_with_dims_and_tensors, aten._sparse_coo_tensor_unsafe,
         aten._sparse_csr_tensor_unsafe, aten._sparse_compressed_tensor_unsafe, aten.sparse_compressed_tensor,
         aten.copy_sparse_to_sparse_, aten.sparse_mask, aten._sparse_mask_projection)
def sparse_movement(*args: Any, result: Any, **kwargs: Any) -> Cost:
    """Constructors, sparse -> dense, and sparse_mask (a dense tensor's values gathered at a
    sparse tensor's indices): data movement, no arithmetic."""
    return Cost()

