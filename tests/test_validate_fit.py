"""The fit of scripts/validate_published.py (scripts/published_fit.py): what it simulates (the fit
rows on every variant, a held-out row once) and how it reads a serving engine's per-sequence time
for energy."""

import math

import published_fit as pf
import pytest
import validate_published as vp

VLLM_HOST = (("graph_launch_us", 300.0), ("sequence_host_us", 20.0))


def _row(id_, split, measure, value, **kw):
    row = dict(id=id_, split=split, model="tiny", hardware="H100-SXM", tp="1", runtime="compiled", engine="",
               weight_dtype="bf16", kv_dtype="", scheduling="static", output_dispersion="", batch="1",
               prompt_len="16", output_len="10", measure=measure, value=str(value))
    row.update(kw)
    return row


def test_per_sequence_seconds_of_a_continuous_step_and_of_a_static_generation_by_hand():
    step = _row("a", "fit", "energy_per_token", 1, runtime="serving", engine="vllm", scheduling="continuous",
                batch="256")
    # one step: a 300 us launch + 256 x 20 us = 5420 us before the kernels, 5120 us of it per sequence
    assert pf.sequence_seconds(step, VLLM_HOST) == pytest.approx((5.42e-3, 5.12e-3), rel=1e-12)
    whole = dict(step, scheduling="static", batch="4", output_len="10")
    # 10 steps (the prefill and 9 decode steps) of 300 + 4 x 20 us: 3.8 ms, 0.8 ms per sequence
    assert pf.sequence_seconds(whole, VLLM_HOST) == pytest.approx((3.8e-3, 0.8e-3), rel=1e-12)
    assert pf.sequence_seconds(step, (("graph_launch_us", 300.0), ("sequence_host_us", 0.0))) == (0.0, 0.0)


def test_busy_per_sequence_time_draws_the_kernels_mean_power():
    row = _row("a", "fit", "energy_per_token", 1, runtime="serving", engine="vllm", scheduling="continuous",
               batch="256", tp="2")
    pred = ({}, 2.0, 0.02, 256)          # 2 J of kernels in a 20 ms step of 256 tokens
    idle = pf.Fitted({}, {"serving/vllm": VLLM_HOST})
    busy = pf.Fitted({}, {"serving/vllm": VLLM_HOST}, busy={"serving/vllm": True})
    assert pf.dynamic_energy(row, pred, idle) == 2.0
    # the kernels run 20 - 5.42 = 14.58 ms at 2 J / 14.58 ms; 5.12 ms more at that power
    assert pf.dynamic_energy(row, pred, busy) == pytest.approx(2.0 * 19.70 / 14.58, rel=1e-12)
    # per token of the group: tp x (dynamic + static x time) / tokens
    assert pf.energy(row, pred, idle, static_w=300.0) == pytest.approx(2 * (2.0 + 6.0) / 256, rel=1e-12)


@pytest.mark.parametrize("truth", [False, True])
def test_the_energy_fit_recovers_static_power_and_the_reading_that_made_the_measurements(truth):
    host = {"serving/vllm": VLLM_HOST}
    source = pf.Fitted({"H100-SXM": 0.9}, host, busy={"serving/vllm": truth})
    rows, preds = [], {}
    for i, (batch, dynamic, time) in enumerate([(8, 0.05, 0.008), (64, 0.4, 0.012), (256, 2.0, 0.026)]):
        row = _row(f"r{i}", "fit", "energy_per_token", 0, runtime="serving", engine="vllm",
                   scheduling="continuous", batch=str(batch))
        pred = ({}, dynamic, time, batch)
        row["value"] = repr(pf.energy(row, pred, source, static_w=310.0))
        rows.append(row)
        preds[row["id"]] = {source.key(row): pred}
    fitted = pf.fit_energy(rows, preds, pf.Fitted({"H100-SXM": 0.9}, host))
    assert fitted.busy == {"serving/vllm": truth}
    assert (fitted.dynamic["H100-SXM"], fitted.static["H100-SXM"]) == (1.0, pytest.approx(310.0, rel=1e-9))


