"""Fit a calibrated GPU's matrix figures to its measured GEMM sweep, with the simulator's own formula.

``dispatchprof calibrate --gpu`` times fp16 GEMMs [M, N] x [N, N] over a sweep of M (M = 1 is
the GEMV). Three figures of the profile decide how the simulator times them: the matrix peak,
``matrix_memory_efficiency`` (mme, the share of the copy bandwidth a GEMM's stream reaches) and
``unoverlapped_fraction`` (u, the share of the shorter of compute and memory that the kernel does
not hide). For every pair (mme, u) of `MME_GRID` x `U_GRID`:

- the peak is pinned by the sweep's largest M, the shape a GPU's matrix peak is reached on: with
  t_memory from mme, busy = t_measured - launch_overhead must equal max(t_c, t_m) + u min(t_c, t_m),
  so t_c = busy - u t_m where that leaves t_c >= t_m (compute-bound), else t_c = (busy - t_m) / u
  (memory-bound, u > 0), and peak = work / (t_c * shape_efficiency); a pair that gives no t_c > 0
  (its memory time alone reaches busy, or it is memory-bound with u = 0) cannot reproduce the point;
- every point of the sweep is predicted by `time_op`, the one timing formula, on that profile.

The pair with the least mean |error| over the sweep wins; on a tie the smaller u, then the larger
mme. Units: seconds, FLOP/s, bytes/s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dispatchprof.results.records import OpRecord
from dispatchprof.sim.device import Device
from dispatchprof.sim.kernels import gemm_dims, shape_efficiency
from dispatchprof.sim.timing import time_op
from op_formulas.matmul import matmul_cost

MME_GRID = tuple(round(0.5 + 0.05 * i, 2) for i in range(11))      # 0.50 .. 1.00
U_GRID = tuple(round(0.05 * i, 2) for i in range(21))              # 0.00 .. 1.00
FP16_BYTES = 2


def gemm_record(m: int, n: int) -> OpRecord:
    """The op record of one sweep point: fp16 [m, n] x [n, n], counted as dispatchprof counts aten.mm."""
    cost = matmul_cost(m, n, n).with_bytes((m * n + n * n) * FP16_BYTES, m * n * FP16_BYTES)
    return OpRecord("aten.mm", "", "forward", "float16", cost, shapes=((m, n), (n, n)))


def predicted_s(device: Device, m: int, n: int) -> float:
    """Simulated seconds of one sweep GEMM on ``device``: the kernel and its launch overhead."""
    return time_op(0, gemm_record(m, n), [device], set(), None, False).time_s


@dataclass(frozen=True)
class GemmFit:
    """The fitted figures and how well they reproduce the sweep."""

    matrix_tflops: float
    matrix_memory_efficiency: float
    unoverlapped_fraction: float
    points: tuple[tuple[int, float, float], ...]     # (M, measured s, predicted s)

    @property
    def mean_error(self) -> float:
        """Mean |predicted / measured - 1| over the sweep."""
        return sum(abs(p / t - 1) for _, t, p in self.points) / len(self.points)


def fit_gemm(base: Device, gemm_flops: dict[int, float], n: int) -> GemmFit:
    """Fit (peak, mme, u) of ``base`` to a sweep {M: measured FLOP/s of [M, n] x [n, n]}; ``base``
    gives the bandwidth, launch overhead, compute units and tile. Raises ValueError when no
    pair of the grids reproduces the largest GEMM (its bytes moved faster than the copy did)."""
    measured = {m: matmul_cost(m, n, n).flops / flops for m, flops in sorted(gemm_flops.items())}
    m_max = max(measured)
    big = gemm_record(m_max, n)
    busy = measured[m_max] - base.launch_overhead_us * 1e-6
    best = None
    traffic = big.cost.bytes_read + big.cost.bytes_written
    for mme in MME_GRID:
        t_m = traffic / dataclasses.replace(base, matrix_memory_efficiency=mme).bandwidth_for(traffic, matrix=True)
        for u in U_GRID:
            t_c = _compute_time(busy, t_m, u)
            if t_c is None:
                continue
            peak = big.cost.flops / (t_c * shape_efficiency(base, gemm_dims(big)))
            device = dataclasses.replace(base, matrix_tflops={"fp16": peak / 1e12, "bf16": peak / 1e12},
                                         compute_efficiency=1.0, matrix_memory_efficiency=mme,
                                         unoverlapped_fraction=u)
            fit = GemmFit(peak / 1e12, mme, u, tuple((m, t, predicted_s(device, m, n)) for m, t in measured.items()))
            if best is None or _rank(fit) < _rank(best):
                best = fit
    if best is None:
        raise ValueError(f"no matrix_memory_efficiency in {MME_GRID[0]}..{MME_GRID[-1]} reproduces the "
                         f"[{m_max}, {n}] GEMM: it moved its bytes faster than the copy bandwidth")
    return best


def _rank(fit: GemmFit) -> tuple[float, float, float]:
    """Least mean error first; on a tie the smaller u, then the larger mme."""
    return round(fit.mean_error, 12), fit.unoverlapped_fraction, -fit.matrix_memory_efficiency


def _compute_time(busy: float, t_m: float, u: float) -> float | None:
    """The compute time that gives ``busy`` = max(t_c, t_m) + u min(t_c, t_m), or None."""
    if busy - u * t_m >= t_m:
        return busy - u * t_m                       # compute-bound
    if u > 0 and busy > t_m:
        return (busy - t_m) / u                     # memory-bound: t_c <= t_m
    return None
