"""Reductions, scans, softmax and sorting.

Rules (COUNTING.md), for each independent reduction of n elements (a "row"):
sum n-1 ADD; mean n-1 ADD + 1 DIV; prod n-1 MULT; max/min/argmax n-1 CMP;
var n-1 ADD + 1 DIV (mean) + n ADD + n MULT + n-1 ADD + 1 DIV (std: +1 SQRT);
softmax (n-1) CMP + n ADD + n EXP + (n-1) ADD + n DIV;
log_softmax (n-1) CMP + n ADD + n EXP + (n-1) ADD + 1 OTHER + n ADD;
cumsum/cumprod n-1 ADD/MULT; sort n*ceil(log2 n) CMP; topk(k) n*ceil(log2 max(k,2)) CMP.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from op_formulas.args import arg, first_meta, reduction_size
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import Formula, formula

aten = torch.ops.aten


def row_reduction(per_row: Any) -> Formula:
    """Formula from ``per_row(n) -> Cost`` over the dims named by the ``dim`` argument."""

    def count(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
        dim = arg(args, kwargs, 0, "dim")
        if isinstance(dim, bool) or not isinstance(dim, (int, list, tuple, type(None))):
            dim = None  # e.g. sum(x, dtype=...) passed positionally: full reduction
        rows, n = reduction_size(x.shape, dim)
        return per_row(n) * rows

    count.__doc__ = per_row.__doc__
    return count


def sum_row(n: int) -> Cost:
    """n-1 ADD."""
    return Cost(add=max(n - 1, 0))


def mean_row(n: int) -> Cost:
    """n-1 ADD + 1 DIV."""
    return Cost(add=max(n - 1, 0), div=1)


def var_row(n: int) -> Cost:
    """mean, n ADD (x - mean), n MULT (square), n-1 ADD (sum), 1 DIV (by n - correction)."""
    return mean_row(n) + Cost(add=n + max(n - 1, 0), mult=n, div=1)


def softmax_row(n: int) -> Cost:
    """max: n-1 CMP; x - max: n ADD; exp: n EXP; sum: n-1 ADD; normalise: n DIV."""
    return Cost(cmp=max(n - 1, 0), add=n + max(n - 1, 0), exp=n, div=n)


def log_softmax_row(n: int) -> Cost:
    """max, x - max, exp, sum as softmax; log of the sum: 1 OTHER; subtract: n ADD."""
    return Cost(cmp=max(n - 1, 0), add=2 * n + max(n - 1, 0), exp=n, other=1)


def logsumexp_row(n: int) -> Cost:
    """max: n-1 CMP; x - max: n ADD; exp: n EXP; sum: n-1 ADD; log: 1 OTHER; + max: 1 ADD."""
    return Cost(cmp=max(n - 1, 0), add=n + max(n - 1, 0) + 1, exp=n, other=1)


def norm_row(p: Any) -> Any:
    """p-norm of n elements; p=2: n MULT + n-1 ADD + 1 SQRT; p=1: n CMP (abs) + n-1 ADD;
    inf: n CMP (abs) + n-1 CMP; other p: n CMP (abs) + 2n OTHER (pow) + n-1 ADD + 1 OTHER."""

    def row(n: int) -> Cost:
        if p == 2:
            return Cost(mult=n, add=max(n - 1, 0), sqrt=1)
        if p == 1:
            return Cost(cmp=n, add=max(n - 1, 0))
        if p in (math.inf, -math.inf):
            return Cost(cmp=n + max(n - 1, 0))
        return Cost(cmp=n, other=n + 1, add=max(n - 1, 0))

    return row


def prod_row(n: int) -> Cost:
    """n-1 MULT."""
    return Cost(mult=max(n - 1, 0))


def compare_row(n: int) -> Cost:
    """n-1 CMP."""
    return Cost(cmp=max(n - 1, 0))


def std_row(n: int) -> Cost:
    """var, then 1 SQRT."""
    return var_row(n) + Cost(sqrt=1)


formula(aten.sum, aten.nansum)(row_reduction(sum_row))
formula(aten.mean, aten.nanmean)(row_reduction(mean_row))
formula(aten.prod)(row_reduction(prod_row))
formula(aten.amax, aten.amin, aten.argmax, aten.argmin, aten.any, aten.all, aten.aminmax)(
    row_reduction(compare_row))
formula(aten.logsumexp)(row_reduction(logsumexp_row))


@formula(aten.max, aten.min)
def max_min(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """max(x) / max(x, dim): n-1 CMP per row; max(x, y) (binary): 1 CMP per element."""
    other = args[0] if args else None
    if isinstance(other, TensorMeta):
        return Cost(cmp=1) * max(x.numel, other.numel)
    return row_reduction(compare_row)(x, *args, result=result, **kwargs)


formula(aten.var, aten.var_mean)(row_reduction(var_row))
formula(aten.std, aten.std_mean)(row_reduction(std_row))


@formula(aten.linalg_vector_norm, aten.norm)
def vector_norm(x: TensorMeta, ord: Any = 2, dim: Any = None, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """See `norm_row`."""
    p = kwargs.get("ord", kwargs.get("p", ord))
    p = 2 if p is None else p
    rows, n = reduction_size(x.shape, kwargs.get("dim", dim))
    return norm_row(p)(n) * rows


@formula(aten._softmax, aten._safe_softmax, aten.softmax)
def softmax(x: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Per row of n along ``dim``: see `softmax_row`. _safe_softmax (rows that are all
    -inf give zeros) counts the same."""
    rows, n = reduction_size(x.shape, dim)
    return softmax_row(n) * rows