def test_the_fit_simulates_fit_rows_on_every_variant_and_a_held_out_row_once(monkeypatch):
    calls = {}

    def predict(row, model, devs):            # tpot 10 ms at mme 1, launch costs added: no model needed
        calls.setdefault(row["id"], []).extend(devs)
        return {k: ({"tpot": 0.01 / d.matrix_memory_efficiency + d.graph_launch_us * 1e-6}, 1.0, 1.0, 10)
                for k, d in devs.items()}

    monkeypatch.setattr(vp, "build", lambda name: None)
    monkeypatch.setattr(vp, "predict_row", predict)
    fit_row = _row("f", "fit", "tpot", 0.01 / 0.8 + 20e-6)
    held = _row("h", "held-out", "tpot", 0.0125, batch="2")
    fitted, preds = vp.fit([fit_row, held], {}, None)
    assert (fitted.mme, fitted.host, fitted.unoverlapped) == (
        {"H100-SXM": 0.8}, {"compiled": (("graph_launch_us", 20.0),)}, {"H100-SXM": 0.0})
    grid = len(pf.MME) * len(pf.HOST["compiled"]) + len(pf.MME) * (len(pf.UNOVERLAPPED) - 1)
    assert (len(calls["f"]), calls["h"]) == (grid, [fitted.key(held)])
    assert math.isclose(preds["h"][fitted.key(held)][0], 0.01 / 0.8 + 20e-6)


def test_two_jobs_simulate_what_one_does(monkeypatch):
    def predict(row, model, devs):
        return {k: ({"tpot": int(row["batch"]) * 1e-3 / d.matrix_memory_efficiency + d.graph_launch_us * 1e-6},
                    1.0, 1.0, 10) for k, d in devs.items()}

    monkeypatch.setattr(vp, "build", lambda name: None)
    monkeypatch.setattr(vp, "predict_row", predict)          # forked workers inherit the stand-in
    rows = [_row("f1", "fit", "tpot", 0.01 / 0.8 + 20e-6, batch="10"),
            _row("f2", "fit", "tpot", 0.02 / 0.8 + 20e-6, batch="20"),
            _row("h", "held-out", "tpot", 0.03, batch="30")]
    one, two = {}, {}
    assert vp.fit(rows, one, None, jobs=1) == vp.fit(rows, two, None, jobs=2)
    grid = len(pf.MME) * len(pf.HOST["compiled"]) + len(pf.MME) * (len(pf.UNOVERLAPPED) - 1)
    assert one == two and len(one["tiny/H100-SXM/1/compiled/bf16/10/16/10"]) == grid


def test_a_device_without_time_fit_rows_keeps_its_profile_figure(monkeypatch):
    monkeypatch.setattr(vp, "build", lambda name: None)
    monkeypatch.setattr(vp, "predict_row", lambda row, model, devs: {k: ({"tpot": 1.0}, 1.0, 1.0, 10) for k in devs})
    held = _row("h", "held-out", "tpot", 0.5, hardware="B200")     # the B200 profile: 0.7 (devices/nvidia.yaml)
    fitted, _ = vp.fit([held], {}, None)
    assert (fitted.mme, fitted.unoverlapped) == ({"B200": 0.7}, {"B200": 0.0})
    assert pf.profile_mme("B200") == 0.7


def test_as_shipped_simulates_each_row_once_on_its_bundled_profile(monkeypatch):
    seen = []

    def predict(row, model, devs):
        seen.extend((row["id"], k, d.name, d.matrix_memory_efficiency, d.static_power_w) for k, d in devs.items())
        return {k: ({"tpot": 0.01}, 2.0, 0.02, 256) for k in devs}

    monkeypatch.setattr(vp, "build", lambda name: None)
    monkeypatch.setattr(vp, "predict_row", predict)
    rows = [_row("t", "fit", "tpot", 0.0125), _row("e", "held-out", "energy_per_token", 0.05, batch="2")]
    preds = vp.predict_all(rows, {}, None, chosen=vp.SHIPPED)
    # the bundled H100-SXM as users get it: the family's matrix_memory_efficiency 0.7, static 350 W
    assert seen == [("t", vp.SHIPPED, "H100-SXM", 0.7, 350.0), ("e", vp.SHIPPED, "H100-SXM", 0.7, 350.0)]
    assert vp.shipped_value(rows[0], preds["t"][vp.SHIPPED]) == 0.01
    # 2 J of kernels + 350 W x 20 ms over 256 tokens
    assert vp.shipped_value(rows[1], preds["e"][vp.SHIPPED]) == pytest.approx((2.0 + 7.0) / 256, rel=1e-12)
