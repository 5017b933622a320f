"""Two of the timm families of scripts/zoo_extra.py (scripts/coverage.py runs all twelve on every
tensor kind): no unknown op, and fake = real, ViT's constructor reading its drop-path rates
included (dispatchprof/count/build_values.py)."""

import importlib.util

import pytest

if importlib.util.find_spec("timm") is None:     # not imported here: timm needs torchvision's placeholder first
    pytest.skip("timm is not installed: the timm zoo families need it", allow_module_level=True)

import coverage as coverage_script  # noqa: E402
import zoo  # noqa: E402
import zoo_extra  # noqa: E402


def test_every_timm_family_is_a_zoo_name():
    assert set(zoo_extra.TIMM_MODELS) <= set(zoo.ALL_NAMES) and len(zoo_extra.TIMM_MODELS) == 13


@pytest.mark.parametrize("name", ["timm-vit", "timm-mobilenetv3"])
def test_timm_families_count_on_fake_tensors_as_on_real(name):
    _, unknown, real = coverage_script.run_totals(name, "real", "adamw")
    _, fake_unknown, fake = coverage_script.run_totals(name, "fake", "adamw")
    assert unknown == fake_unknown == [] and coverage_script.versus_real(fake, real) == "= real"
    assert real["macs"] > 0
