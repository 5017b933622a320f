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
    rec = [r for r in c.profile.records if r.scope == "model.layers.0.self_attn.absorbed"]   # AbsorbedCore
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


def test_tensor_parallelism_splits_latent_attention_by_heads_and_runs_the_latent_whole():
    """Its class is an attention block to dispatchprof.sim.parallel: under tp the per-head ops run
    1/tp of their work on each device, while the latent's down-projections, their norms, the
    key's rotary, the latent's concatenation and the cache update run whole on every device
    (vLLM's and SGLang's MLA); the ops that read the latent read it whole."""
    from dispatchprof.sim.parallel import split_blocks, tp_split
    c = counted_decode(batch=2, context=4)
    p = c.profile
    blocks = split_blocks({s.name: s.module_type for s in p.scopes}, p.parents())
    split = tp_split(p.records, blocks, 4)
    attn = [(r, s) for r, s in zip(p.records, split) if ".self_attn" in r.scope]
    child = lambda r: r.scope.rsplit(".", 1)[-1]                        # noqa: E731
    whole = [r for r, (share, _, _) in attn if share == 1.0]
    assert {child(r) for r in whole} == {"q_a_proj", "q_a_layernorm", "kv_a_proj_with_mqa", "kv_a_layernorm",
                                          "self_attn"}
    # in the block's own scope: the key's rotary (one latent head: [2, 1, 1, 2]), the latent's cat
    # [2, 1, 1, 16 + 4] and the cache update (3 cached + 1 new tokens, keys and zero-wide values)
    own = [(r.op, r.shapes[0]) for r in whole if child(r) == "self_attn"]
    assert own == [("aten.mul", (2, 1, 1, 2))] * 2 + [("aten.sub", (2, 1, 1, 2))] + \
        [("aten.mul", (2, 1, 1, 2))] * 2 + [("aten.add", (2, 1, 1, 2)), ("aten.cat", (2, 1, 1, 2)),
                                            ("aten.cat", (2, 1, 1, KV)), ("aten.cat", (2, 1, 3, KV + ROPE)),
                                            ("aten.cat", (2, 1, 3, 0))]
    split_ops = {(r.op, child(r)): (share, reduce, read_whole) for r, (share, reduce, read_whole) in attn
                 if share != 1.0}
    b = 2                                                               # bf16 bytes
    assert split_ops[("aten.mm", "q_b_proj")] == (0.25, 0, 2 * 24 * b)  # reads q_a_layernorm's output whole
    assert split_ops[("aten.scaled_dot_product_attention", "absorbed")] == (0.25, 0, 2 * 4 * (KV + ROPE) * b)
    assert split_ops[("aten.mm", "o_proj")] == (0.25, 2 * 64 * b, 0)    # the block's all-reduce
    assert split_ops[("aten.bmm", "absorbed")][2] == 0
    assert all(share == 0.25 for share, _, _ in split_ops.values())


def test_the_latent_read_whole_is_kept_out_of_the_device_share():
    """The fused attention of the decode above at tp 4: it reads 640 B (queries 2 x 4 x 20 x 2,
    the latent 2 x 4 x 20 x 2 = 320) and writes 2 x 4 x 16 x 2 = 256 B; each device moves
    (896 - 320) / 4 + 320 = 464 B, not 896 / 4 = 224."""
    from dispatchprof.serving.work import op_form, op_timing, quantities
    from dispatchprof import load_device
    from dispatchprof.sim.timing import OpPlan, time_op
    c = counted_decode(batch=2, context=4)
    (sdpa,) = [r for r in c.profile.records if r.op == "aten.scaled_dot_product_attention"]
    assert (sdpa.cost.bytes_read, sdpa.cost.bytes_written) == (640, 256)
    h100 = load_device("H100-SXM")
    plan = OpPlan(share=0.25, group=4, whole_bytes=320)
    assert time_op(0, sdpa, [h100], set(), None, False, plan, moves=()).traffic_bytes == 464
    assert time_op(0, sdpa, [h100], set(), None, False, OpPlan(share=0.25, group=4), moves=()).traffic_bytes == 224
    form = op_form(sdpa, h100.name, False, plan, ())
    assert op_timing(form, quantities(sdpa, plan, ()), {h100.name: h100}, None).traffic_bytes == 464


def weights_per_device(prefill: str, tp: int) -> tuple[int, OpCounter]:
    """Weights on one H100 of a tp group (bytes) from a counted 5-token prefill of the tiny bf16
    model in ``prefill``'s form, and the count."""
    from dispatchprof import load_device
    from dispatchprof.sim.capacity import check_capacity
    from dispatchprof.sim.placement import Placement
    torch.manual_seed(0)
    cfg = tiny_config()
    model = DeepseekV3ForCausalLM(cfg).to(torch.bfloat16).eval()
    absorb_mla(model, prefill)
    with torch.no_grad(), OpCounter() as c:
        model(torch.randint(0, 64, (1, 5)), past_key_values=DynamicCache(config=cfg), use_cache=True)
    (check,) = check_capacity(c.profile, Placement((("*", load_device("H100-SXM")),)), None, tp=tp)
    return check.weights_bytes, c


def test_each_device_holds_the_latent_projections_whole():
    """Weights per device at tp 4 of the tiny model (bf16, a prefill in the expanded form, so every
    module runs): outside the blocks embeddings 64 x 64, LM head 64 x 64 and three norms of 64
    (8,384 parameters) whole; the latent's q_a_proj 64 x 24, q_a_layernorm 24, kv_a_proj_with_mqa
    64 x 20 and kv_a_layernorm 16 (2,856) whole; q_b_proj 24 x 48, kv_b_proj 16 x 64, o_proj 32 x 64
    and the MLP's three 64 x 32 (10,368) a quarter each: 13,832 parameters, 27,664 bytes."""
    assert weights_per_device("expanded", 4)[0] == 2 * (8384 + 2856 + 10368 // 4) == 27664


def test_the_absorbed_form_splits_kv_b_proj_though_it_never_runs():
    """In the absorbed form kv_b_proj's weight is read through views (W_UK, W_UV) and the module
    never runs; its 16 x 64 parameters still belong to the split attention block: a quarter per
    device at tp 4, the same 27,664 bytes as the expanded count (not 27,664 + 3/4 x 2,048)."""
    weights, c = weights_per_device("absorbed", 4)
    assert not [s for s in c.profile.scopes if s.name.endswith("kv_b_proj")]
    assert weights == 27664
    assert weights_per_device("absorbed", 1)[0] == 2 * (8384 + 2856 + 10368) == 43216


def test_a_generation_profile_holds_the_whole_latent_on_every_device():
    """profile_generation at tp 2: the capacity check's KV cache is the whole latent, 2 sequences x
    (6 prompt + 2 new - 1) tokens x (16 + 4) x 2 bytes = 560 B, on each device (not halved)."""
    from dispatchprof.llm.generation import profile_generation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(tiny_config(), dtype=torch.bfloat16)
        g = profile_generation(model, 2, 6, 2, devices="H100-SXM", tp=2)
    assert g.kv_cache_bytes == 2 * 7 * (KV + ROPE) * 2 == 560
    assert [c.kv_bytes for c in g.devices["H100-SXM"].capacity] == [560]
