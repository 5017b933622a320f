"""A model whose attention runs unfused (two batched GEMMs and a softmax over the score matrix, as
Megatron-LM ran it in 2022): its attention core is the attention module's own ops, which selective
recompute re-runs; and a training step is counted in training mode, dropout included."""

from __future__ import annotations

import warnings

import pytest

from dispatchprof.sim.placement import placement_of
from dispatchprof.train import TrainLayout, profile_training
from dispatchprof.train.count import ATTENTION_SCOPE, count_model, op_seconds, op_table, phase_times, simulate_model
from tests.conftest import tiny_model

H100 = placement_of("H100-SXM").devices[0]


@pytest.fixture(scope="module")
def unfused():
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = tiny_model(dtype=torch.bfloat16, attn_implementation="eager", attention_dropout=0.1)
        counted = count_model(net, "tiny-eager", 2, 32)
    assert not net.training                       # put back in the mode it was built in
    return counted


def test_dropout_runs_in_the_counted_step(unfused):
    forward = [r for r in unfused.profile.records if r.phase == "forward" and ATTENTION_SCOPE.search(r.scope)]
    # the attention probabilities' dropout: a random draw per score, 2 x 4 heads x 32 x 32 per layer
    draws = [r for r in forward if r.op in ("aten.bernoulli_", "aten.native_dropout")]
    assert len(draws) == 2 and all(r.out_elements == 2 * 4 * 32 * 32 for r in draws)


def test_unfused_attention_core_is_the_attention_modules_own_ops(unfused):
    sim = simulate_model(unfused, H100)
    table = op_table(sim)
    kinds = {row[2] for row in table.rows}
    assert "core" in kinds and "attention" not in kinds
    # independent sum over the forward ops in an attention module's own scope
    want_s = want_flops = 0.0
    for t in sim.ops:
        r = unfused.profile.records[t.record]
        if r.phase == "forward" and ATTENTION_SCOPE.search(r.scope):
            want_s += op_seconds(t, 1.0, False)
            want_flops += r.cost.add + r.cost.mult
    fwd = phase_times(table, 1.0, 0.5)["forward"]           # no attention factor on unfused ops
    assert fwd.attention_s == pytest.approx(want_s, rel=1e-12) and fwd.attention_flops == want_flops > 0
    # selective recompute re-runs that core once per micro-batch: 4 micro-batches of 2
    step = profile_training("tiny", H100, TrainLayout(1, 2, 8, 32), counted=_step(unfused, table))
    sel = profile_training("tiny", H100, TrainLayout(1, 2, 8, 32, recompute="selective"), counted=_step(unfused, table))
    assert sel.breakdown["recompute"] == pytest.approx(4 * want_s, rel=1e-12)
    assert sel.step_s - step.step_s == pytest.approx(4 * want_s, rel=1e-9)


def _step(m, table):
    from dispatchprof.train.count import step_from
    return step_from(m, table, H100, dict(m.profile.phase_peaks).get("forward", 0))
