"""Mistral moves a constant it builds on the CPU onto its activations' device (16 bytes, 2 calls);
on meta that move is free, as on a CPU run, so its meta training step counts what the real one
does (docs/zoo.md, "A constant moved onto the meta device")."""

import warnings

import coverage as coverage_script
import zoo
from dispatchprof import OpCounter


def test_mistral_on_meta_counts_as_on_real():
    calls_real, unknown, real = coverage_script.run_totals("mistral", "real", "adamw")
    calls_meta, _, meta = coverage_script.run_totals("mistral", "meta", "adamw")
    assert unknown == [] and coverage_script.versus_real(meta, real) == "= real" and calls_meta == calls_real


def test_mistral_moves_two_constants_onto_meta_free():
    model, inputs, loss_fn = zoo.build("mistral", "meta")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            zoo.training_step(model, inputs, loss_fn)
    assert dict(c.profile.zero_cost_calls).get("aten._to_copy") == 2
    assert not [r for r in c.profile.records if r.op == "aten._to_copy" and r.cost.bytes_read <= 16]
