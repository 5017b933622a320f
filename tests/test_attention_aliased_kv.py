"""Attention inputs that share a storage are read once: the union of the bytes they cover
(dispatchprof.count.shared_reads), on real, fake and meta tensors; separate inputs unchanged."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import FakeTensorMode
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, DynamicCache

from conftest import only_record
from dispatchprof import OpCounter, fake_inputs
from dispatchprof.count.shared_reads import read_once
from dispatchprof.llm.mla import absorb_mla
from dispatchprof.llm.models import build_model

B, H, T, E = 2, 3, 5, 8       # batch, query heads, keys, key width; one query per sequence
KINDS = ["real", "fake", "meta"]


def _on(kind: str, *tensors: torch.Tensor) -> tuple[list[torch.Tensor], FakeTensorMode | None]:
    if kind == "meta":
        return [t.to("meta") for t in tensors], None
    if kind == "fake":
        mode = FakeTensorMode()
        return [mode.from_tensor(t) for t in tensors], mode
    return list(tensors), None


def _sdpa_record(kind: str, make_kv):
    """The attention record of one call, q [B, H, 1, E], k and v from ``make_kv(base)`` where base
    is a float32 [B, 1, T, 16] tensor."""
    g = torch.Generator().manual_seed(0)
    (q, base), mode = _on(kind, torch.randn(B, H, 1, E, generator=g), torch.randn(B, 1, T, 16, generator=g))
    with OpCounter() as c:
        if mode is None:
            F.scaled_dot_product_attention(q, *make_kv(base))
        else:
            with mode:
                F.scaled_dot_product_attention(q, *make_kv(base))
    return only_record(c, "aten.scaled_dot_product_attention")


def mla_like(base):      # key columns 0..7 shared by H heads (a stride-0 view), value its first 6
    key = base[..., :8].expand(-1, H, -1, -1)
    return key, key[..., :6]


def overlapping(base):   # key columns 0..7, value columns 4..11 of each row: 12 of 16 columns covered
    return base[..., :8].expand(-1, H, -1, -1), base[..., 4:12].expand(-1, H, -1, -1)


def disjoint(base):      # key columns 0..7, value 8..15 of each row (a fused KV projection split)
    return base[..., :8].expand(-1, H, -1, -1), base[..., 8:].expand(-1, H, -1, -1)


def separate(base):      # ordinary attention: key and value each their own storage
    return base[..., :8].expand(-1, H, -1, -1).clone(), base[..., 8:].expand(-1, H, -1, -1).clone()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("make_kv, key_elements, value_elements", [
    (mla_like, B * T * 8, 0),                   # value inside the key: read once, 2*5*8 = 80
    (overlapping, B * T * 8, B * T * 4),        # value adds columns 8..11: 2*5*4 = 40
    (disjoint, B * T * 8, B * T * 8),           # no element in common: 80 + 80, as before
    (separate, B * H * T * 8, B * H * T * 8),   # own storages (the clones copy the heads): 240 + 240
])
def test_shared_key_and_value_are_read_once(kind, make_kv, key_elements, value_elements):
    rec = _sdpa_record(kind, make_kv)
    q = B * H * 1 * E                           # 2*3*1*8 = 48
    assert rec.cost.bytes_read == (q + key_elements + value_elements) * 4
    assert [nbytes for _, nbytes, _ in rec.inputs] == [q * 4, key_elements * 4, value_elements * 4]


def test_query_key_value_interleaved_in_one_projection_are_unchanged():
    """GPT-2's c_attn output [B, T, 3*8] split into q, k, v: one storage, no element in common."""
    qkv = torch.randn(B, T, 3 * E)
    q, k, v = (x.view(B, T, 2, 4).transpose(1, 2) for x in qkv.split(E, dim=-1))
    with OpCounter() as c:
        F.scaled_dot_product_attention(q, k, v)
    assert only_record(c, "aten.scaled_dot_product_attention").cost.bytes_read == 3 * B * T * E * 4  # 960


