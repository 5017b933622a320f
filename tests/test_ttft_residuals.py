"""scripts/ttft_residuals.py: the step split of two closed-loop rows, worked by hand, and its tables."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import ttft_residuals as tr  # noqa: E402


def _row(osl, ttft, tpot, ttft_ours, tpot_ours, clients=4, engine="trtllm"):
    return {"engine": engine, "device": "H100-SXM", "model": "m", "tp": "1", "weights": "fp8", "isl": 1024,
            "osl": osl, "clients": clients, "ttft": ttft, "tpot": tpot, "ttft_ours": ttft_ours,
            "tpot_ours": tpot_ours}


def test_step_split_by_hand():
    # 4 clients, D = 10 ms, P = 100 ms, W = 2: cycle = 4 x 100 + (OSL + 2 - 4) x 10
    # OSL 100: 400 + 980 = 1380 ms; OSL 200: 400 + 1980 = 2380 ms; TTFT 300 ms on both
    a = _row(100, 300, (1380 - 300) / 99, 150, (1380 - 150) / 99)
    b = _row(200, 300, (2380 - 300) / 199, 150, (2380 - 150) / 199)
    assert tr.step_split(a, b, ours=False) == pytest.approx((10, 100))
    assert tr.step_split(a, b, ours=True) == pytest.approx((10, 100))
    # measured TTFT 300 = 3 P, ours 150 = 1.5 P; D and P agree
    assert tr.steps_table([a, b]).splitlines()[1].split() == ["trtllm", "H100-SXM", "1", "1.00", "1.00", "3.00",
                                                              "1.50"]


def test_grid_of_signed_medians():
    # errors (ours - measured) / measured: -50%, -25% at 8 clients; +100% at 16
    rows = [_row(128, 100, 10, 50, 10, clients=8), _row(256, 100, 10, 75, 10, clients=8),
            _row(128, 100, 10, 200, 10, clients=16)]
    lines = tr.grid(rows, "clients").splitlines()
    assert lines[0].split() == ["engine", "8", "16"]
    # median of -50% and -25% is -37.5%, printed -38% (round half to even); cells 12 wide after 8
    assert lines[1] == "trtllm  " + "   -38% ( 2)" + "  +100% ( 1)"
