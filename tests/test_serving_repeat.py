"""Serving's counted step chains from a decoder counted with 2 and 3 layers
(dispatchprof.serving.repeat) equal a direct count of the full depth: records, step spans and KV
bytes per layer; models whose layers differ are named."""

import dataclasses

import pytest

from conftest import tiny_model
from dispatchprof.llm.generation import count_steps
from dispatchprof.serving.repeat import repeatable, repeated_steps
from dispatchprof.sim.placement import scenarios_of
from test_layer_repeat import _no_peaks
from test_shape_generic import _quiet


@pytest.mark.parametrize("family,extra", [("llama", {}), ("mixtral", dict(num_local_experts=4))])
def test_a_chain_of_steps_from_two_and_three_layers(family, extra):
    model = tiny_model(family, num_hidden_layers=5, **extra)
    scenarios = scenarios_of("H100-SXM")
    options = dict(runtime="serving", logits_to_keep=1)
    assert repeatable(model) == ""
    profile, spans = _quiet(lambda: repeated_steps(model, 4, (24, 1, 1), scenarios, **options))
    direct, direct_spans = _quiet(lambda: count_steps(model, 4, (24, 1, 1), scenarios, **options))
    assert spans == direct_spans                       # a prefill of 24 and two decode steps, KV per layer included
    assert [(s.tokens, s.past) for s in spans] == [(24, 0), (1, 24), (1, 25)]
    assert _no_peaks(profile) == _no_peaks(direct.profile)


def test_models_whose_layers_differ_or_are_few_are_counted_as_they_are():
    assert repeatable(tiny_model(num_hidden_layers=3)) == "3 layers: counted as they are"
    gemma = tiny_model("gemma2", num_hidden_layers=5)
    assert "differs between layers" in repeatable(gemma) or "makes layers differ" in repeatable(gemma)


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
    memo = CountMemo(tiny_model("gemma2", num_hidden_layers=5))
    assert memo.full_depth_reason != ""
    memo.count_full_depth("asked")
    assert memo.full_depth_reason == "asked" and not memo.repeated
