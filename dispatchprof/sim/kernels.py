"""Shape-aware GEMM efficiency: tile and wave quantisation of a matrix multiply on a GPU.

A GEMM C[M, N] = A[M, K] B[K, N] (times a batch for bmm) is cut into output tiles of
``gemm_tile`` = (Tm, Tn) elements; each tile is one work unit of one compute unit (SM / CU):

    tm        = min(Tm, max(16, next power of two >= M))   small-M kernels use shorter tiles
    tiles     = batch * ceil(M / tm) * ceil(N / Tn)
    split     = max(1, min(units // tiles, K // 512))       split-K when the tiles leave units idle
    tile_util = M * N / (ceil(M / tm) * tm * ceil(N / Tn) * Tn)
    wave_util = tiles * split / (ceil(tiles * split / units) * units)
    shape_efficiency = tile_util * wave_util

t_compute divides by ``compute_efficiency * shape_efficiency``: compute_efficiency is the fraction
of peak a large, well-shaped GEMM reaches; the shape term is what a given M, N, K loses to
partly filled tiles and to the last, partly filled wave. A profile without ``compute_units`` and
``gemm_tile`` (and ``--bound``) has shape efficiency 1. With tensor parallelism a matrix product's
N is this device's share (column-parallel weights), a batched product's batch (its heads).

Worked: H100-SXM (132 SMs, 128x128 tiles), fp16 [256, 12288] x [12288, 12288]: tiles 2 * 96 = 192,
2 waves of 132 -> wave_util 192 / 264 = 0.727, tile_util 1; at compute_efficiency 0.8 that is
0.8 * 0.727 * 989.4 = 576 TFLOP/s (measured ~618, issue #14).
"""

from __future__ import annotations

import math

from dispatchprof.results.records import OpRecord
from dispatchprof.sim.device import Device

GEMM_OPS = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm"})


def gemm_dims(r: OpRecord) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a GEMM record from its argument shapes, or None for other ops."""
    if r.op not in GEMM_OPS:
        return None
    shapes = r.shapes[1:] if r.op in ("aten.addmm", "aten.baddbmm") else r.shapes
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if len(a) == 2 and len(b) == 2:
        return 1, a[0], b[1], a[1]
    if len(a) == 3 and len(b) == 3:
        return a[0], a[1], b[2], a[2]
    return None


def shape_efficiency(d: Device, dims: tuple[int, int, int, int] | None, share: float = 1.0) -> float:
    """The tile and wave utilisation of a GEMM on ``d`` (see the module docstring); 1 when the
    profile gives no tiles or compute units, or for a non-GEMM op (dims None)."""
    if dims is None or d.compute_units is None or d.gemm_tile is None:
        return 1.0
    batch, m, n, k = dims
    if batch > 1:                    # a batched product inside an attention block: heads are split
        batch = max(1, math.ceil(batch * share))
    else:
        n = max(1, math.ceil(n * share))
    if min(batch, m, n, k) <= 0:
        return 1.0
    tile_m, tile_n = d.gemm_tile
    tm = min(tile_m, max(16, 1 << (m - 1).bit_length()))
    rows, cols = math.ceil(m / tm), math.ceil(n / tile_n)
    tiles = batch * rows * cols
    units = d.compute_units
    split = max(1, min(units // tiles, k // 512))
    tile_util = m * n / (rows * tm * cols * tile_n)
    work_units = tiles * split
    wave_util = work_units / (math.ceil(work_units / units) * units)
    return tile_util * wave_util
