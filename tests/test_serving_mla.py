"""DeepSeek-V3-class models in the serving cost model: multi-head latent attention's KV cache
(the latent, whole on every tensor-parallel device) and the ops that run only in multi-token
steps (their own group, fitted on the multi-token compositions and checked against direct
simulation at compositions the design did not count)."""

import copy
import warnings

import pytest
import torch

from dispatchprof.llm.mla import LatentAttention, set_mla_prefill
from dispatchprof.llm.models import build_model, load_config
from dispatchprof.llm.shape_generic import batch_step
from dispatchprof.serving.cost import DESIGN, Composition, count_steps, fit_design
from dispatchprof.sim.placement import scenarios_of
from test_serving_cost import direct


def deepseek(prefill=None, **sizes):
    """DeepSeek-V3's catalog config with ``sizes`` on top, built weightless in bf16; with
    ``prefill`` ("absorbed" or "expanded") its multi-token queries in that form (built: expanded)."""
    config = copy.deepcopy(load_config("deepseek-v3"))
    for k, v in sizes.items():
        setattr(config, k, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(config, dtype=torch.bfloat16, generator=True)
    if prefill:
        set_mla_prefill(model, prefill)
    return model


@pytest.mark.parametrize("tp", [1, 8])
def test_mla_kv_bytes_per_token_are_the_latent(tp):
    """DeepSeek-V3's attention sizes, 2 dense layers: a token's cache is kv_lora_rank 512 +
    qk_rope_head_dim 64 elements per layer in bf16, whole on each of tp devices:
    2 x (512 + 64) x 2 = 2,304 bytes (the full model's 61 layers: 70,272), not its 128 heads'
    keys and values (2 x 128 x (192 + 128) x 2 / tp)."""
    model = deepseek(num_hidden_layers=2, first_k_dense_replace=2)
    steps = count_steps(model, 1, [2], scenarios_of("H200"), tp=tp)
    assert steps[0].kv_bytes_per_token == 2 * (512 + 64) * 2
    assert steps[0].kv_bytes_per_token * 61 / 2 == 70_272


SIZES = dict(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=8, num_experts_per_tok=2, n_group=1,
             topk_group=1, hidden_size=256, intermediate_size=512, moe_intermediate_size=128, num_attention_heads=4,
             num_key_value_heads=4, vocab_size=1000, q_lora_rank=64, kv_lora_rank=32, qk_rope_head_dim=16,
             qk_nope_head_dim=32, v_head_dim=32, head_dim=16)


@pytest.fixture(scope="module")
def tiny():
    """A DeepSeek-V3 of 2 layers (one dense, one of 8 experts, 2 per token), hidden 256, its
    prefills absorbed (SGLang's extend form): one op stream for every step."""
    return deepseek("absorbed", **SIZES)


def test_ops_only_in_multi_token_steps_are_costed_there(tiny):
    """DeepSeek-V3's attention output is copied (aten.clone) only when a sequence has more than
    one new token: that op forms its own group, costed in multi-token steps only; steps equal
    direct simulation to 1e-9 relative at compositions the design did not count (a prefill and a
    decode, batches of 4 keeping every expert busy), under the compiled runtime (the serving
    runtime's direct simulation takes an LM-head share on top of logits_to_keep=1; the cost
    model does not, test_serving_cost.test_serving_runtime_counts_last_token_logits_once)."""
    scenarios = scenarios_of("H100-SXM")
    step = batch_step(tiny)
    assert step == 4                                       # 8 experts / gcd(8, 2)
    model = fit_design(tiny, scenarios, design=tuple((b * step, t) for b, t in DESIGN),
                       runtime="compiled")[1]["H100-SXM"]
    multi = [g for g in model.groups if g.multi]
    assert [(g.form.op, g.count) for g in multi] == [("aten.clone", 2)]       # one per layer
    assert model.present(Composition.uniform(4, 1, 9)) is not None
    assert model.present(Composition.uniform(4, 6, 0)) is None
    for b, q, p in [(8, 6, 0), (4, 1, 9)]:
        want = direct(tiny, b, q, p, scenarios)["H100-SXM"]
        got = model.cost(Composition.uniform(b, q, p))
        assert got.time_s == pytest.approx(want[0], rel=1e-9), (b, q, p)
        assert got.energy_j == pytest.approx(want[1], rel=1e-9), (b, q, p)


@pytest.fixture(scope="module")
def tiny_expanded():
    """The tiny DeepSeek-V3 as built: prefills in the engines' MHA form, decodes absorbed."""
    model = deepseek(**SIZES)
    assert {m.prefill for m in model.modules() if isinstance(m, LatentAttention)} == {"expanded"}
    return model


def test_expanded_prefill_runs_a_mixed_step_as_two_batches(tiny_expanded):
    """Prefills expanded, decodes absorbed: the decode stream has ops of its own (the absorbed
    core), so the step cost model splits a mixed step's batch (decodes through the absorbed core,
    prefills through kv_b_proj and the expanded core). Uniform steps equal direct simulation
    (1e-9 relative) at compositions the design did not count; in a step of 4 prompts of 6 tokens
    beside 4 decodes after 9 cached tokens, each core's attention takes its own sequences' MACs,
    by hand: expanded 4 x 4 heads x 6 x 6 scores x (nope 32 + rope 16 + v 32) = 46,080 per layer,
    absorbed 4 x 4 heads x 10 keys x (latent 32 + rope 16 + latent 32) = 12,800."""
    from dispatchprof.serving.work import QUANTITIES
    scenarios = scenarios_of("H100-SXM")
    step = batch_step(tiny_expanded)
    model = fit_design(tiny_expanded, scenarios, design=tuple((b * step, t) for b, t in DESIGN),
                       runtime="compiled")[1]["H100-SXM"]
    assert model.split_batch
    assert {g.form.scope.rsplit(".", 1)[-1] for g in model.groups if g.single} == {"absorbed"}
    assert {g.form.scope.rsplit(".", 1)[-1] for g in model.groups if g.multi} == {"expanded", "kv_b_proj"}
    for b, q, p in [(8, 6, 0), (4, 1, 9)]:
        want = direct(tiny_expanded, b, q, p, scenarios)["H100-SXM"]
        got = model.cost(Composition.uniform(b, q, p))
        assert got.time_s == pytest.approx(want[0], rel=1e-9), (b, q, p)
        assert got.energy_j == pytest.approx(want[1], rel=1e-9), (b, q, p)
    decodes, prompts = Composition.uniform(4, 1, 9), Composition.uniform(4, 6, 0)
    mixed = prompts.merge(decodes)
    assert mixed == Composition.of([(6, 6)] * 4 + [(1, 10)] * 4)
    macs = QUANTITIES.index("macs")
    sdpa = {g.form.scope.rsplit(".", 1)[-1] + ("/decode" if g.single else ""): v[macs]
            for g, v in zip(model.groups, model.group_values(mixed))
            if g.form.op == "aten.scaled_dot_product_attention"}
    assert sdpa == {"expanded": 4 * 4 * 6 * 6 * (32 + 16 + 32), "absorbed/decode": 4 * 4 * 10 * (32 + 16 + 32)}
    both = model.cost(mixed).time_s
    assert model.cost(prompts).time_s < both < model.cost(prompts).time_s + model.cost(decodes).time_s


def test_absorbed_prefill_counts_3_4x_the_engines_attention_for_deepseek_v3():
    """DeepSeek-V3's sizes (128 heads, qk_nope 128, rope 64, v 128, kv_lora 512): one prompt of 64
    tokens, its fused attention's MACs per query-key pair and head: absorbed (512 + 64) + 512 =
    1,088, expanded (128 + 64) + 128 = 320."""
    from dispatchprof import OpCounter, fake_inputs
    from transformers import DynamicCache

    for form, per_pair in (("absorbed", 1088), ("expanded", 320)):
        model = deepseek(form, num_hidden_layers=1, first_k_dense_replace=1, vocab_size=1000)
        with torch.no_grad(), OpCounter() as c:
            model(fake_inputs(model, 1, 64), past_key_values=DynamicCache(config=model.config), use_cache=True)
        (sdpa,) = [r for r in c.profile.records if r.op == "aten.scaled_dot_product_attention"]
        assert sdpa.cost.macs == 128 * 64 * 64 * per_pair, form
