"""One CountMemo serves every device: the counter records no device, so the chains counted for
one device, planned for another, equal the chains counted afresh for that other device
(dispatchprof.serving.repeat.CountMemo; scripts/validate_serving.py counts each model once)."""

from conftest import tiny_model
from dispatchprof.llm.shape_generic import batch_step
from dispatchprof.serving.cost import DESIGN, Composition, count_design, fit
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.sim.placement import scenarios_of
from test_shape_generic import _quiet


def test_a_count_for_one_device_planned_for_another_equals_a_fresh_count():
    model = tiny_model("mixtral", num_hidden_layers=5, num_local_experts=4)
    step = batch_step(model)                       # every expert busy in every design batch, as serving counts
    design = tuple((b * step, tokens) for b, tokens in DESIGN)
    memo = CountMemo(model)
    h100, b200 = scenarios_of("H100-SXM"), scenarios_of("B200")
    _quiet(lambda: count_design(model, h100, design=design, memo=memo, tp=2))
    held = dict(memo._counts)
    shared = _quiet(lambda: count_design(model, b200, "fp8", design=design, memo=memo, tp=2,
                                               kv_dtype="fp8"))
    assert step == 2 and memo.repeated             # 4 experts, 2 per token: batches of 2 reach them all
    assert memo._counts == held                    # nothing counted again: the B200 steps reuse the H100 count
    fresh = _quiet(lambda: count_design(model, b200, "fp8", design=design, memo=CountMemo(model), tp=2,
                                              kv_dtype="fp8"))
    assert [(s.batch, s.q, s.past, s.keys) for s in shared] == [(s.batch, s.q, s.past, s.keys) for s in fresh]
    assert [s.ops for s in shared] == [s.ops for s in fresh]
    assert [s.memory for s in shared] == [s.memory for s in fresh]
    a, b = fit(shared)["B200"], fit(fresh)["B200"]
    for c in (Composition.uniform(3, 1, 40), Composition.uniform(2, 17, 0), Composition.of([(5, 5), (1, 30)])):
        assert a.cost(c) == b.cost(c)


def test_fit_design_fits_its_steps_once(monkeypatch):
    """fit_design's models are its check's fit of the repeated chains (one fit, not a second one by
    the caller), and equal a fit of the same steps made apart."""
    from dispatchprof.serving import cost
    model = tiny_model(num_hidden_layers=5)
    calls = []
    real = cost.fit
    monkeypatch.setattr(cost, "fit", lambda steps: calls.append(len(steps)) or real(steps))
    memo = CountMemo(model)
    steps, models = _quiet(lambda: cost.fit_design(model, scenarios_of("H100-SXM"), memo=memo))
    assert memo.repeated and calls == [len(steps)]          # the check's fit, and no other
    again = real(list(steps))
    for c in (Composition.uniform(3, 1, 40), Composition.of([(5, 5), (1, 30)])):
        assert models["H100-SXM"].cost(c) == again["H100-SXM"].cost(c)
