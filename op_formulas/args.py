"""Small helpers that formulas share to read their arguments (shapes, scalars)."""

from __future__ import annotations

from typing import Any, Sequence

from op_formulas.cost import SparseMeta, TensorMeta


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def first_meta(value: Any) -> TensorMeta:
    """The first TensorMeta in ``value`` (a TensorMeta or a tuple/list of them); a sparse
    result's `SparseMeta` (its numel and nbytes are the stored elements) stands in for one."""
    if isinstance(value, (TensorMeta, SparseMeta)):
        return value  # type: ignore[return-value]
    for v in value:
        if isinstance(v, TensorMeta):
            return v
    raise TypeError(f"expected a tensor result, got {value!r}")


def arg(args: Sequence[Any], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` whether passed by keyword or at position ``index``."""
    if name in kwargs:
        return kwargs[name]
    if len(args) > index:
        return args[index]
    return default


def reduced_dims(shape: Sequence[int], dim: Any) -> list[int]:
    """Normalised dims a reduction runs over; None or [] means all dims."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(len(shape)))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [d % len(shape) if len(shape) else 0 for d in dims]


def reduction_size(shape: Sequence[int], dim: Any) -> tuple[int, int]:
    """(rows, n): how many independent reductions of n elements each."""
    dims = reduced_dims(shape, dim)
    n = numel([shape[d] for d in dims]) if shape else 1
    total = numel(shape)
    return (total // n if n else 0), n
