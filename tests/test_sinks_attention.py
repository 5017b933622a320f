"""gpt-oss's attention with sinks as one fused attention kernel (dispatchprof.llm.sinks_attention):
the same logits as transformers' eager GptOssAttention on real weights, one attention op per layer
in a counted decode step, and the fused op's counts for one tiny shape worked by hand."""

import copy
import warnings

import pytest
import torch
import transformers as tf
from transformers import DynamicCache

from dispatchprof.count.fake import fake_model
from dispatchprof.llm.generation import count_steps
from dispatchprof.llm.models import BALANCED_EXPERTS, build_model, register_balanced_experts
from dispatchprof.llm.sinks_attention import SinkAttention, fuse_sink_attention, sink_attention
from dispatchprof.sim.placement import scenarios_of

# 2 layers (sliding window 4, then full), 4 query heads over 2 kv heads of 8
TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4)


def tiny_config(**extra):
    return tf.GptOssConfig(**TINY, **extra)


@pytest.fixture(scope="module")
def pair():
    """transformers' gpt-oss on random fp32 weights (sinks drawn too: its init leaves them at 0),
    and a copy whose attention is swapped."""
    torch.manual_seed(0)
    config = tiny_config(attn_implementation="eager")
    assert config.layer_types == ["sliding_attention", "full_attention"]
    model = tf.GptOssForCausalLM(config).eval()
    for name, p in model.named_parameters():
        if name.endswith("sinks"):
            torch.nn.init.normal_(p, std=2.0)
    swapped = copy.deepcopy(model)
    assert fuse_sink_attention(swapped) == 2
    return model, swapped


@pytest.mark.parametrize("steps", [(9, 1), (9, 3, 1), (3, 1)], ids=["past-window", "chunk", "within-window"])
def test_same_logits_as_transformers(pair, steps):
    """Prefill, then chunks and decode steps over one cache each: logits to 1e-5 (fp32). A prefill of 9
    passes the sliding window of 4 (the sliding layer's cache keeps 3 tokens); one of 3 does not."""
    model, swapped = pair
    torch.manual_seed(1)
    caches = DynamicCache(config=model.config), DynamicCache(config=model.config)
    with torch.no_grad():
        for q in steps:
            ids = torch.randint(0, 64, (2, q))
            a = model(ids, past_key_values=caches[0], use_cache=True).logits
            b = swapped(ids, past_key_values=caches[1], use_cache=True).logits
            torch.testing.assert_close(b, a, atol=1e-5, rtol=0)
    assert caches[1].layers[0].keys.shape[-2] == min(sum(steps), 3)      # the window's cache, as the model keeps it
    assert caches[1].layers[1].keys.shape[-2] == sum(steps)


def test_same_module_output_and_weights(pair):
    """The swapped module owns the original's parameters under the same names."""
    model, swapped = pair
    attn = swapped.model.layers[1].self_attn
    assert isinstance(attn, SinkAttention)
    assert [n for n, _ in attn.named_parameters()] == [n for n, _ in model.model.layers[1].self_attn.named_parameters()]
    assert attn.sliding_window is None and swapped.model.layers[0].self_attn.sliding_window == 4


def test_sink_folded_into_the_denominator_by_hand():
    """One head, one query, two keys with scores 0 and log 3 (scale 1), values 1 and 2, sink log 4:
    weights e^0, 3, 4 over 8 -> out = (1 * 1 + 3 * 2) / 8 = 0.875 (no sink: 7 / 4 = 1.75)."""
    q = torch.tensor([[[[1.0, 0.0]]]])
    k = torch.tensor([[[[0.0, 0.0], [torch.log(torch.tensor(3.0)).item(), 0.0]]]])
    v = torch.tensor([[[[1.0, 0.0], [2.0, 0.0]]]])
    out = sink_attention(q, k, v, torch.log(torch.tensor([4.0])), None, 1.0)
    assert out[0, 0, 0].tolist() == pytest.approx([0.875, 0.0], abs=1e-6)


def test_chunk_without_mask_refused():
    q, kv = torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 3, 4)
    with pytest.raises(ValueError, match="a step of 2 queries over 3 keys needs an attention mask"):
        sink_attention(q, kv, kv, torch.zeros(1), None, 1.0)


