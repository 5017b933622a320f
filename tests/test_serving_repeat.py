"""Serving's counted step chains from a decoder counted with 2 and 3 layers, or with one and two
blocks of layers where its layer kinds alternate (dispatchprof.serving.repeat), equal a direct
count of the full depth: records, step spans and KV bytes per layer; models whose layers differ
without a period are named."""

import dataclasses

import pytest
import torch

from conftest import tiny_model
from dispatchprof.llm.generation import count_steps
from dispatchprof.llm.models import build_model
from dispatchprof.llm.layer_repeat import counted_depths, repeated_block, shallow_reason
from dispatchprof.serving.repeat import repeated_steps
from dispatchprof.sim.placement import scenarios_of
from test_layer_repeat import _no_peaks
from test_shape_generic import _quiet


@pytest.mark.parametrize("family,extra", [("llama", {}), ("mixtral", dict(num_local_experts=4))])
def test_a_chain_of_steps_from_two_and_three_layers(family, extra):
    model = tiny_model(family, num_hidden_layers=5, **extra)
    scenarios = scenarios_of("H100-SXM")
    options = dict(runtime="serving", logits_to_keep=1)
    assert shallow_reason(model) == ""
    profile, spans = _quiet(lambda: repeated_steps(model, 4, (24, 1, 1), scenarios, **options))
    direct, direct_spans = _quiet(lambda: count_steps(model, 4, (24, 1, 1), scenarios, **options))
    assert spans == direct_spans                       # a prefill of 24 and two decode steps, KV per layer included
    assert [(s.tokens, s.past) for s in spans] == [(24, 0), (1, 24), (1, 25)]
    assert _no_peaks(profile) == _no_peaks(direct.profile)


def test_models_whose_layers_differ_or_are_few_are_counted_as_they_are():
    assert shallow_reason(tiny_model(num_hidden_layers=3)) == "3 layers: counted as they are"
    # Gemma-2 alternates sliding and full attention: blocks of 2 from layer 1, counted with 3 and 5
    gemma = tiny_model("gemma2", num_hidden_layers=5)
    assert counted_depths(gemma.config) == (3, 5) and shallow_reason(gemma) == "5 layers: counted as they are"
    # Qwen2 with a sliding window from layer 2 on (full, full, sliding x 4) repeats with no period
    qwen = tiny_model("qwen2", num_hidden_layers=6, use_sliding_window=True, sliding_window=1024, max_window_layers=2)
    assert shallow_reason(qwen) == "config.layer_types does not repeat every 8 or fewer layers from layer 0 on"


def _gpt_oss(layers):
    import transformers as tf
    from test_sinks_attention import TINY
    return _quiet(lambda: build_model(tf.GptOssConfig(**{**TINY, "num_hidden_layers": layers}), dtype=torch.bfloat16))


def _qwen35(layers):
    from test_serving_gated_delta import SIZES, qwen35_config
    return _quiet(lambda: build_model(qwen35_config(**{**SIZES, "num_hidden_layers": layers}), dtype=torch.bfloat16))


@pytest.mark.parametrize("build,layers,block,counted", [
    (lambda n: tiny_model("gemma2", num_hidden_layers=n), 8, (1, 2), (4, 6)),      # sliding, full; 1 layer after
    (_gpt_oss, 7, (1, 2), (3, 5)),                                                # gpt-oss: sinks, experts
    (_qwen35, 15, (1, 4), (7, 11)),                                               # 3 gated delta-nets, 1 attention
    (_qwen35, 16, (1, 4), (8, 12))], ids=["gemma2", "gpt-oss", "qwen3.5", "qwen3.5-3-after"])
def test_a_chain_of_layers_that_alternate_from_two_blocks(build, layers, block, counted):
    """Layer kinds that repeat every p layers: the block of p layers from layer 1 counted once and
    twice (with the r = (L - 1) mod p layers the full depth ends with) gives the direct count."""
    model = build(layers)
    assert repeated_block(model.config) == block and counted_depths(model.config) == counted
    assert shallow_reason(model) == ""
    scenarios, options = scenarios_of("H100-SXM"), dict(runtime="serving", logits_to_keep=1)
    profile, spans = _quiet(lambda: repeated_steps(model, 4, (24, 1, 1), scenarios, **options))
    direct, direct_spans = _quiet(lambda: count_steps(model, 4, (24, 1, 1), scenarios, **options))
    assert spans == direct_spans                       # step positions and KV bytes per layer (0 for linear layers)
    assert _no_peaks(profile) == _no_peaks(direct.profile)
    assert {s.name for s in profile.scopes} >= {f"model.layers.{layers - 1}", f"model.layers.{layers - 2}.mlp"}


def test_the_cost_model_from_repeated_chains_equals_the_full_depth_one():
    from dispatchprof.serving.cost import Composition, fit_design
    from dispatchprof.serving.repeat import CountMemo
    model = tiny_model(num_hidden_layers=5)
    scenarios = scenarios_of("H100-SXM")
    memo = CountMemo(model)
    repeated = _quiet(lambda: fit_design(model, scenarios, memo=memo)[1])["H100-SXM"]
    direct = _quiet(lambda: fit_design(model, scenarios, memo=CountMemo(model, repeat=False))[1])["H100-SXM"]
    assert memo.repeated and memo.full_depth_reason == ""
    for c in (Composition.uniform(3, 1, 40), Composition.uniform(2, 17, 0), Composition.of([(5, 5), (1, 30)])):
        assert repeated.cost(c) == direct.cost(c)


def test_chains_of_a_model_whose_layers_differ_are_counted_whole():
    from dispatchprof.serving.repeat import CountMemo
    memo = CountMemo(tiny_model("qwen2", num_hidden_layers=6, use_sliding_window=True, sliding_window=1024,
                                max_window_layers=2))
    assert memo.full_depth_reason != ""
    memo.count_full_depth("asked")
    assert memo.full_depth_reason == "asked" and not memo.repeated
