"""The vector simulator (dispatchprof.sim.vector) against the scalar one: at random shapes of a
tiny Llama (prefill, decode step) and a tiny BERT, every step's time on the host/device timeline
and its dynamic energy equal what `simulate` gives on the profile evaluated at that shape, to
1e-9 relative, on the devices of the sweep benchmark and on a hand-made device that exercises
GEMM tiles, a last-level cache, unoverlapped compute, per-element times and weight-only dtypes."""

import random
import warnings

import numpy as np
import pytest
import torch

from conftest import tiny_device_yaml, tiny_model
from dispatchprof.count.generic import ShapeValues, record_layout
from dispatchprof.llm.models import build_model
from dispatchprof.llm.shape_generic import DecoderStream, ForwardStream
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate
from dispatchprof.sim.timeline import step_time
from dispatchprof.sim.vector import RecordRows, VectorUnsupported, simulate_shapes

DEVICES = ["H100-SXM", "L4", "MI300X", "PIM-AI-4chip"]


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


@pytest.fixture(scope="module")
def odd_device(tmp_path_factory):
    """A device with every optional term time_op has for a roofline device."""
    text = tiny_device_yaml(cache_capacity_mb=0.02, cache_bandwidth_gb_per_s=40, compute_units=6,
                            gemm_tile="[64, 32]", unoverlapped_fraction=0.25, launch_overhead_us=2,
                            host_overhead_us=3, static_power_w=7, ns_per_element="{softmax: 0.5, silu: 0.25}",
                            matrix_memory_efficiency=0.8, weight_only_efficiency="{int8: 0.5}",
                            weight_only_kernel_us="{int8: 1.5}")
    path = tmp_path_factory.mktemp("dev") / "odd.yaml"
    path.write_text(text)
    return str(path)


def _check(fit, shapes, steps, devices, weight_dtype=None, bound=False):
    """Vector step times and energies at ``shapes`` equal the scalar simulator's."""
    layout = [RecordRows(*t) for t in record_layout(fit.template)]
    source = ShapeValues(fit, np.array(shapes))
    starts = tuple(a for a, _ in steps)
    for name, placement in scenarios_of(devices).items:
        got = simulate_shapes(fit.template, layout, source, placement, steps, weight_dtype=weight_dtype, bound=bound)
        for k, sizes in enumerate(shapes):
            profile = fit.evaluate(tuple(sizes))[0]
            sim = _quiet(lambda: simulate(profile, placement, weight_dtype=weight_dtype, bound=bound,
                                          step_starts=starts))
            for (a, b), arrays in zip(steps, got):
                want_t = step_time(sim.ops[a:b])
                want_e = sum(t.dynamic_j for t in sim.ops[a:b])
                assert arrays.time_s[k] == pytest.approx(want_t, rel=1e-9), (name, sizes)
                assert arrays.dynamic_j[k] == pytest.approx(want_e, rel=1e-9), (name, sizes)
                assert want_t > 0 and want_e > 0


@pytest.fixture(scope="module")
def llama():
    stream = DecoderStream(tiny_model(), host_time=False)
    step, prefill = _quiet(stream.regime)
    assert step.reason == "" and prefill.reason == ""
    return step.profile, prefill.profile


def _shapes(seed, n, lengths=(32, 5000)):
    rng = random.Random(seed)
    return [(1, 32), (3, 200)] + [(rng.randint(1, 64), rng.randint(*lengths)) for _ in range(n)]


def test_llama_prefill_and_decode_step_equal_the_scalar_simulator(llama, odd_device):
    step, prefill = llama
    shapes = _shapes(38, 10)
    _check(prefill, shapes, [(0, len(prefill.template.records))], DEVICES + [odd_device])
    start = len(prefill.template.records)              # the step follows its setup prefill
    _check(step, shapes, [(0, start), (start, len(step.template.records))], DEVICES + [odd_device])


def test_weight_only_dtype_and_bound_equal_the_scalar_simulator(llama, odd_device):
    step, prefill = llama
    shapes = _shapes(5, 4)
    start = len(prefill.template.records)
    _check(step, shapes, [(start, len(step.template.records))], ["H100-SXM", odd_device], weight_dtype="int8")
    _check(step, shapes, [(start, len(step.template.records))], ["H100-SXM", odd_device], bound=True)


def test_bert_forward_equals_the_scalar_simulator(odd_device):
    from transformers import BertConfig

    model = _quiet(lambda: build_model(BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                                  num_attention_heads=4, intermediate_size=64,
                                                  max_position_embeddings=4096), dtype=torch.float32))
    fit = _quiet(lambda: ForwardStream(model, encoder_decoder=False, host_time=False).regime()).profile
    _check(fit, _shapes(7, 10, (32, 4096)), [(0, len(fit.template.records))], DEVICES + [odd_device])


def test_layers_are_timed_once(llama):
    # a 2-layer Llama's decoder layers run the same polynomials: the distinct timings are fewer than the records
    step, _ = llama
    keys = {tuple(RecordRows(*t).cost) for t in record_layout(step.template)}
    source = ShapeValues(step, np.array([(1, 40)]))
    polys = {tuple(source.key(r) for r in rows if r is not None) for rows in keys}
    assert len(polys) < len(step.template.records)


def test_what_it_does_not_cover_is_named(llama):
    step, _ = llama
    layout = [RecordRows(*t) for t in record_layout(step.template)]
    source = ShapeValues(step, np.array([(2, 64)]))
    placement = scenarios_of(["H100-SXM"])["H100-SXM"]
    with pytest.raises(VectorUnsupported, match="runtime 'compiled'"):
        simulate_shapes(step.template, layout, source, placement, [(0, 1)], runtime="compiled")
    with pytest.raises(VectorUnsupported, match="tp=2"):
        simulate_shapes(step.template, layout, source, placement, [(0, 1)], tp=2)
    with pytest.raises(ValueError, match="outside the fitted region"):
        ShapeValues(step, np.array([(2, 31)]))


def test_fixed_rows_hold_one_value_at_every_shape(llama):
    # a row is fixed over a set of shapes when no size that changes among them enters its polynomial:
    # with the batch held at 2, a decode step's batch-only rows (a linear layer's outputs) are fixed too
    step, _ = llama
    rows = range(len(step.numerators))
    held = ShapeValues(step, np.array([(2, 40), (2, 90), (2, 300)]))
    both = ShapeValues(step, np.array([(1, 40), (3, 90)]))
    fixed_held = [r for r in rows if held.fixed(r) is not None]
    fixed_both = [r for r in rows if both.fixed(r) is not None]
    for source, fixed in ((held, fixed_held), (both, fixed_both)):
        for r, values in zip(fixed, source.rows(fixed)):
            assert (values == source.fixed(r)).all()
    assert set(fixed_both) < set(fixed_held)
    assert [r for r in rows if both.constant(r) is not None] == fixed_both