def _decode_records(model):
    """The records of a decode step (2 sequences, 1 token after 6) counted under the serving runtime."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c, spans = count_steps(model, 2, [6, 1], scenarios_of("H100-SXM"), runtime="serving", logits_to_keep=1)
    return c.profile.records[spans[1].start:spans[1].end]


def _attention_ops(records, layer):
    return [r.op for r in records if r.scope == f"model.layers.{layer}.self_attn"]


@pytest.fixture(scope="module")
def decode_steps():
    """A decode step of the tiny gpt-oss as build_model builds it (swapped) and as transformers does."""
    register_balanced_experts()
    config = tiny_config()
    original = fake_model(lambda: tf.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                                      experts_implementation=BALANCED_EXPERTS),
                          dtype=torch.bfloat16)
    return _decode_records(build_model(copy.deepcopy(config), dtype=torch.bfloat16)), _decode_records(original)


def test_decode_step_has_one_attention_op_per_layer(decode_steps):
    """Swapped, the attention module's own ops (projections aside) per layer: rotary on q and k, the
    cache's two appends, one fused attention op and the sink's correction (lse - sink, sigmoid, cast,
    product); transformers' eager form copies K and V per query head (two clones) and runs a bmm, the
    scale, the mask, the sink cat, a max, a subtraction, a softmax and a bmm there instead."""
    swapped, original = decode_steps
    rotary = ["aten.mul", "aten.mul", "aten.sub", "aten.mul", "aten.mul", "aten.add", "aten.cat"] * 2
    for layer in (0, 1):
        assert _attention_ops(swapped, layer) == rotary + ["aten.cat", "aten.cat"] + [
            "aten._scaled_dot_product_flash_attention_for_cpu", "aten.sub", "aten.sigmoid", "aten._to_copy",
            "aten.mul"]
        assert _attention_ops(original, layer) == rotary + ["aten.cat", "aten.cat"] + [
            "aten.clone", "aten.clone", "aten.bmm", "aten.mul", "aten.add", "aten.cat", "aten.max", "aten.sub",
            "aten._softmax", "aten.bmm"]
    assert sum("attention" in r.op for r in swapped) == 2
    assert sum("attention" in r.op for r in original) == 0
    assert len(original) - len(swapped) == 2 * 5     # 10 eager ops against 5 per layer


def test_fused_op_counts_by_hand(decode_steps):
    """The decode step's fused op in bf16, 2 sequences, 4 heads over 2 kv heads of 8, after 6 tokens:
    full layer: 7 keys: MACs 2*4*7*(8+8) = 896; reads q 2*4*1*8*2 = 128 B, k and v 2*2*7*8*2 = 448 B
    each, the mask (2,1,1,7) bf16 28 B: 1,052 B; writes the output 128 B and the fp32 log-sum-exp
    2*4*1*4 = 32 B: 160 B. Sliding layer (window 4: 3 cached keys + 1): MACs 2*4*4*16 = 512, reads
    128 + 256 + 256 + 16 = 656 B, writes 160 B."""
    swapped, _ = decode_steps
    fused = {r.scope: r for r in swapped if "attention" in r.op}
    full, sliding = fused["model.layers.1.self_attn"], fused["model.layers.0.self_attn"]
    assert full.shapes[:3] == ((2, 4, 1, 8), (2, 2, 7, 8), (2, 2, 7, 8))
    assert (full.cost.macs, full.cost.bytes_read, full.cost.bytes_written) == (896, 1_052, 160)
    assert (sliding.cost.macs, sliding.cost.bytes_read, sliding.cost.bytes_written) == (512, 656, 160)


def test_a_shallow_build_swaps_as_build_model_does():
    """The same model built with fewer layers (dispatchprof.llm.layer_repeat.shallow_model, for counts
    with few layers) gets the swaps of dispatchprof.llm.engine_forms: its attention is SinkAttention."""
    from dispatchprof.llm.layer_repeat import shallow_model

    shallow = shallow_model(build_model(tiny_config(), dtype=torch.bfloat16), 1)
    assert [type(layer.self_attn).__name__ for layer in shallow.model.layers] == ["SinkAttention"]
