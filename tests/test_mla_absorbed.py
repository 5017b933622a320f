"""Multi-head latent attention as engines run it (dispatchprof.llm.mla): the same outputs as
transformers' DeepseekV3Attention, a latent-only cache, and a decode step counted by hand."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, DynamicCache

from dispatchprof import OpCounter
from dispatchprof.llm.mla import LatentAttention, absorb_mla
from dispatchprof.llm.models import build_model

H, NOPE, ROPE, KV, V = 4, 8, 4, 16, 8   # heads, qk_nope, qk_rope, kv_lora_rank, v_head_dim


def tiny_config() -> DeepseekV3Config:
    """One dense DeepSeek-V3 layer with small, distinct MLA sizes."""
    cfg = DeepseekV3Config(vocab_size=64, hidden_size=64, intermediate_size=32, moe_intermediate_size=16,
                           num_hidden_layers=1, num_attention_heads=H, num_key_value_heads=H,
                           n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
                           topk_group=1, first_k_dense_replace=1, q_lora_rank=24, kv_lora_rank=KV,
                           qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V,
                           max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    return cfg


def run_steps(model: torch.nn.Module, ids: torch.Tensor, cfg: DeepseekV3Config) -> tuple[list, DynamicCache]:
    """Prefill 5 tokens, then decode tokens 5 and 6 one at a time, through one cache."""
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        outs = [model(ids[:, :5], past_key_values=cache, use_cache=True).logits]
        for i in (5, 6):
            outs.append(model(ids[:, i:i + 1], past_key_values=cache, use_cache=True).logits)
    return outs, cache


@pytest.mark.parametrize("prefill", ["absorbed", "expanded"])
def test_prefill_then_decode_equal_transformers_unabsorbed_attention(prefill):
    torch.manual_seed(0)
    cfg = tiny_config()
    ref = DeepseekV3ForCausalLM(cfg).float().eval()
    ours = copy.deepcopy(ref)
    assert absorb_mla(ours, prefill) == 1 and isinstance(ours.model.layers[0].self_attn, LatentAttention)
    ids = torch.randint(0, 64, (2, 7))
    (want, _), (got, cache) = run_steps(ref, ids, cfg), run_steps(ours, ids, cfg)
    # fp32: absorption reassociates the matmuls, so decode differs by rounding only
    for w, g in zip(want, got):
        assert torch.allclose(w, g, rtol=1e-5, atol=1e-5), (w - g).abs().max()
    # the cache holds the latent only: kv_lora + rope elements per token, values zero-wide
    assert tuple(cache.layers[0].keys.shape) == (2, 1, 7, KV + ROPE)
    assert cache.layers[0].values.numel() == 0


def counted_decode(batch: int, context: int) -> OpCounter:
    """The count of one absorbed decode step of the tiny bf16 model: ``batch`` sequences, each
    with ``context - 1`` cached tokens before it."""
    torch.manual_seed(0)
    cfg = tiny_config()
    model = DeepseekV3ForCausalLM(cfg).to(torch.bfloat16).eval()
    absorb_mla(model)
    ids = torch.randint(0, 64, (batch, context))
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        model(ids[:, :-1], past_key_values=cache, use_cache=True)
        with OpCounter() as c:
            model(ids[:, -1:], past_key_values=cache, use_cache=True)
    return c


def test_one_decode_step_counted_by_hand():
    c = counted_decode(batch=1, context=7)
    t, b = 7, 2                       # context after the step, bf16 bytes
    rec = [r for r in c.profile.records if r.scope == "model.layers.0.self_attn"]
    bmm = [r.cost.macs for r in rec if r.op == "aten.bmm"]
    assert bmm == [H * NOPE * KV, H * KV * V]        # W_UK absorption 4*8*16 = 512; W_UV 4*16*8 = 512
    (sdpa,) = [r for r in rec if r.op == "aten.scaled_dot_product_attention"]
    assert sdpa.cost.macs == H * t * (KV + ROPE) + H * t * KV   # scores 560 + output 448
    # query H*(KV+ROPE); key = the latent cache, T*(KV+ROPE) (shared by all heads: stored once);
    # value = the latent's first KV columns, a view of the key's storage: read with it, no bytes of
    # its own (it was T*KV = 112 elements more before docs/counting.md's read-once rule)
    assert sdpa.cost.bytes_read == (H * (KV + ROPE) + t * (KV + ROPE)) * b == 440
    assert [nbytes for _, nbytes, _ in sdpa.inputs] == [H * (KV + ROPE) * b, t * (KV + ROPE) * b, 0]
    assert sdpa.cost.bytes_written == H * KV * b
    # no op expands the latent through kv_b_proj in decode
    assert not [r for r in c.profile.records if r.scope.endswith("kv_b_proj")]


def test_build_model_swaps_mla_on_fake_tensors_and_counts_a_decode_step():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(tiny_config(), dtype=torch.bfloat16)
    assert isinstance(model.model.layers[0].self_attn, LatentAttention)
    from dispatchprof import fake_inputs
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(fake_inputs(model, 1, 5, high=64), past_key_values=cache, use_cache=True)
        with OpCounter() as c:
            model(fake_inputs(model, 1, 1, high=64), past_key_values=cache, use_cache=True)
    assert c.unknown_ops() == []
    (sdpa,) = [r for r in c.profile.records if r.op == "aten.scaled_dot_product_attention"]
    assert sdpa.cost.macs == H * 6 * (KV + ROPE) + H * 6 * KV


@pytest.mark.parametrize("name", ["q_proj", "q_a_proj"])
def test_query_projection_kind_is_kept(name):
    cfg = tiny_config()
    if name == "q_proj":
        cfg.q_lora_rank = None
    attn = DeepseekV3ForCausalLM(cfg).model.layers[0].self_attn
    ours = LatentAttention(attn)
    assert getattr(ours, name) is getattr(attn, name)
    assert dict(ours.named_parameters()).keys() == dict(attn.named_parameters()).keys()


def test_an_unknown_prefill_form_is_refused():
    attn = DeepseekV3ForCausalLM(tiny_config()).model.layers[0].self_attn
    with pytest.raises(ValueError, match=r"prefill must be one of \('absorbed', 'expanded'\), not 'mha'"):
        LatentAttention(attn, "mha")


@pytest.mark.parametrize("prefill, kv_b_proj_macs", [("expanded", 7 * KV * H * (NOPE + V)), ("absorbed", 0)])
def test_prefill_forms_count_their_own_algebra(prefill, kv_b_proj_macs):
    """A 7-token prefill: expanded runs kv_b_proj on every token (7*16*4*16 = 7,168 MACs) and
    attention 4*7*7*(12 + 8) = 3,920 MACs; absorbed runs no kv_b_proj and attention
    4*7*7*(20 + 16) = 7,056 MACs."""
    cfg = tiny_config()
    model = DeepseekV3ForCausalLM(cfg).to(torch.bfloat16).eval()
    absorb_mla(model, prefill)
    with torch.no_grad(), OpCounter() as c:
        model(torch.randint(0, 64, (1, 7)), past_key_values=DynamicCache(config=cfg), use_cache=True)
    recs = c.profile.records
    assert sum(r.cost.macs for r in recs if r.scope.endswith("kv_b_proj")) == kv_b_proj_macs
    (sdpa,) = [r for r in recs if r.op == "aten.scaled_dot_product_attention"]
    width = NOPE + ROPE + V if prefill == "expanded" else 2 * KV + ROPE
    assert sdpa.cost.macs == H * 7 * 7 * width


def test_a_batched_decode_reads_the_absorbed_weights_once():
    """4 sequences, one token each: W_UK (4*8*16) and W_UV (4*16*8) are read once in bf16, not
    once per sequence: bytes read = (queries 4*4*8 + W_UK 512) * 2 and (4*4*16 + 512) * 2."""
    c = counted_decode(batch=4, context=4)
    bmm = [r.cost for r in c.profile.records if r.op == "aten.bmm"]
    assert [x.bytes_read for x in bmm] == [(4 * H * NOPE + H * NOPE * KV) * 2, (4 * H * KV + H * KV * V) * 2]
    assert [x.macs for x in bmm] == [4 * H * NOPE * KV, 4 * H * KV * V]


def test_tensor_parallelism_splits_latent_attention_as_any_attention_block():
    """Its class is an attention block to dispatchprof.sim.parallel: under tp its ops (projections,
    the fused attention) run 1/tp of their work on each device, like the MLP's."""
    from dispatchprof.sim.parallel import split_blocks, tp_split
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(tiny_config(), dtype=torch.bfloat16)
    from dispatchprof import fake_inputs
    with torch.no_grad(), OpCounter() as c:
        model(fake_inputs(model, 1, 5, high=64))
    p = c.profile
    blocks = split_blocks({s.name: s.module_type for s in p.scopes}, p.parents())
    shares = dict(zip((r.scope for r in p.records), (s for s, _ in tp_split(p.records, blocks, 4))))
    attn = [r for r in p.records if ".self_attn" in r.scope]
    assert attn and all(shares[r.scope] == 0.25 for r in attn)
    assert any(r.op == "aten.scaled_dot_product_attention" for r in attn)
