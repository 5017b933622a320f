"""Repeated layers: the profile of an L-layer decoder built from counts of the same model with 2
and 3 layers equals a direct count of the L-layer model (records: op, scope, counts, bytes,
shapes, producers; scopes but for peaks; KV bytes per layer), and a shape-generic stream fitted
from such counts equals direct counts at random shapes; models whose layers differ are counted at
full depth and say why."""

import dataclasses
import random

import pytest
import torch
import transformers as tf
from torch import nn

from conftest import tiny_model
from dispatchprof import OpCounter
from dispatchprof.count.layer_repeat import (LayerRepeatError, layer_of, per_layer, per_layer_after, renamed,
                                             repeat_layers, repeat_layers_after)
from dispatchprof.llm.layer_repeat import layer_container, periodic_reason, shallow_model, shallow_reason
from dispatchprof.llm.shape_generic import DecoderStream, count_decoder
from test_shape_generic import _assert_same, _quiet


def _no_peaks(profile):
    """The profile without measured times, storage ids and peaks (maxima over a count's moments:
    approximate, dispatchprof.count.layer_repeat)."""
    records = tuple(dataclasses.replace(r, inputs=tuple((p, b) for p, b, _ in r.inputs), host_loops=0.0)
                    for r in profile.records)
    scopes = tuple(dataclasses.replace(s, latency_s=0.0, peak_bytes=0) for s in profile.scopes)
    return dataclasses.replace(profile, records=records, scopes=scopes, phase_wall=(), host_loop_ns=0.0)


def test_scope_names_by_layer():
    assert layer_of("model.layers.12.mlp.up_proj", "model.layers") == 12
    assert layer_of("model.layers.3", "model.layers") == 3
    assert layer_of("model.layers_extra.3", "model.layers") is None
    assert layer_of("model.norm", "model.layers") is None
    assert renamed("model.layers.1.self_attn.q_proj", "model.layers", 30) == "model.layers.30.self_attn.q_proj"
    assert renamed("model.layers.1", "model.layers", 7) == "model.layers.7"


def test_moved_and_plain_records_are_replace_by_hand():
    # every field away from its default, so that a field read into the wrong place shows
    from dispatchprof.count.layer_repeat import _moved, _plain
    from dispatchprof.results.records import OpRecord
    from op_formulas.cost import Cost

    r = OpRecord("aten.mm", "model.layers.1.mlp", "decode", "bf16", Cost(bytes_read=6, bytes_written=4), True,
                 ((3, 8, 11), (-1, 16, 12)), 16, 8, 2, ((1, 4), (4, 2)), 2.5, 3)
    moved = _moved(r, "model.layers.9.mlp", ((7, 8, 11),))
    assert moved == dataclasses.replace(r, scope="model.layers.9.mlp", inputs=((7, 8, 11),))
    # the same record with other storage ids and host time is the same plain record; other bytes are not
    assert _plain([r]) == _plain([dataclasses.replace(r, inputs=((3, 8, 99), (-1, 16, 98)), host_loops=0.0)])
    assert _plain([r]) != _plain([dataclasses.replace(r, inputs=((3, 8, 11), (-1, 17, 12)))])


def test_per_layer_values_by_hand():
    # layers 0, 1, 2 of the 3-layer count: 5, 7, 9; layers 0, 1 of the 2-layer count: 4, 6.
    # Layer 0 at depth 5: 5 + 2*(5-4) = 7; layer i >= 1: 7 + (i-1)*(9-7) + 2*(7-6) = 9, 11, 13, 15
    assert per_layer((5, 7, 9), (4, 6), 5) == (7, 9, 11, 13, 15)
    with pytest.raises(LayerRepeatError, match="3 or more layers"):
        per_layer((5, 7), (4,), 5)


