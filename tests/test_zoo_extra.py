"""A few of the diffusers families of scripts/zoo_extra.py (scripts/coverage.py runs them all on
every tensor kind): no unknown op, Flux's keyword-argument attention runs under the counter, fake
counts equal real ones, the sampling loop runs its two guided UNet steps, and where meta differs
from real it is the gradient-layout copies the rule in docs/counting.md names."""

import collections
import warnings

import pytest

import coverage as coverage_script           # the diffusion families need diffusers: the test extra has it
import zoo
import zoo_extra
from dispatchprof import OpCounter


def _records(name, kind):
    model, inputs, loss_fn = zoo.build(name, kind)
    with warnings.catch_warnings(), OpCounter() as c:
        warnings.simplefilter("ignore")
        zoo.training_step(model, inputs, loss_fn)
    return c.profile.records


def test_every_diffusers_family_is_a_zoo_name():
    assert set(zoo_extra.DIFFUSERS_NAMES) <= set(zoo.ALL_NAMES)
    assert set(zoo_extra.DIFFUSERS_NAMES) <= set(zoo._entries())


@pytest.mark.parametrize("name, kind", [("dit", "fake"), ("sd3", "meta")])
def test_diffusion_transformers_have_no_unknown_ops(name, kind):
    calls, unknown = coverage_script.run(name, kind, "adamw")
    assert unknown == [] and calls > 500


def test_flux_counts_on_fake_tensors_as_on_real():
    # Flux calls attention with keyword arguments (the crash of issue #40); fake = real after it
    _, unknown, real = coverage_script.run_totals("flux", "real", None)
    _, _, fake = coverage_script.run_totals("flux", "fake", None)
    assert unknown == [] and coverage_script.versus_real(fake, real) == "= real" and real["macs"] > 0


def test_the_sampling_loop_runs_two_guided_unet_steps():
    # each step runs the UNet once on the conditional and unconditional halves (batch 2 x 1), then
    # the VAE decodes once: the UNet's first conv runs twice, the decoder's first conv once
    records = [r for r in _records("sd-sampling", "fake") if r.phase == "forward" and r.op == "aten.convolution"]
    by_scope = collections.Counter(r.scope for r in records)
    assert by_scope["unet.conv_in"] == 2 and by_scope["vae.decoder.conv_in"] == 1
    assert all(r.shapes[0][0] == 2 for r in records if r.scope == "unet.conv_in")


def test_the_vae_on_meta_differs_from_real_only_by_gradient_layout_copies():
    # docs/counting.md: which weight gradients autograd copies into the parameter's layout
    # (new_empty_strided + copy_) and how many clones run depend on the tensor kind's kernels;
    # every other op's counts are equal
    layout = {"aten.new_empty_strided", "aten.copy_", "aten.clone"}

    def totals(kind):
        t = collections.Counter()
        for r in _records("sd-vae", kind):
            if r.op not in layout:
                for f in coverage_script.FIELDS:
                    t[f] += getattr(r.cost, f)
        return t

    real, meta = totals("real"), totals("meta")
    assert real == meta and real["macs"] > 0
