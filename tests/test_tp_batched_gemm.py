"""Tensor parallelism splits a batched product's batch (an attention block's heads), a matrix
product's N (its column-parallel weight): the GEMM shape efficiency follows the split."""

from __future__ import annotations

import pytest

from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.kernels import shape_efficiency


def test_batched_product_splits_its_heads_not_its_columns():
    h100 = load_device("H100-SXM")                 # 132 SMs, 128x128 tiles
    # unfused attention's P @ V, batch 4 x 8 heads: [32, 2048, 2048] x [32, 2048, 128], tp 8: this GPU's
    # 4 of the 32 (batch, head) products: 4 x 16 row tiles x 1 column tile = 64 tiles, split-K
    # min(132 // 64, 2048 // 512) = 2 ways: 128 work units in one wave of 132, tiles full
    assert shape_efficiency(h100, (32, 2048, 128, 2048), share=1 / 8) == pytest.approx(128 / 132)
    assert shape_efficiency(h100, (32, 2048, 128, 2048), share=1 / 8) == shape_efficiency(h100, (4, 2048, 128, 2048))
    # a matrix product (batch 1) still splits N: [256, 12288] x [12288, 6144] -> 96 tiles, 96 / 132
    assert shape_efficiency(h100, (1, 256, 12288, 12288), share=0.5) == pytest.approx(96 / 132)