@pytest.mark.parametrize("family,extra,batch", [("llama", {}, 2), ("mixtral", dict(num_local_experts=4), 2)])
def test_five_layers_from_two_and_three(family, extra, batch):
    model = tiny_model(family, num_hidden_layers=5, **extra)
    container = layer_container(model)
    assert container == "model.layers"
    small = [_quiet(lambda k=k: shallow_model(model, k)) for k in (2, 3)]
    assert [len(m.model.layers) for m in small] == [2, 3]
    (pre2, step2), (pre3, step3) = (_quiet(lambda m=m: count_decoder(m, batch, 40, False)) for m in small)
    pre5, step5 = _quiet(lambda: count_decoder(model, batch, 40, False))
    for two, three, five in ((pre2, pre3, pre5), (step2, step3, step5)):
        got = repeat_layers(two.profile, three.profile, container, 5)
        assert _no_peaks(got) == _no_peaks(five.profile)
        assert {s.name for s in got.scopes} >= {"model.layers.4", "model.layers.4.mlp"}
        assert got.phase_peaks == five.profile.phase_peaks            # each phase's peak is linear in depth here
    assert per_layer(step3.kv, step2.kv, 5) == step5.kv
    assert per_layer(step3.prefill_kv, step2.prefill_kv, 5) == step5.prefill_kv


class Stack(nn.Module):
    """Layers of width 8 (one Linear) or not (two Linears through that width)."""

    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) if w == 8 else nn.Sequential(nn.Linear(8, w), nn.Linear(w, 8))
                                    for w in widths)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def count_stack(widths):
    """The profile of a `Stack` of ``widths`` on a batch of 2."""
    stack, x = Stack(widths), torch.ones(2, 8)
    with torch.no_grad(), OpCounter(host_time=False) as c:
        stack(x)
    return c.profile


def test_wrong_depths_and_unequal_layers_are_refused():
    model = tiny_model("llama", num_hidden_layers=4)
    two, three = (_quiet(lambda k=k: count_decoder(shallow_model(model, k), 1, 32, False))[1].profile
                  for k in (2, 3))
    with pytest.raises(LayerRepeatError, match="n >= 2 and n \\+ 1 layers under 'model.layers'; got 3 and 2"):
        repeat_layers(three, two, "model.layers", 8)
    with pytest.raises(LayerRepeatError, match="layers must be >= 2, got 1"):
        repeat_layers(two, three, "model.layers", 1)

    with pytest.raises(LayerRepeatError, match="layer 2 under 'layers' differs from layer 1 at its record 0"):
        repeat_layers(count_stack([8, 8]), count_stack([8, 8, 4]), "layers", 6)
    expanded = repeat_layers(count_stack([8, 8]), count_stack([8, 8, 8]), "layers", 6)
    assert _no_peaks(expanded) == _no_peaks(count_stack([8] * 6))


def test_configs_whose_layers_differ_are_named():
    # alternating kinds, a prefix of dense layers and uniform layers repeat; a switch that makes
    # every other layer sparse does not, nor lists with no period of 8 or fewer, nor too few layers
    assert periodic_reason(tf.Gemma2Config(num_hidden_layers=4)) == periodic_reason(tf.GptOssConfig()) == ""
    assert periodic_reason(tf.DeepseekV3Config()) == ""
    assert periodic_reason(tf.MixtralConfig()) == periodic_reason(tf.LlamaConfig()) == ""
    assert periodic_reason(tf.Qwen3MoeConfig(decoder_sparse_step=2)) == \
        "config.decoder_sparse_step = 2 makes layers differ by depth"
    assert periodic_reason(tf.GptOssConfig(num_hidden_layers=2)) == \
        "config.layer_types does not repeat every 8 or fewer layers from layer 0 on"
    assert periodic_reason(tf.GptOssConfig(num_hidden_layers=1)) == "1 layer(s): too few after layer 0 to repeat"
    assert shallow_reason(torch.nn.Linear(2, 2)) == "the model has no config"


def test_periods_of_layer_kinds_from_configs():
    from dispatchprof.llm.catalog import load_config
    from dispatchprof.llm.layer_repeat import layer_period
    assert layer_period(tf.LlamaConfig()) == layer_period(tf.DeepseekV3Config()) == 1
    assert layer_period(tf.GptOssConfig()) == layer_period(tf.Gemma2Config()) == 2      # sliding, full
    assert layer_period(load_config("qwen3.5-397b-a17b")) == 4                          # 3 linear, 1 full
    assert layer_period(load_config("gemma-3-27b")) == 6                                # 5 sliding, 1 full (62 layers)
    assert periodic_reason(load_config("gemma-3-27b")) == periodic_reason(tf.GptOssConfig()) == ""
    # a list that repeats only once over its length has no period: 2, 2, 3, 3 (one period of 4 is not two)
    odd = tf.LlamaConfig(num_hidden_layers=4)
    odd.no_rope_layers = [2, 2, 3, 3]
    assert layer_period(odd) == 0
    assert periodic_reason(odd) == "config.no_rope_layers does not repeat every 8 or fewer layers from layer 0 on"


