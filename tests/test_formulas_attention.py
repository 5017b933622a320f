"""Attention: one fused op with one rule, whatever the backend and the tensor kind."""

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import FakeTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel

import zoo
from conftest import count, counts, only_record
from dispatchprof import OpCounter
from op_formulas import T, lookup
from op_formulas.attention import attention_cost, causal_scores, scores

aten = torch.ops.aten
B, H, HK, LQ, LK, E = 2, 4, 2, 3, 5, 8


def expected_forward(masked: bool, s: int = LQ * LK) -> dict:
    """The COUNTING.md rule written out for B*H heads of S scores over LQ rows."""
    heads = B * H
    return {
        "mult": heads * (s * E + s + E * s),                          # scores, scale, output
        "add": heads * (s * (E - 1) + s * masked + (2 * s - LQ) + E * (s - LQ)),
        "cmp": heads * (s - LQ), "exp": heads * s, "div": heads * s,
        "macs": heads * s * 2 * E,
    }


def test_rule_by_hand():
    cost = lookup(aten.scaled_dot_product_attention)(T(B, H, LQ, E), T(B, HK, LK, E), T(B, HK, LK, E),
                                                     result=T(B, H, LQ, E))
    assert counts(cost) == expected_forward(masked=False)
    # B*H = 8 heads, 15 scores: scores 15*8 MULT = 120, scale 15, output 8*15 = 120 -> 255 per head
    assert cost.mult == 8 * 255


def test_causal_scores_closed_form():
    for lq, lk in [(1, 1), (3, 5), (5, 5), (7, 3), (1, 9)]:
        assert causal_scores(lq, lk) == sum(min(lk, max(0, lk - lq + i + 1)) for i in range(lq))


def _qkv(device="cpu"):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, LQ, E, generator=g)
    k = torch.randn(B, H, LK, E, generator=g)
    v = torch.randn(B, H, LK, E, generator=g)
    return [t.to(device) for t in (q, k, v)]


@pytest.mark.parametrize("backend", [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION])
@pytest.mark.parametrize("kind", ["real", "meta", "fake"])
@pytest.mark.parametrize("causal", [False, True])
def test_same_counts_on_every_backend_and_tensor_kind(backend, kind, causal):
    q, k, v = _qkv("meta" if kind == "meta" else "cpu")
    mode = FakeTensorMode() if kind == "fake" else None
    if mode is not None:
        q, k, v = (mode.from_tensor(t) for t in (q, k, v))
    with sdpa_kernel(backend), OpCounter() as c:
        if mode is not None:
            with mode:
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    r = only_record(c, "aten.scaled_dot_product_attention")          # one op, nothing inside it
    assert len(c.profile.records) == 1
    assert counts(r.cost) == expected_forward(masked=causal)
    assert r.causal is causal
    # traffic: q, k, v read, the output written; never the LQ x LK scores
    assert (r.cost.bytes_read, r.cost.bytes_written) == (4 * (B * H * (LQ + 2 * LK) * E), 4 * B * H * LQ * E)


def test_computed_causal_rule_counts_only_unmasked_scores():
    # torch's is_causal=True is aligned top-left: query i of LQ=3 sees min(i+1, LK=5) keys.
    q, k, v = _qkv()
    with OpCounter(causal="computed") as c:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = scores(LQ, LK, "top_left").s                                   # 1 + 2 + 3 = 6
    assert s == 6
    assert counts(only_record(c, "aten.scaled_dot_product_attention").cost) == expected_forward(True, s)


def test_llama_attention_identical_on_real_meta_fake():
    seen = {}
    for kind in ("real", "meta", "fake"):
        model, inputs, _ = zoo.build("llama", kind)
        with torch.no_grad():
            c = count(model, **inputs)
        seen[kind] = [counts(r.cost) for r in c.profile.records if r.op == "aten.scaled_dot_product_attention"]
    assert len(seen["real"]) == 2 and seen["real"] == seen["meta"] == seen["fake"]
    assert seen["real"][0] == counts(attention_cost(zoo.BATCH, 4, zoo.SEQ, zoo.SEQ, 16, 16, masked=True,
                                                    dropout=False, causal_computed=False))


def test_causal_hint_comes_from_the_attention_module_under_fake_tensors():
    # Under fake tensors transformers passes an explicit mask and is_causal=False; the
    # module's is_causal attribute marks the call causal, and "computed" uses it.
    model, inputs, _ = zoo.build("llama", "fake")
    with torch.no_grad(), OpCounter(causal="computed") as c:
        model(**inputs)
    r = [r for r in c.profile.records if r.op == "aten.scaled_dot_product_attention"][0]
    assert r.causal is True
    assert r.cost.macs == zoo.BATCH * 4 * causal_scores(zoo.SEQ, zoo.SEQ) * 32
