"""scripts/moe_efficiency.py's implied efficiency of one measured MoE layer, worked by hand, and
the expert shapes it reads from the catalog's configs."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import moe_efficiency  # noqa: E402

from dispatchprof.llm.catalog import load_config  # noqa: E402


def test_implied_efficiency_by_hand():
    # routed experts simulated in 3 ms at efficiency 1, 2 ms of it the GEMMs' compute: the other
    # 1 ms (gathers, activation, launches) stays; measured 5 ms -> the GEMMs took 4 ms: 2 / 4
    point = {"one": (3e-3, 2e-3), "measured": 5e-3}
    assert moe_efficiency.implied(point) == pytest.approx(0.5)
    # measured faster than the simulated rest alone: no figure
    assert moe_efficiency.implied({"one": (3e-3, 2e-3), "measured": 0.9e-3}) is None


def test_expert_shapes_of_catalog_models():
    # (hidden, expert intermediate, top-k, routed experts), as AIConfigurator's tables key them
    assert moe_efficiency.expert_shape(load_config("gpt-oss-120b")) == (2880, 2880, 4, 128)
    assert moe_efficiency.expert_shape(load_config("deepseek-v3")) == (7168, 2048, 8, 256)
    assert moe_efficiency.expert_shape(load_config("qwen3.5-397b-a17b")) == (4096, 1024, 10, 512)
    assert moe_efficiency.expert_shape(load_config("llama-3.1-8b")) is None