def assert_stream_counts(stream, shapes) -> None:
    """The stream's prefill and decode step (and KV bytes per layer) at each (batch, n) of
    ``shapes`` equal a direct count of the full model there."""
    for batch, n in shapes:
        direct_prefill, direct_step = _quiet(lambda: stream.count(batch, n))
        step = _quiet(lambda: stream.step(batch, n))
        _assert_same(_quiet(lambda: stream.prefill(batch, n)).profile, direct_prefill.profile)
        _assert_same(step.profile, direct_step.profile, (0, direct_step.step_start))
        assert step.kv == direct_step.kv and step.step_start == direct_step.step_start


@pytest.fixture(scope="module")
def deep_llama():
    return DecoderStream(tiny_model(num_hidden_layers=6), host_time=False)


def test_stream_from_repeated_layers_equals_direct_counts(deep_llama):
    stream = deep_llama
    assert _quiet(lambda: stream.reason) == "" and stream.full_depth_reason == ""
    rng = random.Random(38)
    assert_stream_counts(stream, [(3, 200)] + [(rng.randint(1, 12), rng.randint(32, 1500)) for _ in range(7)])


def test_moe_stream_from_repeated_layers_equals_direct_counts():
    stream = DecoderStream(tiny_model("mixtral", num_hidden_layers=5, num_local_experts=4), host_time=False)
    assert _quiet(lambda: stream.reason) == "" and stream.full_depth_reason == ""
    rng = random.Random(8)
    assert_stream_counts(stream, [(2 * rng.randint(1, 8), rng.randint(32, 1200)) for _ in range(3)])


def test_stream_from_alternating_layers_equals_direct_counts():
    # gpt-oss's sliding and full attention layers (a window past the grid's lengths), experts and
    # sinks: blocks of 2 from layer 1, counted with 3 and 5 layers of 7
    from dispatchprof.llm.models import build_model
    from test_sinks_attention import TINY
    config = tf.GptOssConfig(**{**TINY, "num_hidden_layers": 7, "sliding_window": 4096})
    stream = DecoderStream(_quiet(lambda: build_model(config, dtype=torch.bfloat16)), host_time=False)
    assert _quiet(lambda: stream.reason) == "" and stream.full_depth_reason == ""
    assert stream.repeat.depths == (3, 5)
    rng = random.Random(2)
    assert_stream_counts(stream, [(2 * rng.randint(1, 6), rng.randint(32, 1500)) for _ in range(3)])


def test_a_batch_of_one_with_its_own_op_stream_is_left_out_of_the_fit():
    # Gemma-2's prefill copies a tensor at batch 2 that batch 1 does not (two more records): the grid
    # moves to batch sizes 2, 3 (held out 4), batch 1 is counted directly; its alternating layers repeat
    stream = DecoderStream(tiny_model("gemma2", num_hidden_layers=7), host_time=False)
    assert _quiet(lambda: stream.reason) == "" and stream.full_depth_reason == ""
    assert stream.regime()[0].profile.low == (2, 32) and stream.regime()[1].profile.low == (2, 32)
    assert not stream.covers(1, 100) and stream.covers(2, 100)
    rng = random.Random(9)
    assert_stream_counts(stream, [(1, 100)] + [(rng.randint(2, 12), rng.randint(32, 1500)) for _ in range(3)])


def test_layers_that_differ_by_depth_are_counted_at_full_depth():
    # Qwen2 with a sliding window from layer 2 on: layer_types full, full, sliding, sliding
    model = tiny_model("qwen2", num_hidden_layers=4, use_sliding_window=True, sliding_window=1024, max_window_layers=2)
    assert model.config.layer_types == ["full_attention"] * 2 + ["sliding_attention"] * 2
    stream = DecoderStream(model, host_time=False)
    assert _quiet(lambda: stream.reason) == ""
    assert stream.full_depth_reason == "config.layer_types does not repeat every 8 or fewer layers from layer 0 on"
    direct = _quiet(lambda: stream.count(2, 100))[1]
    step = stream.step(2, 100)
    _assert_same(step.profile, direct.profile, (0, step.step_start))


