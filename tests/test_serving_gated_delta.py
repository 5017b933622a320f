"""Qwen3.5's gated delta-net as serving engines run it (dispatchprof.llm.gated_delta and
op_formulas.linear_attention): the same function as transformers' layer, the fused ops' counts
by hand and against the counted reference recurrence, and the serving cost model over a hybrid
model (one op stream; the attention gate's two forms) equal to direct simulation."""

import copy
import dataclasses
import random
import warnings

import pytest
import torch
import transformers

from dispatchprof import OpCounter
from dispatchprof.llm.gated_delta import GatedDeltaKernels
from dispatchprof.llm.models import build_model, load_config
from dispatchprof.llm.shape_generic import batch_step
from dispatchprof.serving.cost import DESIGN, Composition, fit_design
from dispatchprof.sim.placement import scenarios_of
from test_serving_cost import direct

SIZES = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             linear_key_head_dim=8, linear_value_head_dim=12, linear_num_key_heads=2, linear_num_value_heads=4,
             num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
             vocab_size=100)


def qwen35_config(**sizes):
    """Qwen3.5-397B-A17B's catalog config with ``sizes`` on top (its layer types re-derived: three
    gated delta-nets, then one attention layer)."""
    config = load_config("qwen3.5-397b-a17b").to_dict()
    config.pop("layer_types", None)
    config.update(sizes)
    return type(load_config("qwen3.5-397b-a17b"))(**config)


@pytest.fixture(scope="module")
def tiny():
    """A weightless Qwen3.5-MoE of 4 layers (3 gated delta-nets, 1 gated attention; 8 experts)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(qwen35_config(**SIZES), dtype=torch.bfloat16)


def test_the_fused_layer_computes_transformers_function():
    """Real float32 weights: a 7-token prompt, then two one-token steps (transformers' chunked
    path, then its recurrent one) give the same logits with the fused layers, to 1e-6 of their
    largest."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = transformers.AutoModelForCausalLM.from_config(qwen35_config(**SIZES)).float().eval()
    fused = copy.deepcopy(reference)
    for layer in fused.model.layers:
        if hasattr(layer, "linear_attn"):
            layer.linear_attn = GatedDeltaKernels(layer.linear_attn)
    ids = torch.randint(0, 100, (2, 9))

    def logits(model):
        cache = transformers.DynamicCache(config=model.config)
        return [model(ids[:, a:b], past_key_values=cache, use_cache=True).logits for a, b in ((0, 7), (7, 8), (8, 9))]

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = logits(reference), logits(fused)
    for w, g in zip(want, got):
        assert (w - g).abs().max() <= 1e-6 * w.abs().max()


def _records(fn, *args):
    with OpCounter() as c:
        fn(*args)
    return c.profile.records


def test_gated_delta_rule_counts_by_hand():
    """B 2, S 3, 1 key head of dk 4, 2 value heads of dv 3, bf16 (state float32): per token and
    value head MULT 4*12 + 3 + 16 = 67, ADD 36 - 3 + 8 = 41, DIV 4 + 2, SQRT 2, EXP 1, MACs 36;
    times 2 * 3 * 2 = 12. Read: q, k 48 B each, v 72, g (float32) 48, beta 24, state
    2 * 2 * 12 * 4 = 192 (none passed: counted all the same); written: the output 72 and the state 192."""
    bf = torch.bfloat16
    q, k = torch.randn(2, 3, 1, 4, dtype=bf), torch.randn(2, 3, 1, 4, dtype=bf)
    v, g, beta = torch.randn(2, 3, 2, 3, dtype=bf), -torch.rand(2, 3, 2), torch.rand(2, 3, 2, dtype=bf)
    [r] = _records(torch.ops.dispatchprof.gated_delta_rule, q, k, v, g, beta, None)
    c = r.cost
    assert (c.mult, c.add, c.div, c.sqrt, c.exp, c.cmp, c.other, c.macs) == (804, 492, 72, 24, 12, 0, 0, 432)
    assert (c.bytes_read, c.bytes_written) == (48 + 48 + 72 + 48 + 24 + 192, 72 + 192)


def test_gated_delta_rule_counts_the_reference_recurrence():
    """The op's seven counts equal the counter's count of transformers' token-by-token reference
    (torch_recurrent_gated_delta_rule with the in-kernel L2 norm) on the same shapes, an
    independent count of the same arithmetic (the reference has no contractions: MACs aside)."""
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import torch_recurrent_gated_delta_rule

    q, k = torch.randn(2, 3, 2, 8), torch.randn(2, 3, 2, 8)
    v, g, beta = torch.randn(2, 3, 4, 6), -torch.rand(2, 3, 4), torch.rand(2, 3, 4)
    state = torch.randn(2, 4, 8, 6)
    [fused] = _records(torch.ops.dispatchprof.gated_delta_rule, q, k, v, g, beta, state)
    reference = _records(lambda: torch_recurrent_gated_delta_rule(
        q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True))
    fields = ("add", "mult", "div", "sqrt", "exp", "cmp", "other")
    assert [getattr(fused.cost, f) for f in fields] == [sum(getattr(r.cost, f) for r in reference) for f in fields]


