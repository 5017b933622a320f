"""FlexAttention: the attention rule over the blocks a BlockMask keeps, with score_mod / mask_mod
arithmetic per kept score (op_formulas/flex.py, dispatchprof/count/flex.py)."""

import pytest
import torch
import torch.nn.attention.flex_attention as flex
from torch._higher_order_ops.flex_attention import flex_attention as flex_hop
from torch._subclasses import FakeTensorMode

from conftest import count
from op_formulas.flex import KeptScores, dense_scores

BLOCK = 128 * 128


def causal(b, h, qi, ki):
    return qi >= ki


def window(b, h, qi, ki):
    return (qi >= ki) & (qi - ki <= 128)


def shifted(score, b, h, qi, ki):
    return score + (qi - ki) * 0.5          # per score: 1 sub, 1 mul, 1 add


def flex_records(fn, *args, **kwargs):
    c = count(fn, *args, **kwargs)
    assert list(c.unknown_ops()) == []
    return {r.op: r.cost for r in c.profile.records if "flex" in r.op}


def qkv(b, h, length, e=16, **kw):
    return [torch.randn(b, h, length, e, **kw) for _ in range(3)]


def forward_by_hand(s, p, r, e=16, ev=16, mask_cmp=1, mod=(0, 0)):
    """The attention rule over S kept scores in R rows (no additive mask), mask_mod (mask_cmp CMP)
    and its where (1 CMP) on the P partial scores, score_mod (mod = (ADD, MULT)) on the S."""
    return {"mult": s * e + s + ev * s + mod[1] * s,
            "add": s * (e - 1) + (2 * s - r) + ev * (s - r) + mod[0] * s,
            "cmp": (s - r) + p * (mask_cmp + 1), "exp": s, "div": s, "macs": s * (e + ev)}


def fields(cost, names):
    return {n: getattr(cost, n) for n in names}


def test_causal_block_mask_keeps_three_of_four_blocks():
    # L=256, 128-blocks: query block 0 keeps kv block 0 (partial, diagonal); query block 1 keeps
    # kv block 0 (full) and kv block 1 (partial). 3 of 4 blocks: S = 3*16384 per head, P = 2*16384,
    # R = 256 rows per head. B=1, H=2.
    q, k, v = qkv(1, 2, 256)
    mask = flex.create_block_mask(causal, 1, 2, 256, 256, device="cpu")
    assert (mask.kv_num_blocks.tolist(), mask.full_kv_num_blocks.tolist()) == ([[[1, 1], [1, 1]]], [[[0, 1], [0, 1]]])
    cost = flex_records(flex.flex_attention, q, k, v, block_mask=mask)["higher_order.flex_attention"]
    want = forward_by_hand(s=2 * 3 * BLOCK, p=2 * 2 * BLOCK, r=2 * 256)
    assert fields(cost, want) == want
    assert cost.macs == 2 * 3 * BLOCK * 32 == 3_145_728               # 3/4 of the dense 4_194_304
    # reads q, k, v (3 * 2*256*16*4 = 98304 B) and the BlockMask's index tensors; writes out
    # (32768 B), logsumexp and max (2 * 2*256*4 = 4096 B)
    assert cost.bytes_written == 32768 + 4096
    assert cost.bytes_read > 98304


def test_sliding_window_keeps_the_diagonal_and_one_block_before():
    # L=512, 128-blocks, window 128 (query i sees keys i-128..i): query block 0 keeps kv block 0;
    # blocks 1..3 keep kv blocks i-1 and i, both partial (q-k spans 1..255 and -127..127):
    # 7 of 16 blocks, all partial. The mask (B=H=None) is shared by B=1, H=2 heads.
    q, k, v = qkv(1, 2, 512)
    mask = flex.create_block_mask(window, None, None, 512, 512, device="cpu")
    cost = flex_records(flex.flex_attention, q, k, v, block_mask=mask)["higher_order.flex_attention"]
    s = 2 * 7 * BLOCK                                                  # 229_376
    # window mask_mod per score: ge, sub, le, and: 3 CMP + 1 ADD
    want = forward_by_hand(s=s, p=s, r=2 * 512, mask_cmp=3)
    want["add"] += s
    assert fields(cost, want) == want


def test_tiles_at_the_end_are_clipped_to_the_sequence():
    # L=200, 128-blocks: rows and columns 128 and 72. Kept (causal): (0,0) 128*128, (1,0) 72*128,
    # (1,1) 72*72 = 16384 + 9216 + 5184 = 30784 scores per head; B=2, H=2 share a [1,1] mask.
    q, k, v = qkv(2, 2, 200)
    mask = flex.create_block_mask(causal, None, None, 200, 200, device="cpu")
    cost = flex_records(flex.flex_attention, q, k, v, block_mask=mask)["higher_order.flex_attention"]
    assert (cost.exp, cost.macs) == (4 * 30784, 4 * 30784 * 32)


def test_score_mod_arithmetic_is_counted_per_kept_score():
    q, k, v = qkv(1, 2, 256)
    mask = flex.create_block_mask(causal, 1, 2, 256, 256, device="cpu")
    cost = flex_records(flex.flex_attention, q, k, v, score_mod=shifted, block_mask=mask)
    s = 2 * 3 * BLOCK
    want = forward_by_hand(s=s, p=2 * 2 * BLOCK, r=2 * 256, mod=(2, 1))   # sub + add, mul
    assert fields(cost["higher_order.flex_attention"], want) == want


