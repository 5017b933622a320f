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
- TRNS (its PrIM program, github.com/CMU-SAFARI/prim-benchmarks TRNS/dpu/task.c and host/app.c, as
  vPIM@8f23ce2b apps/vPrIM/TRNS runs it) transposes an (M_ m) x (N_ n) matrix: each DPU takes one
  column tile of n columns, and while tiles remain the host runs another round on the DPUs still
  needed (`Workload.rounds`: N_ = 64 tiles on 60 DPUs is a round of 60 and a round of 4). Per round
  each DPU transposes its (M_ m) x n block in two kernels: step 2 moves every element of each m x n
  tile to (i m) - (m n - 1) floor(i / n), an index computed per element in 32-bit integers (two
  emulated multiplies, an emulated division, a subtraction: counted), then writes the tile back
  in place (a copy_); step 3 follows the cycles of the tile permutation, reading and writing every
  m-element tile once (a copy_). The two kernels are two passes over the bank: copy_ is not fused
  by the compiled runtime, as the DPU cannot fuse them either. Not counted: step 3's done flags (an 8-byte read and write under a mutex per
  tile), and the host's step-1 rearrangement of the input into per-DPU buffers (vPIM's host copies
  every n-element piece into a fresh buffer before one parallel transfer; that copy is host time
  inside the measured CPU-DPU part, and no fit row measures it).
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
    """TRNS, one round on ``dpus`` DPUs, each holding an (M_ m) x n block (module docstring)."""

    def __init__(self, dpus: int, tiles: int, m: int, n: int) -> None:
        super().__init__()
        self.dpus, self.tiles, self.m, self.n = dpus, tiles, m, n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d, tiles, m, n = self.dpus, self.tiles, self.m, self.n
        # step 2: each element's place in its transposed tile, computed per element on the DPU
        # (a meta tensor carries no values, so the index only charges its arithmetic) ...
        i = torch.arange(m * n, dtype=torch.int32, device=x.device).expand(d, tiles, m * n)
        _ = i * m - (m * n - 1) * torch.div(i, n, rounding_mode="floor")
        # ... and every tile written back in place, transposed: a kernel's pass over the bank
        x.view(d, tiles, n, m).copy_(x.view(d, tiles, m, n).transpose(2, 3))
        # step 3, the second kernel: every m-element tile moved once, to its place in the block
        x.view(d, n, tiles, m).copy_(x.view(d, tiles, n, m).transpose(1, 2))
        return x


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
    rounds: tuple[int, ...] = ()      # DPUs of each round the host runs in turn (TRNS); () = one round
    size: dict[str, int] | None = None


def _meta(n: int, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.empty(shape or (n,), dtype=dtype, device="meta")


def workload(name: str, dpus: int, size: dict[str, int]) -> Workload:
    """The workload ``name`` ("VA", "RED", "SCAN-SSA", "SCAN-RSS", "SEL", "UNI", "GEMV", "TRNS") at
    ``size`` (``n`` elements, or GEMV's ``m`` and ``n``, or TRNS's tiles ``M_``, ``m``, ``N_``, ``n``)
    on ``dpus``; a TRNS whose N_ column tiles outnumber the DPUs is described by its first round,
    its ``rounds`` listing every round's DPUs (`round_workloads`)."""
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
        "TRNS": lambda: _transpose(dpus, size),
    }
    if name not in table:
        raise ValueError(f"unknown PrIM workload {name!r}; known: {', '.join(table)}")
    return table[name]()


def _transpose(dpus: int, size: dict[str, int]) -> Workload:
    """TRNS's first round on min(dpus, N_) DPUs; ``rounds``: the DPUs of every round, the last
    taking the tiles left (PrIM's host loop ``while (curr_dpu < N_)``)."""
    tiles, m, columns, n = size["M_"], size["m"], size["N_"], size["n"]
    rounds = tuple(min(dpus, columns - k) for k in range(0, columns, dpus))
    d = rounds[0]
    block = tiles * m * n                      # elements of one DPU's column tile
    return Workload("TRNS", "transpose", Transpose(d, tiles, m, n), lambda: (_meta(d * block, torch.int64),),
                    8 * d * block, 8 * d * block, rounds=rounds, size=dict(size))


def round_workloads(w: Workload, dpus: int) -> list[tuple[int, Workload]]:
    """(DPUs, workload) of each round of ``w`` (built for ``dpus`` DPUs): itself on ``dpus`` when it
    runs in one round."""
    if len(w.rounds) <= 1:
        return [(dpus, w)]
    assert w.size is not None
    return [(d, workload(w.name, d, {**w.size, "N_": d})) for d in w.rounds]
