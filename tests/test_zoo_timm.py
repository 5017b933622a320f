"""Two of the timm families of scripts/zoo_extra.py (scripts/coverage.py runs all twelve on every
tensor kind): no unknown op, and fake = real, ViT's constructor reading its drop-path rates
included (dispatchprof/count/build_values.py)."""

import pytest

# timm is part of the test set-up (scripts/setup.sh installs it without torchvision); zoo_extra
# imports it after torchvision's placeholder
import coverage as coverage_script
import zoo
import zoo_extra


def test_every_timm_family_is_a_zoo_name():
    assert set(zoo_extra.TIMM_MODELS) <= set(zoo.ALL_NAMES) and len(zoo_extra.TIMM_MODELS) == 13


@pytest.mark.parametrize("name", ["timm-vit", "timm-mobilenetv3"])
def test_timm_families_count_on_fake_tensors_as_on_real(name):
    _, unknown, real = coverage_script.run_totals(name, "real", "adamw")
    _, fake_unknown, fake = coverage_script.run_totals(name, "fake", "adamw")
    assert unknown == fake_unknown == [] and coverage_script.versus_real(fake, real) == "= real"
    assert real["macs"] > 0


def test_sequencer_on_meta_skips_the_lstm_initial_state_gradients():
    # docs/zoo.md: on meta the LSTMs run decomposed and autograd skips the zero initial states'
    # gradients, W_hh^T times the first step's gate gradients: B'*4H*H MACs per LSTM direction;
    # per block 2 LSTMs (rows, columns) x 2 directions. A 32x32 image: 4 blocks over a 4x4 grid
    # (B' = 2 images x 4 = 8 sequences, H 48), then 14 blocks over 2x2 (B' = 4, H 96)
    _, _, real = coverage_script.run_totals("timm-sequencer", "real", None)
    _, _, meta = coverage_script.run_totals("timm-sequencer", "meta", None)
    skipped = 4 * (2 * 2 * 8 * 4 * 48 * 48) + 14 * (2 * 2 * 4 * 4 * 96 * 96)
    assert real["macs"] - meta["macs"] == skipped == 9_437_184