@formula(aten._log_softmax, aten.log_softmax)
def log_softmax(x: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Per row of n along ``dim``: see `log_softmax_row`."""
    rows, n = reduction_size(x.shape, dim)
    return log_softmax_row(n) * rows


@formula(aten._softmax_backward_data)
def softmax_backward(grad: TensorMeta, y: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """y * (g - sum(g*y)): per row 2n MULT + (n-1) ADD (sum) + n ADD."""
    rows, n = reduction_size(y.shape, dim)
    return Cost(mult=2 * n, add=n + max(n - 1, 0)) * rows


@formula(aten._log_softmax_backward_data)
def log_softmax_backward(grad: TensorMeta, y: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """g - exp(y) * sum(g): per row (n-1) ADD + n EXP + n MULT + n ADD."""
    rows, n = reduction_size(y.shape, dim)
    return Cost(add=n + max(n - 1, 0), exp=n, mult=n) * rows


@formula(aten.cumsum, aten.cumsum_)
def cumsum(x: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """n-1 ADD per row."""
    rows, n = reduction_size(x.shape, dim)
    return Cost(add=max(n - 1, 0)) * rows


@formula(aten.cumprod, aten.cumprod_)
def cumprod(x: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """n-1 MULT per row."""
    rows, n = reduction_size(x.shape, dim)
    return Cost(mult=max(n - 1, 0)) * rows


@formula(aten.cummax, aten.cummin)
def cummax(x: TensorMeta, dim: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """n-1 CMP per row."""
    rows, n = reduction_size(x.shape, dim)
    return Cost(cmp=max(n - 1, 0)) * rows


def log2_ceil(n: int) -> int:
    return max(n - 1, 0).bit_length()


@formula(aten.sort, aten.argsort)
def sort(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """n * ceil(log2 n) CMP per row (a comparison sort)."""
    dim = kwargs.get("dim", -1)
    for a in args:
        if isinstance(a, int) and not isinstance(a, bool):
            dim = a
            break
    rows, n = reduction_size(x.shape, dim) if x.shape else (1, 1)
    return Cost(cmp=n * log2_ceil(n)) * rows


@formula(aten.topk)
def topk(x: TensorMeta, k: int, dim: int = -1, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """n * ceil(log2 max(k, 2)) CMP per row (a heap of size k)."""
    rows, n = reduction_size(x.shape, kwargs.get("dim", dim)) if x.shape else (1, 1)
    return Cost(cmp=n * log2_ceil(max(k, 2))) * rows


def binary_search(boundaries: TensorMeta, result: Any) -> Cost:
    """Binary search of each value among n sorted boundaries: ceil(log2(n + 1)) CMP per value."""
    n = boundaries.shape[-1] if boundaries.shape else 0
    return Cost(cmp=n.bit_length()) * first_meta(result).numel


@formula(aten.bucketize)
def bucketize(values: Any, boundaries: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """See `binary_search`."""
    return binary_search(boundaries, result)


@formula(aten.searchsorted)
def searchsorted(sorted_sequence: TensorMeta, values: Any, *, result: Any, **kwargs: Any) -> Cost:
    """See `binary_search`."""
    return binary_search(sorted_sequence, result)


def _order_statistic(extra: int, what: str) -> Formula:
    def count(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
        dim = next((a for a in args if isinstance(a, int) and not isinstance(a, bool)), kwargs.get("dim"))
        if what == "kthvalue":              # kthvalue(x, k, dim): the first int is k
            ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
            dim = ints[1] if len(ints) > 1 else kwargs.get("dim", -1)
        rows, n = reduction_size(x.shape, dim) if x.shape and dim is not None else (1, x.numel)
        sort = n * math.ceil(math.log2(n)) if n > 1 else 0
        return Cost(cmp=(sort + extra * max(n - 1, 0)) * rows)

    count.__doc__ = (f"{what}: sort each row of n (n*ceil(log2 n) CMP, the sort rule) and pick"
                     + (f", + {extra}*(n-1) CMP" if extra else "") + "; no dim: one row of all elements.")
    return count


# nanmedian tests neighbours for nan while picking, mode counts runs of equal values: n-1 CMP each
for _packet, _extra in ((aten.median, 0), (aten.kthvalue, 0), (aten.nanmedian, 1), (aten.mode, 1)):
    formula(_packet)(_order_statistic(_extra, str(_packet).split(".")[-1]))


@formula(aten.count_nonzero)
def count_nonzero(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """1 CMP per element (!= 0) and n-1 ADD per output (the count)."""
    out = first_meta(result).numel if isinstance(result, TensorMeta) else 1
    return Cost(cmp=x.numel, add=max(x.numel - out, 0))


@formula(aten.dist)
def dist(a: TensorMeta, b: TensorMeta, p: Any = 2, *, result: Any, **kwargs: Any) -> Cost:
    """||a - b||_p over n broadcast elements: n ADD (differences), then p=2: n MULT + (n-1) ADD +
    1 SQRT; other p: n CMP (abs) + n OTHER (pow) + (n-1) ADD + 1 OTHER (root)."""
    n = max(a.numel, b.numel)
    if p == 2:
        return Cost(add=2 * n - 1, mult=n, sqrt=1)
    return Cost(add=2 * n - 1, cmp=n, other=n + 1)
