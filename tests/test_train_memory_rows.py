"""The memory rows of scripts/validate_training_memory.py carry their source and quote, and the
model-state accounting matches the ZeRO paper's own worked example."""

import csv
from pathlib import Path

import pytest
import validate_training_memory as vm

from dispatchprof.train.memory import model_states

ROOT = Path(__file__).resolve().parent.parent


def test_every_row_quotes_its_figure_and_follows_the_split_rule():
    rows = list(csv.DictReader(vm.DATA.open()))
    assert len(rows) >= 18
    for r in rows:
        assert r["reading"] in vm.READINGS, r["id"]
        assert r["split"] == vm.split_of(r["id"]), r["id"]
        gib = float(r["memory_gib"])
        if r["source"] == "own":           # the measured line itself, by file:line
            path, line = r["url"].rsplit(":", 1)
            assert (ROOT / path).read_text().splitlines()[int(line) - 1] == r["quote"]
            assert f"peak {gib:.1f} GiB" in r["quote"]
        else:
            assert r["url"].startswith("https://") and f"| {r['memory_gib']} |" in r["quote"], r["id"]


def test_a_reading_that_is_not_known_is_refused():
    with pytest.raises(ValueError, match="reading must be one of"):
        vm.predicted_gib({"id": "x", "reading": "nvidia-smi"}, {})


@pytest.mark.parametrize("zero, gb", [
    # ZeRO (Rajbhandari et al. 2020), Figure 1: psi = 7.5B, K = 12, Nd = 64 -> per-device model states
    (0, 120.0),     # (2 + 2 + K) psi = 16 x 7.5e9 = 120 GB
    (1, 31.4),      # 2 psi + 2 psi + K psi / Nd = 30e9 + 1.406e9
    (2, 16.6),      # 2 psi + (2 + K) psi / Nd = 15e9 + 1.641e9
    (3, 1.9),       # (2 + 2 + K) psi / Nd = 1.875e9
])
def test_model_states_match_the_zero_papers_figure_1(zero, gb):
    assert sum(model_states(7.5e9, 64, zero)) / 1e9 == pytest.approx(gb, abs=0.05)