def test_backward_counts_the_kept_blocks():
    # torch refuses flex backward on CPU through the public API; its higher-order op with autograd
    # runs the same FlexAttentionAutogradOp as on CUDA. S = 2*3*16384, R = C = 2*256 (every key is
    # in a kept block), Lq summed over heads 512, E = Ev = 16, H = Hk: no GQA sum.
    q, k, v = qkv(1, 2, 256, requires_grad=True)
    mask = flex.create_block_mask(causal, 1, 2, 256, 256, device="cpu")

    def step():
        out, _, _ = flex_hop(q, k, v, lambda score, b, h, qi, ki: score, mask.as_tuple(), 0.25, {})
        out.sum().backward()

    cost = flex_records(step)["higher_order.flex_attention_backward"]
    s, r, c, lq, e = 2 * 3 * BLOCK, 512, 512, 512, 16
    assert cost.mult == 4 * e * s + lq * e + 2 * s                      # 6_496_256
    assert cost.add == e * (s - c) + s * (e - 1) + lq * (e - 1) + s + e * (s - r) + e * (s - c)
    assert cost.cmp == 2 * 2 * BLOCK * 2                               # mask_mod + where on P
    assert cost.macs == s * 4 * e                                      # 2x the forward's


def test_fake_tensors_count_like_real_ones_and_a_valueless_mask_counts_dense():
    q, k, v = qkv(2, 2, 200)
    mask = flex.create_block_mask(causal, None, None, 200, 200, device="cpu")
    real = flex_records(flex.flex_attention, q, k, v, block_mask=mask)
    with FakeTensorMode(allow_non_fake_inputs=True):
        fq, fk, fv = qkv(2, 2, 200)
        fake = flex_records(flex.flex_attention, fq, fk, fv, block_mask=mask)
        fake_mask = flex.create_block_mask(causal, None, None, 200, 200, device="cpu")
        dense = flex_records(flex.flex_attention, fq, fk, fv, block_mask=fake_mask)
    assert fake == real
    # a BlockMask made of fake tensors has no values: every tile kept and partial
    assert dense["higher_order.flex_attention"].exp == 4 * 200 * 200


def test_dense_scores_and_kept_scores_shape():
    assert dense_scores(2, 3, 5, 7) == KeptScores(6 * 35, 6 * 35, 6 * 5, 6 * 7, 6, 6 * 5)


@pytest.mark.parametrize("length", [128, 384])
def test_kept_scores_match_the_dense_mask(length):
    # independent check: the block-granular S equals the scores of the tiles that contain at least
    # one True of the dense mask (causal: the tiles on and below the diagonal)
    from op_formulas.flex import kept_scores
    mask = flex.create_block_mask(causal, None, None, length, length, device="cpu")
    n = length // 128
    assert kept_scores(mask.as_tuple(), 1, 1, length, length).s == n * (n + 1) // 2 * BLOCK


def test_gqa_and_a_per_batch_document_mask():
    # GQA: 4 query heads share 2 kv heads; the rule counts query heads: 4 * 3 kept blocks
    q, k, v = torch.randn(1, 4, 256, 16), torch.randn(1, 2, 256, 16), torch.randn(1, 2, 256, 16)
    mask = flex.create_block_mask(causal, None, None, 256, 256, device="cpu")
    cost = flex_records(flex.flex_attention, q, k, v, block_mask=mask, enable_gqa=True)
    assert cost["higher_order.flex_attention"].exp == 4 * 3 * BLOCK
    # a mask per batch: batch 0 holds two 128-token documents (2 full diagonal blocks), batch 1 one
    # 256-token document (4 full blocks); 2 heads share each batch's mask: (2 + 4) * 2 blocks, none
    # partial, so mask_mod is never evaluated: CMP = S - R (softmax maxima) only
    docs = torch.tensor([[0] * 128 + [1] * 128, [0] * 256])
    mask = flex.create_block_mask(lambda b, h, qi, ki: docs[b, qi] == docs[b, ki], 2, None, 256, 256, device="cpu")
    q, k, v = qkv(2, 2, 256)
    cost = flex_records(flex.flex_attention, q, k, v, block_mask=mask)["higher_order.flex_attention"]
    s = (2 + 4) * 2 * BLOCK
    assert (cost.exp, cost.cmp) == (s, s - 2 * 2 * 256)


def test_a_mod_that_cannot_run_on_one_score_is_reported_not_raised():
    # a score_mod that works in torch's (vmapped) kernel but raises on the counter's one-score probe:
    # the call is counted without the mod's arithmetic and the mod is named as unknown
    table = torch.randn(256)

    def picky(score, b, h, qi, ki):
        if score.dim() == 0 and not torch._C._functorch.is_batchedtensor(score):
            raise ValueError("no scalars")
        return score + table[qi]

    q, k, v = qkv(1, 1, 256)
    mask = flex.create_block_mask(causal, None, None, 256, 256, device="cpu")
    c = count(flex.flex_attention, q, k, v, score_mod=picky, block_mask=mask)
    (unknown,) = c.unknown_ops()
    assert unknown.op == "picky (ValueError: cannot run on one score)"
    (rec,) = [r for r in c.profile.records if r.op == "higher_order.flex_attention"]
    assert rec.cost.exp == 3 * BLOCK                       # the attention itself is still counted