@pytest.mark.parametrize("make, want", [
    # [4, 6] rows 0..3 and rows 2..5 of a [6, 6] base: rows 4, 5 are new: 2*6 elements
    (lambda x: [x[:4], x[2:]], [24, 12]),
    # columns 0..2 and columns 1..4: columns 3, 4 new in each of 6 rows
    (lambda x: [x[:, :3], x[:, 1:5]], [18, 12]),
    # the transpose covers the same 36 elements
    (lambda x: [x, x.t()], [36, 0]),
    # every other row, then the rows between: disjoint, interleaved
    (lambda x: [x[::2], x[1::2]], [18, 18]),
    # a strided part first, then all of it: the other 18 elements are new
    (lambda x: [x[:, ::2], x], [18, 18]),
    # rows 0-1, rows 4-5 (disjoint), then rows 1-4: rows 2, 3 are new
    (lambda x: [x[:2], x[4:], x[1:5]], [12, 12, 12]),
    # a tensor alone in its storage keeps its stored elements (a broadcast row: 6)
    (lambda x: [x[0].expand(4, 6), x.clone()], [6, 36]),
])
def test_read_once_by_hand(make, want):
    x = torch.zeros(6, 6, dtype=torch.float16)
    assert read_once(make(x)) == [2 * n for n in want]


KV, ROPE, HEADS, LAYERS = 512, 64, 2, 2   # DeepSeek-V3's latent: kv_lora_rank 512 + rope 64


def _config() -> DeepseekV3Config:
    cfg = DeepseekV3Config(vocab_size=64, hidden_size=64, intermediate_size=32, moe_intermediate_size=16,
                           num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                           n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
                           topk_group=1, first_k_dense_replace=LAYERS, q_lora_rank=24, kv_lora_rank=KV,
                           qk_nope_head_dim=8, qk_rope_head_dim=ROPE, v_head_dim=8, max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    return cfg


def _decode_records(kind: str, batch: int, cached: int) -> list:
    """The attention records of one decode step after a ``cached``-token prefill: a real bf16
    model (absorbed), or the model `build_model` makes on fake tensors."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if kind == "real":
            torch.manual_seed(0)
            model = DeepseekV3ForCausalLM(_config()).to(torch.bfloat16).eval()
            absorb_mla(model)
            ids = torch.randint(0, 64, (batch, cached + 1))
            prompt, step = ids[:, :cached], ids[:, cached:]
        else:
            model = build_model(_config(), dtype=torch.bfloat16)
            prompt, step = fake_inputs(model, batch, cached, high=64), fake_inputs(model, batch, 1, high=64)
        cache = DynamicCache(config=model.config)
        model(prompt, past_key_values=cache, use_cache=True)
        with OpCounter() as c:
            model(step, past_key_values=cache, use_cache=True)
    return [r for r in c.profile.records if r.op == "aten.scaled_dot_product_attention"]


@pytest.mark.parametrize("kind", ["real", "fake"])
def test_a_deepseek_v3_decode_step_reads_576_elements_per_cached_token_per_layer(kind):
    """Batch 3, 6 cached tokens, 1 new: each layer's attention reads the query, 3*2 heads *
    (512 + 64) = 3,456 elements, and the latent once, 3 sequences * 7 tokens * 576 = 12,096
    elements (the value, its first 512 columns, adds none; it added 3*7*512 = 10,752 before),
    in bf16: (3,456 + 12,096) * 2 = 31,104 bytes per layer."""
    batch, cached = 3, 6
    recs = _decode_records(kind, batch, cached)
    assert len(recs) == LAYERS
    for r in recs:
        assert [nbytes for _, nbytes, _ in r.inputs] == [batch * HEADS * (KV + ROPE) * 2,
                                                         batch * (cached + 1) * (KV + ROPE) * 2, 0]
        assert r.cost.bytes_read == (3456 + 12096) * 2 == 31104
