"""A profile's attention_efficiency (per dtype) times fused attention ops at that share of the
matrix peak, in place of matrix_efficiency's or compute_efficiency, and its attention_work_curve
(per dtype) at a share that depends on the op's work, in place of both; every other op is unchanged."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dispatchprof import OpCounter
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate
from dispatchprof.sim.timing import work_fraction


def _profile():
    """One causal fused attention of 8 heads over 2,048 tokens of 128 (compute-bound on an H100)
    and one 2,048 x 1,024 x 1,024 linear layer, bf16, on meta tensors."""
    q = torch.empty(1, 8, 2048, 128, dtype=torch.bfloat16, device="meta")
    x = torch.empty(2048, 1024, dtype=torch.bfloat16, device="meta")
    w = torch.empty(1024, 1024, dtype=torch.bfloat16, device="meta")
    with OpCounter() as c:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
        F.linear(x, w)
    return c.profile


def _times(device):
    sim = simulate(_profile(), scenarios_of(device)[device.name])
    return {r.op: o for o, r in zip(sim.ops, sim.records)}


def test_attention_takes_its_own_share_of_the_peak_and_nothing_else_does():
    """H100 SXM as bundled less its attention figure: bf16 ops at compute_efficiency 0.8. With
    attention_efficiency {bf16: 0.4} the attention op's compute time doubles (0.8 / 0.4) and the
    linear layer's is unchanged; a figure for fp8 alone leaves bf16 attention at 0.8. As bundled
    (0.5 for bf16 and fp16, scripts/attention_kernels.py) attention takes 0.8 / 0.5 = 1.6 times."""
    bundled = load_device("H100-SXM")
    assert bundled.attention_efficiency == {"bf16": 0.5, "fp16": 0.5}
    assert bundled.as_bound().attention_efficiency == {}
    h100 = dataclasses.replace(bundled, attention_efficiency={})
    base = _times(h100)
    half = _times(dataclasses.replace(h100, attention_efficiency={"bf16": 0.4}))
    other = _times(dataclasses.replace(h100, attention_efficiency={"fp8": 0.4}))
    shipped = _times(bundled)
    (attn,) = [k for k in base if "attention" in k]
    (mm,) = [k for k in base if "attention" not in k]
    assert half[attn].t_compute == 2 * base[attn].t_compute
    assert shipped[attn].t_compute == pytest.approx(1.6 * base[attn].t_compute, rel=1e-12)
    assert base[attn].t_compute >= base[attn].t_memory                 # compute-bound: its time follows
    assert half[mm].t_compute == base[mm].t_compute == other[mm].t_compute == shipped[mm].t_compute
    assert other[attn].t_compute == base[attn].t_compute
    assert bundled.as_bound().attention_work_curve == {}


def test_work_fraction_by_hand():
    """Points (4 GFLOP, 0.2), (16, 0.4), (256, 0.6): linear in log GFLOP between them, so 8 GFLOP
    (halfway from 4 to 16 in log) gives 0.3 and 64 (halfway from 16 to 256) gives 0.5; below 4
    and above 256 the end fractions hold, zero work included; arrays give arrays."""
    points = ((4.0, 0.2), (16.0, 0.4), (256.0, 0.6))
    assert work_fraction(points, 8e9) == pytest.approx(0.3, rel=1e-12)
    assert work_fraction(points, 64e9) == pytest.approx(0.5, rel=1e-12)
    assert work_fraction(points, 16e9) == pytest.approx(0.4, rel=1e-12)
    assert (work_fraction(points, 1e9), work_fraction(points, 0.0), work_fraction(points, 1e15)) == (0.2, 0.2, 0.6)
    assert work_fraction(points, np.array([8e9, 64e9])) == pytest.approx([0.3, 0.5], rel=1e-12)


def test_a_work_curve_times_attention_at_its_work_and_wins_over_the_constant():
    """The attention op of `_profile` (eager, every score counted) works 8 heads x 2,048 x 2,048
    scores x 512 FLOP (a multiply and an add per dimension of 128, for Q K^T and for P V) = 17.18
    GFLOP, plus its softmax's. On a curve (work / 2, 0.2), (2 work, 0.4) its work is halfway in log,
    0.3 of the peak: its compute time is 0.8 / 0.3 of the plain one (compute_efficiency 0.8),
    whatever attention_efficiency says; the linear layer is unchanged; a curve for fp8 alone leaves
    bf16 attention as it was."""
    h100 = dataclasses.replace(load_device("H100-SXM"), attention_efficiency={}, attention_work_curve={})
    base = _times(h100)
    (attn,) = [k for k in base if "attention" in k]
    (mm,) = [k for k in base if "attention" not in k]
    work = base[attn].work
    assert 8 * 2048 * 2048 * 512 < work < 1.02 * 8 * 2048 * 2048 * 512
    curve = {"bf16": ((work / 2e9, 0.2), (work * 2e-9, 0.4))}
    timed = _times(dataclasses.replace(h100, attention_efficiency={"bf16": 0.5}, attention_work_curve=curve))
    assert timed[attn].t_compute == pytest.approx(base[attn].t_compute * 0.8 / 0.3, rel=1e-12)
    assert timed[mm].t_compute == base[mm].t_compute
    other = _times(dataclasses.replace(h100, attention_work_curve={"fp8": curve["bf16"]}))
    assert other[attn].t_compute == base[attn].t_compute
    assert load_device("H100-SXM").as_bound().attention_work_curve == {}
