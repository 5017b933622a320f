"""Attention forward and backward: one rule on real, meta and fake tensors; the computed causal
rule follows the alignment of the mask torch applies (top-left for is_causal, end over a cache)."""

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import FakeTensorMode

from conftest import counts, only_record
from dispatchprof import OpCounter
from op_formulas.attention import attention_backward_cost, scores

B, H, LQ, LK, E = 1, 2, 3, 5, 4


def _qkv(kind, lq=LQ, lk=LK, hk=H):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, lq, E, generator=g)
    k, v = torch.randn(B, hk, lk, E, generator=g), torch.randn(B, hk, lk, E, generator=g)
    qkv = [q, k, v]
    mode = None
    if kind == "meta":
        qkv = [t.to("meta") for t in qkv]
    elif kind == "fake":
        mode = FakeTensorMode()
        qkv = [mode.from_tensor(t) for t in qkv]
    return [t.requires_grad_() for t in qkv], mode


def _fwd_bwd(kind, causal_rule="full", **sdpa):
    (q, k, v), mode = _qkv(kind)
    with OpCounter(causal=causal_rule) as c:
        if mode is None:
            F.scaled_dot_product_attention(q, k, v, **sdpa).sum().backward()
        else:
            with mode:
                F.scaled_dot_product_attention(q, k, v, **sdpa).sum().backward()
    return c


def test_backward_rule_by_hand():
    # per head, S = 3*5 = 15 scores, R = 3 rows, C = 5 keys, E = Ev = 4:
    # MULT: dV 4*15 + dP 15*4 + D 3*4 + dS 2*15 + dQ 15*4 + dK 15*4 = 60+60+12+30+60+60 = 282
    # ADD: dV 4*(15-5) + dP 15*3 + D 3*3 + dS 15 + dQ 4*(15-3) + dK 4*(15-5) = 40+45+9+15+48+40 = 197
    cost = attention_backward_cost(1, 1, 1, 3, 5, 4, 4, causal_computed=False)
    assert counts(cost) == {"mult": 282, "add": 197, "macs": 15 * 16}


@pytest.mark.parametrize("kind", ["real", "meta", "fake"])
def test_forward_and_backward_identical_on_real_meta_fake(kind):
    c = _fwd_bwd(kind)
    fwd = only_record(c, "aten.scaled_dot_product_attention").cost
    bwd = only_record(c, "aten.scaled_dot_product_attention_backward").cost
    # two heads, 15 scores: forward MACs 2*15*(4+4) = 240, backward four products 2*15*16 = 480
    assert (fwd.macs, bwd.macs) == (240, 480)
    assert c.total().macs == 720           # was 8400 / 7200 / 8400 class disagreement before
    assert counts(bwd) == counts(attention_backward_cost(1, 2, 2, 3, 5, 4, 4, causal_computed=False))
    # no other op of the backward does a contraction (the kernel's own ops are folded in)
    assert [r.op for r in c.profile.records if r.cost.macs] == ["aten.scaled_dot_product_attention",
                                                                "aten.scaled_dot_product_attention_backward"]
    # bytes: reads q, k, v (4*(12+20+20)*2 heads = 416) plus out and dO (2 * 4*12*2 = 192)
    assert (bwd.bytes_read, bwd.bytes_written) == (416 + 192, 416)


def test_scores_alignments_by_hand():
    # LQ=3, LK=5. top-left: 1+2+3 = 6 scores, all 3 rows, keys 0..2 seen;
    # end-aligned: 3+4+5 = 12 scores, all 3 rows, all 5 keys.
    assert scores(3, 5, "top_left") == (6, 3, 3)
    assert scores(3, 5, "end") == (12, 3, 5)
    # LQ=7 > LK=3. top-left: 1+2+3+3*4 = 18, 7 rows, 3 keys; end: queries 4..6 see 1,2,3 keys.
    assert scores(7, 3, "top_left") == (18, 7, 3)
    assert scores(7, 3, "end") == (6, 3, 3)
    for lq, lk in [(1, 1), (3, 5), (5, 5), (7, 3), (1, 9)]:
        assert scores(lq, lk, "top_left").s == sum(min(i + 1, lk) for i in range(lq))
        assert scores(lq, lk, "end").s == sum(min(lk, max(0, lk - lq + i + 1)) for i in range(lq))
    with pytest.raises(ValueError, match="causal_computed must be False or one of"):
        scores(3, 5, "middle")


@pytest.mark.parametrize("kind", ["real", "meta", "fake"])
def test_computed_causal_follows_torch_top_left_mask_forward_and_backward(kind):
    c = _fwd_bwd(kind, "computed", is_causal=True)
    fwd = only_record(c, "aten.scaled_dot_product_attention").cost
    bwd = only_record(c, "aten.scaled_dot_product_attention_backward").cost
    # 6 scores per head (1+2+3), not 12 (end-aligned) and not 15 (full): 2 heads * 6 * 8 = 96
    assert fwd.macs == 96 and bwd.macs == 2 * 6 * 16
    assert fwd.exp == 2 * 6


def test_computed_causal_agrees_with_the_scores_torch_keeps():
    # the ones torch's is_causal mask keeps: count the finite entries of its reference mask
    lq, lk = 3, 5
    kept = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=0).sum().item()
    assert kept == scores(lq, lk, "top_left").s == 6


def test_end_aligned_hint_over_a_kv_cache():
    # a decode step: 2 new queries over 5 cached keys, causal from the module hint
    class Attn(torch.nn.Module):
        is_causal = True

        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    mask = torch.ones(2, 5, dtype=torch.bool).tril(diagonal=3)      # query i sees 3 + i + 1 keys
    model = Attn()
    with OpCounter(model, causal="computed") as c:
        model(q, k, v, mask)
    r = only_record(c, "aten.scaled_dot_product_attention")
    assert r.causal is True and r.cost.macs == (4 + 5) * 8 == mask.sum().item() * 8


def test_nested_counters_each_record_the_call_once():
    (q, k, v), _ = _qkv("real")
    with OpCounter() as outer:
        with OpCounter() as inner:
            F.scaled_dot_product_attention(q, k, v)
    for c in (outer, inner):
        assert [r.op for r in c.profile.records] == ["aten.scaled_dot_product_attention"]
        assert c.total().macs == 240            # two heads, 15 scores, 4 + 4 products each


def test_each_thread_records_only_its_own_attention_calls():
    import threading

    (q, k, v), _ = _qkv("real")
    started, results = threading.Barrier(2), {}

    def work(name, calls):
        with OpCounter() as c:
            started.wait()
            for _ in range(calls):
                F.scaled_dot_product_attention(q, k, v)
            started.wait()                      # both counters active while the other calls
        results[name] = c.total().macs

    threads = [threading.Thread(target=work, args=(n, calls)) for n, calls in (("one", 1), ("three", 3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"one": 240, "three": 3 * 240}
