"""scripts/validate_training.py --measured: the project's own training steps measured on lent
GPUs (H200 and H100 rows of scripts/data/*_lent/run1_rows.csv) are found with their file:line
sources, and dispatchprof train predicts them: step time with a median |error| within 10% (the
issue's target for held-out rows) and no row over 15%, allocated memory within 10% each."""

import csv
import statistics
from pathlib import Path

import pytest
import validate_training as vt

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rows():
    return vt.measured_rows()


def test_every_train_row_of_both_devices_is_read_with_its_source(rows):
    expected = []
    for device, path in vt.MEASURED:
        for line, row in enumerate(csv.reader(path.open()), 1):
            if row[0] == "train" and row[6] == "step_s":
                expected.append((f"{path.relative_to(ROOT)}:{line}", device, float(row[7])))
    assert {d for _, d, _ in expected} == {"H200", "H100-SXM"}
    assert [(r["source"], r["device"], r["measured_s"]) for r in rows] == expected
    # the source names the very line the measurement sits on
    for r in rows:
        path, line = r["source"].rsplit(":", 1)
        assert f"{r['measured_s']:.6f}"[:6] in (ROOT / path).read_text().splitlines()[int(line) - 1]


def test_step_time_and_allocated_memory_within_ten_percent(rows):
    step = [abs(r["predicted_s"] / r["measured_s"] - 1) for r in rows]
    assert statistics.median(step) <= 0.10 and max(step) <= 0.15, step
    for r in rows:
        assert abs(r["allocated_gib"] / r["measured_gib"] - 1) <= 0.10, r
        # the shipped prediction adds the fragmentation margin on top of what is allocated
        assert r["predicted_gib"] > r["allocated_gib"]