def test_per_layer_values_every_two_layers_by_hand():
    # blocks of 2 from layer 1; the 6-layer count: 5 | 7 3 | 9 4 | 11, the 4-layer count: 4 | 6 3 | 8.
    # 10 layers: 2 blocks more (units = (10 - 6) / 2 = 2). Layer 0: 5 + 2*(5-4) = 7. Layer i >= 1 at
    # block b, offset o: offset 0 from 7: 7 + b*(9-7) + 2*(7-6) = 9, 11, 13, 15, 17 (b = 0..4);
    # offset 1 from 3: 3 + b*(4-3) + 2*(3-3) = 3, 4, 5, 6 (b = 0..3)
    assert per_layer_after((5, 7, 3, 9, 4, 11), (4, 6, 3, 8), 10, 1, 2) == (7, 9, 3, 11, 4, 13, 5, 15, 6, 17)
    with pytest.raises(LayerRepeatError, match="need 5 or more layers in the longer count, 2 fewer in the shorter"):
        per_layer_after((5, 7, 3, 9), (4, 6), 8, 1, 2)
    with pytest.raises(LayerRepeatError, match="by whole blocks of 2; got 6, 4, 9"):
        per_layer_after((5, 7, 3, 9, 4, 11), (4, 6, 3, 8), 9, 1, 2)


@pytest.mark.parametrize("layers", [9, 10, 13])
def test_layers_that_alternate_repeat_in_blocks_of_two(layers):
    # widths 8, 4, 8, 4, ...: layers 1 and 2 (4 then 8) repeat; a depth of 1 + 2 k + r counted with
    # 1 + 2 + r and 1 + 4 + r layers, the last r layers (r = (layers - 1) mod 2) kept after the blocks
    widths = [8, 4] * 7
    r = (layers - 1) % 2
    got = repeat_layers_after(count_stack(widths[:3 + r]), count_stack(widths[:5 + r]), "layers", layers, 1, 2)
    assert _no_peaks(got) == _no_peaks(count_stack(widths[:layers]))
    assert len(got.records) == sum(1 if w == 8 else 2 for w in widths[:layers])


def test_blocks_that_do_not_repeat_are_refused():
    with pytest.raises(LayerRepeatError, match="layer 4 under 'layers' differs from layer 2 at its record 0: the "
                                               "layers are not identical every 2"):
        repeat_layers_after(count_stack([8, 4, 8]), count_stack([8, 4, 8, 4, 4]), "layers", 9, 1, 2)
    with pytest.raises(LayerRepeatError, match="repeating layers 1 .. 2 needs counts with n >= 3 and n \\+ 2 layers"):
        repeat_layers_after(count_stack([8, 4, 8]), count_stack([8, 4, 8, 4]), "layers", 9, 1, 2)
    with pytest.raises(LayerRepeatError, match="layers must be >= 3 and 3 plus a multiple of 2, got 8"):
        repeat_layers_after(count_stack([8, 4, 8]), count_stack([8, 4, 8, 4, 8]), "layers", 8, 1, 2)


def test_a_window_shorter_than_the_grid_is_fitted_above_it():
    # gpt-oss's sliding window of 128 tokens (here 4) leaves no room below it for the held-out
    # length 200 (the stream raised "outside the fitted region"): the grid moves above the window,
    # lengths 4 + 32, 4 + 64, 4 + 128, held out 4 + 200, where every sliding layer reads 4 keys
    from dispatchprof.llm.models import build_model
    from dispatchprof.llm.shape_generic import length_region
    from test_sinks_attention import TINY
    model = _quiet(lambda: build_model(tf.GptOssConfig(**{**TINY, "num_hidden_layers": 3}), dtype=torch.bfloat16))
    assert length_region(model) == (4, None)
    assert length_region(tiny_model()) == (0, None)
    assert length_region(tiny_model("mistral", sliding_window=4096)) == (0, 4094)
    stream = DecoderStream(model, host_time=False)
    assert _quiet(lambda: stream.reason) == ""
    assert stream.regime()[0].profile.low == (2, 36)           # batches of 2 route every expert evenly
    assert not stream.covers(4, 35) and stream.covers(4, 36)
    rng = random.Random(4)
    assert_stream_counts(stream, [(4, 36), (4, 35)] + [(4 * rng.randint(1, 4), rng.randint(36, 2000))
                                                       for _ in range(2)])