def test_causal_conv1d_counts_by_hand():
    """B 2, S 5, 6 channels, kernel 4, bf16: per token and channel 4 MULT, 3 ADD, 4 MACs and a
    silu (1 EXP, 1 ADD, 1 DIV, 1 MULT): 60 outputs. Read: x 120 B, weight 48, state 2 x 6 x 3 x 2 =
    72 (none passed: counted all the same); written: the output 120 and the state 72."""
    bf = torch.bfloat16
    [r] = _records(torch.ops.dispatchprof.causal_conv1d, torch.randn(2, 5, 6, dtype=bf), torch.randn(6, 4, dtype=bf),
                   None)
    c = r.cost
    assert (c.mult, c.add, c.div, c.exp, c.macs) == (300, 240, 60, 60, 240)
    assert (c.bytes_read, c.bytes_written) == (120 + 48 + 72, 120 + 72)


def test_causal_conv1d_carries_its_state():
    """A prompt of 5 then one token equal the 6-token convolution's last output, and the state
    is the last 3 inputs."""
    x, w = torch.randn(1, 6, 6), torch.randn(6, 4)
    whole, _ = torch.ops.dispatchprof.causal_conv1d(x, w, None)
    first, state = torch.ops.dispatchprof.causal_conv1d(x[:, :5], w, None)
    last, state2 = torch.ops.dispatchprof.causal_conv1d(x[:, 5:], w, state)
    assert torch.allclose(torch.cat([first, last], 1), whole, atol=1e-6)
    assert torch.equal(state2, x[:, 3:].transpose(1, 2))


def test_hybrid_model_steps_equal_direct_simulation(tiny):
    """One op stream for prompts and decodes: each gated delta-net is its projections, the two
    fused ops, the gates, the gated norm and the output projection in every step. The attention
    gate's sigmoid runs in the copy of the attention output's kernel in multi-token steps and in its
    own in decode steps: two groups, one per step kind. Steps equal direct simulation to 1e-9
    relative at compositions the design did not count (prefills and decodes)."""
    scenarios = scenarios_of("H100-SXM")
    step = batch_step(tiny)
    model = fit_design(tiny, scenarios, design=tuple((b * step, t) for b, t in DESIGN),
                       runtime="compiled")[1]["H100-SXM"]
    fused = {g.form.op: g.count for g in model.groups if g.form.op.startswith("dispatchprof.")}
    assert fused == {"dispatchprof.causal_conv1d": 3, "dispatchprof.gated_delta_rule": 3}
    sigmoid = sorted((g.multi, g.single, g.form.kernel) for g in model.groups
                     if g.form.op == "aten.sigmoid" and "self_attn" in model.scopes[model.order.index(
                         model.groups.index(g))])
    assert sigmoid == [(False, True, True), (True, False, False)]
    rng = random.Random(3)
    for b, q, p in [(8, 6, 0), (4, 9, 0), (4, 1, rng.randint(8, 40)), (12, 1, 3)]:
        want = direct(tiny, b, q, p, scenarios)["H100-SXM"]
        got = model.cost(Composition.uniform(b, q, p))
        assert got.time_s == pytest.approx(want[0], rel=1e-9), (b, q, p)
        assert got.energy_j == pytest.approx(want[1], rel=1e-9), (b, q, p)


def test_sglang_runs_a_gated_delta_model_without_overlap(tiny):
    """SGLang's default mamba radix cache turns its overlap scheduler off for models with linear
    attention (engines.yaml, linear_attention_overlap): a step is the host's time plus the device's;
    vLLM 0.14 keeps its async scheduling, and SGLang keeps overlapping a model without such layers."""
    from dispatchprof.serving.engines import engine_preset
    from dispatchprof.serving.serve import prepare_serving, scheduler_config

    sglang = prepare_serving(tiny, "B200", engine="sglang")
    vllm = dataclasses.replace(sglang, engine=engine_preset("vllm", "0.14"))
    assert sglang.state is not None and not sglang.overlaps and vllm.overlaps
    assert sglang.engine.step_s(1e-3, 8, overlap=sglang.overlaps) == pytest.approx(1e-3 + (300 + 8 * 40) * 1e-6)
    plain = dataclasses.replace(sglang, state=None)
    assert plain.overlaps and plain.engine.step_s(1e-3, 8, overlap=plain.overlaps) == pytest.approx(1e-3)
    config, _ = scheduler_config(sglang, [], 1, max_seqs=None, max_batched_tokens=None, chunked_prefill=None,
                                 block_size=None, memory_utilization=None, kv_blocks=64, prefix_hit=0.0)
    assert not config.plan_ahead
