"""scripts/gemm_efficiency.py's implied efficiency of one measured GEMM, worked by hand: the
simulator's time at efficiency 1 over the measured time, for compute-bound points only."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import gemm_efficiency  # noqa: E402

from dispatchprof.sim.catalog import load_device  # noqa: E402


def test_implied_efficiency_by_hand():
    h100 = dataclasses.replace(load_device("H100-SXM"), compute_efficiency=1.0, matrix_efficiency={})
    m = n = k = 8192                      # 4096 tiles of 128 x 128 in 32 waves of 132 SMs: 4096 / 4224
    flop = m * n * (2 * k - 1)
    # bf16 at 989.4 TFLOP/s x 4096 / 4224, plus the 2 us launch, measured in 1.4 ms
    simulated = flop / (989.4e12 * 4096 / 4224) + 2e-6
    assert gemm_efficiency.implied(h100, m, n, k, "bfloat16", 1.4) == pytest.approx(simulated / 1.4e-3)
    # fp8 (per-tensor or block-scaled) at the fp8 peak, 1978.9 TFLOP/s
    fp8 = flop / (1978.9e12 * 4096 / 4224) + 2e-6
    assert gemm_efficiency.implied(h100, m, n, k, "fp8_block", 1.0) == pytest.approx(fp8 / 1e-3)
    # a GEMV streams its weights: memory-bound, no figure
    assert gemm_efficiency.implied(h100, 1, n, k, "bfloat16", 0.05) is None
