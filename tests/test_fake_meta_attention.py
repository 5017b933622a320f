"""Attention on meta tensors runs the CPU's fused kernel where the CPU would
(dispatchprof/count/meta_attention.py): its output and gradients have the CPU's layouts, so the
model's ops after it are the real run's, and a count on meta tensors equals the real count."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dispatchprof import OpCounter
from dispatchprof.count.meta_attention import FLASH_CHOICE, additive_mask, cpu_choice, run_attention

B, H, L, E = 2, 4, 8, 16


def qkv(device: str, heads_kv: int = H, grad: bool = False) -> tuple[torch.Tensor, ...]:
    """q [B, H, L, E] as a [B, L, H, E] tensor transposed (as transformers makes it), k and v the same
    with ``heads_kv`` heads."""
    torch.manual_seed(0)
    q = torch.randn(B, L, H, E, device=device).transpose(1, 2)
    k = torch.randn(B, L, heads_kv, E, device=device).transpose(1, 2)
    v = torch.randn(B, L, heads_kv, E, device=device).transpose(1, 2)
    return tuple(t.requires_grad_(grad) for t in (q, k, v))


CALLS = {   # name -> (kv heads, mask maker or None, kwargs)
    "plain": (H, None, {}),
    "causal": (H, None, {"is_causal": True}),
    "bool mask": (H, lambda d: torch.ones(L, L, dtype=torch.bool, device=d).tril(), {}),
    "float mask": (H, lambda d: torch.zeros(B, 1, L, L, device=d), {}),
    "gqa": (2, None, {"enable_gqa": True, "scale": 0.5}),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_layouts_are_the_cpu_kernels(name):
    heads_kv, mask, kwargs = CALLS[name]
    strides = {}
    for device in ("cpu", "meta"):
        q, k, v = qkv(device, heads_kv, grad=True)
        m = mask(device) if mask else None
        out = run_attention(F.scaled_dot_product_attention, (q, k, v, m), kwargs)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        strides[device] = (out.shape, out.stride(), [g.stride() for g in grads])
    assert strides["meta"] == strides["cpu"]


def test_cpu_choice_on_meta_is_the_cpus():
    for device in ("cpu", "meta"):
        assert cpu_choice(qkv(device), {}) == FLASH_CHOICE
        # a 3-D query: the fused kernel takes 4-D tensors only, the CPU runs the math path (0)
        q, k, v = (t[0] for t in qkv(device))
        assert cpu_choice((q, k, v), {}) == 0


def test_math_path_stays_on_meta():
    """Where the CPU runs the math path (3-D tensors), meta runs the call unchanged: same layout."""
    q, k, v = (t[0] for t in qkv("cpu"))
    qm, km, vm = (t[0] for t in qkv("meta"))
    out = run_attention(F.scaled_dot_product_attention, (qm, km, vm), {})
    assert out.stride() == F.scaled_dot_product_attention(q, k, v).stride()


def test_additive_mask():
    mask = torch.tensor([[True, False]])
    assert additive_mask(mask, torch.float32).tolist() == [[0.0, float("-inf")]]
    other = torch.zeros(1, 2)
    assert additive_mask(other, torch.float32) is other
    assert additive_mask(None, torch.float32) is None


class Block(nn.Module):
    """Projections to [B, H, L, E] heads, attention, heads back with transpose + reshape (which copies
    unless attention's output is [B, L, H, E] underneath)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(H * E, 3 * H * E)
        self.out = nn.Linear(H * E, H * E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(B, L, 3, H, E).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out(a.transpose(1, 2).reshape(B, L, H * E))


def count(device: str) -> OpCounter:
    torch.manual_seed(0)
    block = Block().to(device)
    x = torch.randn(B, L, H * E, device=device, requires_grad=True)
    with OpCounter() as c:
        block(x).sum().backward()
    return c


def test_meta_count_equals_real():
    real, meta = count("cpu"), count("meta")
    assert [(r.op, r.phase) for r in meta.profile.records] == [(r.op, r.phase) for r in real.profile.records]
    assert meta.total() == real.total()
    # the real run copies nothing: the flash kernel's output is [B, L, H, E] underneath
    assert not [r for r in meta.profile.records if r.op in ("aten.clone", "aten.copy_")]
