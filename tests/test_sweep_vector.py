"""Sweep rows from the vector path (dispatchprof.llm.sweep_vector) equal a generation counted
step by step (times and energies to 1e-9, the KV cache exactly) and the per-shape sweep path
(`run_shape` with the stream: every field, memory included); shapes outside the region and
options the vector simulator does not cover are left to the per-shape path."""

import warnings

import pytest

from conftest import tiny_model
from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.shape_generic import DecoderStream
from dispatchprof.llm.sweep import Shape, run_shape
from dispatchprof.llm.sweep_vector import decoder_rows
from dispatchprof.sim.placement import scenarios_of

DEVICES = ["H100-SXM", "PIM-AI-4chip"]
SHAPES = [Shape("tiny", 1, 32, 1), Shape("tiny", 3, 40, 6), Shape("tiny", 2, 100, 12), Shape("tiny", 3, 33, 20)]


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


@pytest.fixture(scope="module")
def model_and_stream():
    model = tiny_model()
    stream = DecoderStream(model, host_time=False)
    _quiet(stream.regime)
    return model, stream


def test_rows_equal_a_generation_counted_step_by_step(model_and_stream):
    model, stream = model_and_stream
    rows, why = decoder_rows(stream, SHAPES, scenarios_of(DEVICES), "fp32", None, False, "eager")
    assert why == "" and sorted(rows) == [0, 1, 2, 3]
    for k, s in enumerate(SHAPES):
        g = _quiet(lambda: profile_generation(model, s.batch, s.prompt_len, s.new_tokens, devices=DEVICES,
                                              exact=True))
        for row in rows[k]:
            d = g.devices[row.device]
            assert row.time_s == pytest.approx(d.total_time_s, rel=1e-9)
            assert row.energy_j == pytest.approx(d.prefill.energy_j + d.decode.energy_j, rel=1e-9)
            assert row.ttft_s == pytest.approx(d.ttft_s, rel=1e-9)
            if s.new_tokens > 1:
                assert row.tpot_mean_s == pytest.approx(d.tpot_mean_s, rel=1e-9)
            else:
                assert row.tpot_mean_s is None
            # KV cache by hand: 2 layers x (K, V) x batch x 2 KV heads x tokens cached x 16 dims x 4 bytes
            tokens = s.prompt_len + s.new_tokens - 1
            assert g.kv_cache_bytes == 2 * 2 * s.batch * 2 * tokens * 16 * 4


def test_rows_equal_the_per_shape_sweep_path(model_and_stream):
    model, stream = model_and_stream
    scenarios = scenarios_of(DEVICES)
    rows, _ = decoder_rows(stream, SHAPES, scenarios, "fp32", None, False, "eager")
    for k, s in enumerate(SHAPES):
        slow = _quiet(lambda: run_shape(s, scenarios, "fp32", model=model, stream=stream))
        for fast, ref in zip(rows[k], slow):
            for field in ("model", "device", "kind", "batch", "prompt_len", "new_tokens", "required_bytes",
                          "capacity_bytes", "fits", "runtime"):
                assert getattr(fast, field) == getattr(ref, field), field
            for field in ("time_s", "energy_j", "tokens_per_s", "energy_per_token_j", "ttft_s"):
                assert getattr(fast, field) == pytest.approx(getattr(ref, field), rel=1e-9), field


def test_what_the_vector_path_leaves_to_the_per_shape_path(model_and_stream):
    _, stream = model_and_stream
    scenarios = scenarios_of(DEVICES)
    short = [Shape("tiny", 2, 8, 4), Shape("tiny", 2, 64, 4)]         # a prompt below the fitted lengths
    rows, why = decoder_rows(stream, short, scenarios, "fp32", None, False, "eager")
    assert sorted(rows) == [1] and "1 shape(s) outside the fitted region" in why
    rows, why = decoder_rows(stream, short, scenarios, "fp32", None, False, "compiled")
    assert rows == {} and "runtime 'compiled'" in why


def test_a_record_the_vector_path_cannot_time_leaves_every_shape_to_the_per_shape_path(model_and_stream,
                                                                                         monkeypatch):
    from dispatchprof.llm import sweep_vector
    from dispatchprof.sim.vector import VectorUnsupported

    def refuse(*args, **kwargs):
        raise VectorUnsupported("aten.mm in model.layers.0: its MACs are zero at some shapes only")

    _, stream = model_and_stream
    monkeypatch.setattr(sweep_vector, "simulate_shapes", refuse)
    rows, why = decoder_rows(stream, SHAPES, scenarios_of(DEVICES), "fp32", None, False, "eager")
    assert rows == {}
    assert why == "simulated shape by shape: aten.mm in model.layers.0: its MACs are zero at some shapes only"


def test_generation_steps_equal_a_generation_counted_step_by_step(model_and_stream):
    from dispatchprof.llm.sweep_vector import generation_steps

    model, stream = model_and_stream
    batch, prompt, new = 3, 40, 9
    got = generation_steps(stream, batch, prompt, new, scenarios_of(DEVICES))
    g = _quiet(lambda: profile_generation(model, batch, prompt, new, devices=DEVICES, exact=True))
    for name, steps in got.items():
        d = g.devices[name]
        assert len(steps.step_s) == new - 1                  # one per decode step, cache lengths 40 .. 47
        assert steps.prefill_s == pytest.approx(d.ttft_s, rel=1e-9)
        assert steps.step_s[0] == pytest.approx(d.tpot_first_s, rel=1e-9)
        assert steps.step_s[-1] == pytest.approx(d.tpot_last_s, rel=1e-9)
        assert steps.tpot_mean_s == pytest.approx(d.tpot_mean_s, rel=1e-9)
        assert float(steps.step_s.sum()) == pytest.approx(d.decode.time_s, rel=1e-9)
        assert float(steps.step_dynamic_j.sum()) + steps.static_power_w * d.decode.time_s == \
            pytest.approx(d.decode.energy_j, rel=1e-9)


def test_generation_steps_outside_the_region_are_refused(model_and_stream):
    from dispatchprof.llm.sweep_vector import generation_steps

    _, stream = model_and_stream
    with pytest.raises(ValueError, match=r"batch 2, lengths 8 to 10 lie outside the fitted region \(lengths from 32"):
        generation_steps(stream, 2, 8, 4, scenarios_of(DEVICES))
    with pytest.raises(ValueError, match="new_tokens must be >= 1, got 0"):
        generation_steps(stream, 2, 64, 0, scenarios_of(DEVICES))
