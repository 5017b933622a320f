"""The cost of one aten op call: arithmetic counts, MACs and memory traffic.

Units are raw: element operations as Python ints, bytes as ints. Rules live in
COUNTING.md (restated in docs/counting.md); every formula returns one `Cost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

#: The seven arithmetic categories, in report order.
CATEGORIES = ("add", "mult", "div", "sqrt", "exp", "cmp", "other")


class TensorMeta(NamedTuple):
    """What a formula may know of a tensor: its shape and dtype, never its data."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


class UnsupportedCall(Exception):
    """Raised by a formula for a call it cannot count (an unsupported mode or layout).
    The counter records the call as unknown, with this message as the reason."""


class SparseShapeError(UnsupportedCall):
    """A formula without a sparse rule asked for the dense shape of a sparse tensor."""


class SparseMeta:
    """What a formula may know of a sparse tensor (COO, CSR, CSC, BSR, BSC): its dense shape, its
    dtype, its layout, the elements it stores and their bytes (values plus indices).

    ``numel`` and ``nbytes`` are the *stored* elements and bytes, so a formula that counts per
    output element counts the stored ones; ``shape`` raises `SparseShapeError` (an
    UnsupportedCall): a formula that needs the dense shape has no sparse rule, and the counter
    reports the call as unknown rather than counting the dense arithmetic. Sparse rules read
    ``dense_shape``."""

    __slots__ = ("dense_shape", "dtype", "layout", "nnz", "numel", "nbytes")

    def __init__(self, dense_shape: tuple[int, ...], dtype: torch.dtype, layout: str, nnz: int,
                 numel: int, nbytes: int) -> None:
        self.dense_shape, self.dtype, self.layout = dense_shape, dtype, layout
        self.nnz, self.numel, self.nbytes = nnz, numel, nbytes

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def shape(self) -> tuple[int, ...]:
        raise SparseShapeError(f"sparse ({self.layout}) input: this op has no sparse rule")

    def __iter__(self) -> None:
        raise SparseShapeError(f"sparse ({self.layout}) input: this op has no sparse rule")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SparseMeta) and all(
            getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.dense_shape, self.layout, self.nnz))

    def __repr__(self) -> str:
        return f"SparseMeta({self.dense_shape}, {self.dtype}, {self.layout}, nnz={self.nnz})"


def T(*shape: int, dtype: torch.dtype = torch.float32) -> TensorMeta:
    """Shorthand for tests and docs: ``T(2, 3)`` is a float32 tensor of shape (2, 3)."""
    return TensorMeta(tuple(shape), dtype)


class Arithmetic:
    """FLOPs and OPS of anything that carries the seven category fields (Cost, Totals)."""

    __slots__ = ()

    @property
    def flops(self) -> int:
        """FLOPs = ADD + MULT (the layer-level LLM profilers' definition)."""
        return self.add + self.mult  # type: ignore[attr-defined]

    @property
    def ops(self) -> int:
        """All seven categories summed."""
        return sum(getattr(self, c) for c in CATEGORIES)


@dataclass(frozen=True, slots=True)
class Counts(Arithmetic):
    """The seven category counts and the MACs: the leading fields of `Cost` and of the records'
    `Totals`, declared once."""

    add: int = 0
    mult: int = 0
    div: int = 0
    sqrt: int = 0
    exp: int = 0
    cmp: int = 0
    other: int = 0
    macs: int = 0


@dataclass(frozen=True, slots=True)
class Cost(Counts):
    """Counts of one op call. ``bytes_*`` of None mean "use the generic rule":
    every tensor input is read once, every tensor output written once. ``comm_bytes`` are the
    bytes this process sends to other processes (collectives)."""

    bytes_read: int | None = None
    bytes_written: int | None = None
    comm_bytes: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(a + b for a, b in zip(self._counts(), other._counts())),
                    bytes_read=_add_opt(self.bytes_read, other.bytes_read),
                    bytes_written=_add_opt(self.bytes_written, other.bytes_written),
                    comm_bytes=self.comm_bytes + other.comm_bytes)

    def __mul__(self, k: int) -> Cost:
        """Scale the arithmetic by an integer factor (rows, batch, steps)."""
        return Cost(self.add * k, self.mult * k, self.div * k, self.sqrt * k, self.exp * k, self.cmp * k,
                    self.other * k, self.macs * k, self.bytes_read, self.bytes_written, self.comm_bytes)

    __rmul__ = __mul__

    def _counts(self) -> tuple[int, ...]:
        return (self.add, self.mult, self.div, self.sqrt, self.exp, self.cmp,
                self.other, self.macs)

    def with_bytes(self, read: int | None = None, written: int | None = None) -> Cost:
        """This cost with its bytes set (built field by field: this runs once per counted op)."""
        return Cost(self.add, self.mult, self.div, self.sqrt, self.exp, self.cmp, self.other, self.macs,
                    read, written, self.comm_bytes)


def _add_opt(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


ZERO = Cost()
