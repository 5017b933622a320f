"""A profile's attention_efficiency (per dtype) times fused attention ops at that share of the
matrix peak, in place of matrix_efficiency's or compute_efficiency; every other op is unchanged."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from dispatchprof import OpCounter
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate


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
