"""A few of the extended zoo families (scripts/coverage.py runs them all): no unknown op in a
training step, and the new plain-torch nets reach the new formulas."""

import pytest

import coverage as coverage_script
import zoo


@pytest.mark.parametrize("name, kind", [("unet", "fake"), ("gru", "real"), ("audio-conv", "meta"),
                                        ("swin", "fake"), ("wav2vec2", "real")])
def test_extended_zoo_has_no_unknown_ops(name, kind):
    calls, unknown = coverage_script.run(name, kind, "adamw")
    assert unknown == [] and calls > 50


def test_every_zoo_name_builds_an_entry():
    assert set(zoo.ALL_NAMES) == set(zoo.ZOO_NAMES) | set(zoo.EXTENDED_NAMES)
    with pytest.raises(KeyError, match="unknown zoo model 'nope'; known: llama"):
        zoo.entry("nope")
