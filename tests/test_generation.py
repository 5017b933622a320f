"""Generation: the fast decode path equals counting every step; per-phase figures; MoE."""

import dataclasses
import warnings

import pytest
import torch

from conftest import tiny_model
from dispatchprof import OpCounter, fake_inputs
from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.models import balanced_split, build_model

DEVICES = ["PIM-AI-1chip", "H100-SXM"]


def both_ways(model, batch, prompt, new):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = profile_generation(model, batch, prompt, new, devices=DEVICES)
        slow = profile_generation(model, batch, prompt, new, devices=DEVICES, exact=True)
    return fast, slow


@pytest.mark.parametrize("family, extra, prompt, new", [
    ("llama", {}, 5, 40),
    ("mistral", {"sliding_window": 8}, 3, 30),          # the window fills up mid-generation
    ("gemma2", {"head_dim": 16, "sliding_window": 8}, 3, 20),
])
def test_fast_decode_path_equals_counting_every_step(family, extra, prompt, new):
    fast, slow = both_ways(tiny_model(family, **extra), 2, prompt, new)
    assert slow.steps_counted == new - 1
    assert fast.steps_counted < slow.steps_counted
    assert fast.decode_totals == slow.decode_totals                    # every category, exactly
    assert fast.decode_by_scope == slow.decode_by_scope
    assert fast.prefill_totals == slow.prefill_totals
    assert fast.kv_cache_bytes == slow.kv_cache_bytes
    assert fast.kv_cache_bytes_by_layer == slow.kv_cache_bytes_by_layer
    for name in DEVICES:
        f, s = fast.devices[name], slow.devices[name]
        for field in ("ttft_s", "tpot_first_s", "tpot_mean_s", "tpot_last_s", "tokens_per_s", "energy_per_token_j"):
            assert getattr(f, field) == pytest.approx(getattr(s, field), rel=1e-9), field
        for phase_field in dataclasses.fields(f.decode):
            assert getattr(f.decode, phase_field.name) == pytest.approx(getattr(s.decode, phase_field.name),
                                                                      rel=1e-9, abs=1e-15)


def test_per_phase_figures_by_hand():
    model = tiny_model()
    g = profile_generation(model, batch=2, prompt_len=5, new_tokens=4, devices=["PIM-AI-1chip"])
    d = g.devices["PIM-AI-1chip"]
    assert g.tokens == {"prefill": 2, "decode": 6}
    assert d.tpot_mean_s == pytest.approx(d.decode.time_s / 3)
    assert d.tokens_per_s == pytest.approx(2 * 4 / (d.ttft_s + d.decode.time_s))
    assert d.energy_per_token_j == pytest.approx((d.prefill.energy_j + d.decode.energy_j) / 8)
    assert d.tpot_first_s < d.tpot_last_s                               # attention reads more keys
    # KV cache after 5 + 3 tokens: 2 layers x (K, V) x batch 2 x 2 kv heads x 8 tokens x 16 dims x 4 bytes
    assert g.kv_cache_bytes == 2 * 2 * 2 * 2 * 8 * 16 * 4
    assert g.kv_cache_bytes_by_layer == (2 * 2 * 2 * 8 * 16 * 4,) * 2              # KV per decoder layer
    cap = d.capacity[0]
    assert cap.kv_bytes == g.kv_cache_bytes and cap.weights_bytes == g.weights_bytes
    # decode MACs: 3 steps x 2 sequences through every Linear weight (no embedding) + attention
    linear = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 96) + 64 * 100
    attention = sum(2 * 4 * (5 + k + 1) * 32 for k in range(3)) * 2    # layers x heads x keys x (E + Ev)
    assert g.decode_totals.macs == 3 * 2 * linear + attention


@pytest.mark.parametrize("bad, message", [
    ({"batch": 0}, r"batch must be an integer >= 1, got 0"),
    ({"new_tokens": 0}, r"new_tokens must be an integer >= 1, got 0"),
    ({"prompt_len": -3}, r"prompt_len must be an integer >= 1, got -3"),
])
def test_bad_generation_arguments(bad, message):
    args = {"batch": 1, "prompt_len": 2, "new_tokens": 2, **bad}
    with pytest.raises(ValueError, match=message):
        profile_generation(tiny_model(), **args)


def test_moe_balanced_routing_matches_closed_form():
    t, k, experts, hidden, inter = 2 * 5, 2, 4, 64, 96
    model = tiny_model("mixtral", num_local_experts=experts, num_experts_per_tok=k)
    with torch.no_grad(), OpCounter() as c:
        model(fake_inputs(model, 2, 5, high=100))
    assert c.unknown_ops() == []
    rows = c.by_module()
    # balanced top-k: every one of the T*k token copies goes through one expert: gate+up [2I x H], down [H x I]
    per_layer = t * k * (2 * inter * hidden + hidden * inter)
    assert rows["model.layers.0.mlp.experts"].inclusive.macs == per_layer
    assert balanced_split(t * k, experts) == [5, 5, 5, 5] and balanced_split(7, 3) == [3, 2, 2]


def test_mixtral_8x7b_builds_and_counts_a_decode_step_on_fake_tensors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model("mixtral-8x7b")
    assert sum(p.numel() for p in model.parameters()) == 46_702_792_704
    g = profile_generation(model, 1, 4, 2, devices=["H100-SXM"])
    experts = sum(v.macs for k, v in g.decode_by_scope.items() if ".experts" in k)
    assert experts == 32 * 1 * 2 * 3 * 4096 * 14336                 # layers x T x k x 3HI
