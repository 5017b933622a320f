"""Layers repeated after a prefix (dispatchprof.count.layer_repeat.repeat_layers_after,
dispatchprof.serving.repeat): a DeepSeek-V3 decoder's k dense layers kept and its MoE layers
counted once and repeated gives what a direct count of the full depth gives: records (every count,
MACs, bytes, parameter bytes, shapes, producers), the totals per phase, step spans, KV bytes per
layer, and the serving cost model fitted from them; configs whose layers differ after the prefix
are named."""

import pytest
import transformers as tf
from torch import nn

from dispatchprof.count.layer_repeat import LayerRepeatError, per_layer_after, repeat_layers_after
from dispatchprof.llm.generation import count_steps
from dispatchprof.llm.layer_repeat import counted_depths, periodic_reason, prefix_layers, repeated_block, shallow_reason
from dispatchprof.llm.models import build_model
from dispatchprof.results.records import COUNT_FIELDS
from dispatchprof.serving.repeat import repeated_steps
from dispatchprof.sim.placement import scenarios_of
from test_layer_repeat import _no_peaks, count_stack
from test_shape_generic import _quiet


def tiny_deepseek(prefix: int, layers: int) -> nn.Module:
    """A weightless DeepSeek-V3 (MLA, 8 routed experts of which 2 a token, 1 shared) with ``prefix``
    dense layers of ``layers``."""
    config = tf.DeepseekV3Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=layers,
        first_k_dense_replace=prefix, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
        n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1, q_lora_rank=16, kv_lora_rank=8,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=256)
    return _quiet(lambda: build_model(config, dtype=None))


def _totals(profile):
    """Per phase: the sums over its records of every cost field, parameter bytes and records."""
    out: dict = {}
    for r in profile.records:
        row = out.setdefault(r.phase, {"records": 0, "param_bytes": 0})
        row["records"] += 1
        row["param_bytes"] += r.param_bytes
        for f in COUNT_FIELDS:
            row[f] = row.get(f, 0) + getattr(r.cost, f)
    return out


def test_per_layer_values_after_a_prefix_by_hand():
    # 5-layer count (prefix layers 0, 1; first repeated layer 3): 10, 20, 5, 7, 9; 4-layer: 9, 18, 4, 6.
    # d = 7 - 5 = 2. Layers 0..2 kept: 10 + 2*1 = 12, 20 + 2*2 = 24, 5 + 2*1 = 7;
    # layer i >= 3: 7 + (i-3)*(9-7) + 2*(7-6) = 9, 11, 13, 15
    assert per_layer_after((10, 20, 5, 7, 9), (9, 18, 4, 6), 7, 3) == (12, 24, 7, 9, 11, 13, 15)
    with pytest.raises(LayerRepeatError, match="repeated from layer 3 need 5 or more layers"):
        per_layer_after((1, 2, 3, 4), (1, 2, 3), 7, 3)


def test_a_prefix_kept_and_the_layers_after_it_repeated():
    # one layer of another kind, then identical ones: layer 2 repeats (layer 1 reads the prefix's output)
    got = repeat_layers_after(count_stack([4, 8, 8]), count_stack([4, 8, 8, 8]), "layers", 7, 2)
    assert _no_peaks(got) == _no_peaks(count_stack([4] + [8] * 6))
    assert len(got.records) == 2 + 6
    with pytest.raises(LayerRepeatError, match="layer 3 under 'layers' differs from layer 2 at its record 0"):
        repeat_layers_after(count_stack([4, 8, 8]), count_stack([4, 8, 8, 4]), "layers", 7, 2)
    with pytest.raises(LayerRepeatError, match="needs counts with n >= 3 and n \\+ 1 layers"):
        repeat_layers_after(count_stack([4, 8]), count_stack([4, 8, 8]), "layers", 7, 2)


def test_deepseek_configs_repeat_after_their_dense_layers():
    assert prefix_layers(tf.DeepseekV3Config()) == 3 and prefix_layers(tf.LlamaConfig()) == 0
    assert repeated_block(tf.DeepseekV3Config()) == (4, 1) and repeated_block(tf.LlamaConfig()) == (1, 1)
    assert prefix_layers(tf.Glm4MoeConfig(first_k_dense_replace=1)) == 1
    assert periodic_reason(tf.Glm4MoeConfig(first_k_dense_replace=1)) == ""
    model = tiny_deepseek(3, 6)
    assert counted_depths(model.config) == (5, 6) and shallow_reason(model) == "6 layers: counted as they are"


@pytest.mark.parametrize("prefix,layers", [(2, 7), (3, 8)])
def test_a_deepseek_chain_from_its_prefix_and_one_repeated_moe_layer(prefix, layers):
    model = tiny_deepseek(prefix, layers)
    assert shallow_reason(model) == "" and counted_depths(model.config) == (prefix + 2, prefix + 3)
    scenarios, options = scenarios_of("H100-SXM"), dict(runtime="serving", logits_to_keep=1)
    profile, spans = _quiet(lambda: repeated_steps(model, 4, (24, 1, 1), scenarios, **options))
    direct, direct_spans = _quiet(lambda: count_steps(model, 4, (24, 1, 1), scenarios, **options))
    assert spans == direct_spans                       # step positions and KV bytes per layer
    assert _totals(profile) == _totals(direct.profile) and set(_totals(profile)) == {"prefill", "decode"}
    assert _no_peaks(profile) == _no_peaks(direct.profile)
    assert {s.name for s in profile.scopes} >= {f"model.layers.{layers - 1}.mlp.experts", "model.layers.0.mlp.up_proj"}


def test_the_deepseek_cost_model_from_repeated_chains_equals_the_full_depth_one():
    """Kimi-K2's shape (1 dense layer), 5 layers: counted with 3 and 4; the design's batches are
    multiples of 4 (8 experts / gcd(8, 2): every expert busy), as `serve` counts MoE models."""
    from dispatchprof.llm.shape_generic import batch_step
    from dispatchprof.serving.cost import DESIGN, Composition, fit_design
    from dispatchprof.serving.repeat import CountMemo
    model = tiny_deepseek(1, 5)
    step = batch_step(model)
    assert step == 4
    design = tuple((b * step, t) for b, t in DESIGN)
    scenarios = scenarios_of("H100-SXM")
    memo = CountMemo(model)
    repeated = _quiet(lambda: fit_design(model, scenarios, design=design, memo=memo)[1])["H100-SXM"]
    assert memo.repeated and memo.full_depth_reason == ""
    whole = CountMemo(model, repeat=False)
    direct = _quiet(lambda: fit_design(model, scenarios, design=design, memo=whole)[1])["H100-SXM"]
    for c in (Composition.uniform(4, 1, 40), Composition.uniform(8, 17, 0), Composition.of([(5, 5), (1, 30)] * 4)):
        assert repeated.cost(c) == direct.cost(c)


def test_a_deepseek_stream_repeats_after_its_prefix():
    """Sweeps and generation profiles (dispatchprof.llm.shape_generic) count the same way: 2 dense
    layers of 7, counted with 4 and 5; the fit's held-out direct count agrees, and so does one more."""
    from dispatchprof.llm.shape_generic import DecoderStream
    from test_layer_repeat import assert_stream_counts
    stream = DecoderStream(tiny_deepseek(2, 7), host_time=False)
    assert _quiet(lambda: stream.reason) == "" and stream.full_depth_reason == ""
    assert stream.repeat.depths == (4, 5) and stream.batch_step == 4
    assert_stream_counts(stream, [(8, 333)])
