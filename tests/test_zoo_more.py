"""scripts/zoo_more.py: issue #40's models the other zoo files do not build, on the rules
docs/counting.md gives for their differences between tensor kinds."""

import warnings

import pytest
import torch

import coverage as coverage_script
import zoo
from dispatchprof import OpCounter


@pytest.mark.parametrize("name", ["funnel", "encodec"])
def test_no_unknown_ops_on_fake_tensors(name):
    calls, unknown = coverage_script.run(name, "fake", "adamw")
    assert unknown == [] and calls > 300


def _totals(model, inputs, loss_fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter(host_time=False) as c:
            zoo.training_step(model, inputs, loss_fn)
    return c.total()


def test_autocast_is_the_cpus_so_meta_tensors_count_the_float32_model():
    # torch.autocast("cpu") casts CPU tensors (fake ones included, they are on the CPU device);
    # meta tensors are on another device, so the meta run is the model without autocast
    meta = _totals(*zoo.build("llama-autocast", "meta"))
    model, inputs, loss_fn = zoo.build("llama-autocast", "real")
    plain = _totals(model.model, inputs, loss_fn)          # the same Llama, autocast off
    cast = _totals(*zoo.build("llama-autocast", "real"))
    assert meta == plain and cast != plain
    assert (meta.macs, meta.add, meta.mult) == (cast.macs, cast.add, cast.mult)   # casts move bytes only


def test_swinv2_fake_counts_as_real_with_view_replay():
    # docs/counting.md, "A view whose base is then modified in place": 401,408 bytes fewer on
    # fake tensors, none with torch's view replay on in the real run
    fake = _totals(*zoo.build("swinv2", "fake"))
    real = _totals(*zoo.build("swinv2", "real"))
    torch._C._set_view_replay_enabled(True)
    try:
        replayed = _totals(*zoo.build("swinv2", "real"))
    finally:
        torch._C._set_view_replay_enabled(False)
    assert real.bytes_read - fake.bytes_read == 401_408 and real.macs == fake.macs
    assert replayed == fake
