"""The PrIM workloads (Gomez-Luna et al., arXiv 2105.03814; github.com/CMU-SAFARI/prim-benchmarks) that
are PyTorch ops or small PyTorch programs, written as modules that do on a whole tensor what the
DPU programs do on their slices, for scripts/validate_pim.py.

Each `Workload` says how to build its inputs (meta tensors: counting needs shapes, not values),
the bytes the host sends in and reads back, and whether the read-back is serial (PrIM reads SEL's and
UNI's outputs one DPU after another, their sizes differing). Element types are PrIM's defaults
(Makefile TYPE / support/common.h): VA int32, RED/SCAN int64, SEL/UNI uint64 (int64 here),
GEMV uint32 (int32 here: the same 32-bit ALU), TRNS int64.

Known gaps between the module and the DPU program (each a source of error the table shows):
- SEL and UNI compact the kept elements; a meta tensor cannot hold a data-dependent size, so the
  modules write every position (torch.where) and the read-back counts the half that PrIM's inputs
  keep (SEL: A[i] = i + 1, odd values kept; UNI: A[i] = i or i + 1 by parity, one of each pair kept).
- SCAN-SSA and SCAN-RSS run per DPU slice (a [dpus, n / dpus] view): the scan of the slices' sums
  runs on the host in PrIM; here it is a small op on the units. SCAN-SSA's two DPU kernels stay two
  passes over the bank (a copy_ of the slices' last values sits between them); SCAN-RSS's reduce
  and scan kernels are fused into one pass by the compiled runtime (its DPU time is its emulated
  compute, which dominates either way).
- TRNS transposes in place on the DPUs with a mutex per tile; the module is one contiguous copy of
  the transposed view (bytes only): the DPU's tile bookkeeping is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


class VectorAdd(torch.nn.Module):
    """VA: c = a + b."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class Reduction(torch.nn.Module):
    """RED: the sum of every element (each DPU sums its slice; the host adds the partial sums)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum()


class ScanScanAdd(torch.nn.Module):
    """SCAN-SSA: scan each DPU's slice, scan the slices' last values, add each slice's offset."""

    def __init__(self, dpus: int) -> None:
        super().__init__()
        self.dpus = dpus

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cumsum(x.view(self.dpus, -1), 1)                   # (dpus, n / dpus): DPU kernel 1
        # the host copies each slice's last value out between the two kernels (PrIM's Inter-DPU step);
        # a copy_ is never fused, so y is written to the bank and read back, as the DPUs do
        last = y.new_empty(self.dpus).copy_(y[:, -1])                # (dpus,)
        return (y + (torch.cumsum(last, 0) - last)[:, None]).view(-1)   # DPU kernel 2: add the offsets


class ReduceScanScan(torch.nn.Module):
    """SCAN-RSS: sum each DPU's slice, scan the sums, scan each slice from its offset."""

    def __init__(self, dpus: int) -> None:
        super().__init__()
        self.dpus = dpus

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slices = x.view(self.dpus, -1)                               # (dpus, n / dpus)
        sums = slices.sum(1)
        return (torch.cumsum(slices, 1) + (torch.cumsum(sums, 0) - sums)[:, None]).view(-1)


class Select(torch.nn.Module):
    """SEL: keep the elements whose predicate (x % 2 == 0) is false; x % 2 of an unsigned integer is
    x & 1, as the DPU compiler emits it (a remainder would count as an emulated division)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.bitwise_and(x, 1).ne(0), x, 0)


class Unique(torch.nn.Module):
    """UNI: keep each element that differs from the one before it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x[1:].ne(x[:-1]), x[1:], 0)


class MatrixVector(torch.nn.Module):
    """GEMV: y = A x (each DPU holds a band of A's rows and a copy of x)."""

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return a @ x


class Transpose(torch.nn.Module):
    """TRNS: the transpose of a (rows, cols) matrix, written out."""

    def __init__(self, rows: int, cols: int) -> None:
        super().__init__()
        self.rows, self.cols = rows, cols

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(self.rows, self.cols).t().contiguous()


@dataclass(frozen=True)
class Workload:
    """A PrIM workload at one size: its module, its inputs, the bytes in and out."""

    name: str
    family: str
    module: torch.nn.Module
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    bytes_in: int
    bytes_out: int
    serial_out: bool = False


def _meta(n: int, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.empty(shape or (n,), dtype=dtype, device="meta")


def workload(name: str, dpus: int, size: dict[str, int]) -> Workload:
    """The workload ``name`` ("VA", "RED", "SCAN-SSA", "SCAN-RSS", "SEL", "UNI", "GEMV", "TRNS") at
    ``size`` (``n`` elements, or GEMV's ``m`` and ``n``, or TRNS's ``rows`` and ``cols``) on ``dpus``."""
    n = size.get("n", 0)
    i32, i64 = torch.int32, torch.int64
    table = {
        "VA": lambda: Workload("VA", "streaming", VectorAdd(), lambda: (_meta(n, i32), _meta(n, i32)), 8 * n, 4 * n),
        "RED": lambda: Workload("RED", "reduction", Reduction(), lambda: (_meta(n, i64),), 8 * n, 8),
        "SCAN-SSA": lambda: Workload("SCAN-SSA", "scan", ScanScanAdd(dpus), lambda: (_meta(n, i64),), 8 * n, 8 * n),
        "SCAN-RSS": lambda: Workload("SCAN-RSS", "scan", ReduceScanScan(dpus), lambda: (_meta(n, i64),), 8 * n,
                                     8 * n),
        "SEL": lambda: Workload("SEL", "select/unique", Select(), lambda: (_meta(n, i64),), 8 * n, 8 * n // 2, True),
        "UNI": lambda: Workload("UNI", "select/unique", Unique(), lambda: (_meta(n, i64),), 8 * n, 8 * n // 2, True),
        "GEMV": lambda: Workload("GEMV", "matrix-vector", MatrixVector(),
                                 lambda: (_meta(0, i32, size["m"], size["n"]), _meta(0, i32, size["n"], 1)),
                                 4 * size["m"] * size["n"] + 4 * size["n"] * dpus, 4 * size["m"]),
        "TRNS": lambda: Workload("TRNS", "transpose", Transpose(size["rows"], size["cols"]),
                                 lambda: (_meta(size["rows"] * size["cols"], i64),),
                                 8 * size["rows"] * size["cols"], 8 * size["rows"] * size["cols"]),
    }
    if name not in table:
        raise ValueError(f"unknown PrIM workload {name!r}; known: {', '.join(table)}")
    return table[name]()
