"""DeepSeek-V3-class models in the serving cost model: multi-head latent attention's KV cache
(the latent, whole on every tensor-parallel device) and the ops that run only in multi-token
steps (their own group, fitted on the multi-token compositions and checked against direct
simulation at compositions the design did not count)."""

import copy
import warnings

import pytest
import torch

from dispatchprof.llm.models import build_model, load_config
from dispatchprof.llm.shape_generic import batch_step
from dispatchprof.serving.cost import DESIGN, Composition, count_steps, fit_design
from dispatchprof.sim.placement import scenarios_of
from test_serving_cost import direct


def deepseek(**sizes):
    """DeepSeek-V3's catalog config with ``sizes`` on top, built weightless in bf16."""
    config = copy.deepcopy(load_config("deepseek-v3"))
    for k, v in sizes.items():
        setattr(config, k, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(config, dtype=torch.bfloat16, generator=True)


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
    """A DeepSeek-V3 of 2 layers (one dense, one of 8 experts, 2 per token), hidden 256."""
    return deepseek(**SIZES)


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
