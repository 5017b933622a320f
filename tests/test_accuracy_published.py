"""docs/validation.md's "Published single-batch and engine measurements" agrees with the per-row
predictions it was made from (scripts/data/published_predictions.csv, written by
``scripts/validate_published.py --as-shipped --errors FILE``): the row count, the median |error| of
each split and of each metric family on the held-out rows, and of every device and runtime over all
rows, recomputed here from the rows (6 significant digits: a median rounds to the doc's one decimal
exactly). The paragraph names a device by its profile's name up to the first "-" (A100 for
A100-80GB)."""

import re

import pytest

from tests.accuracy_docs import DATA, doc_section, median_abs_error, pct, read_rows, table_line

SECTION = "Published single-batch and engine measurements"
FAMILIES = ("TPOT", "TTFT", "energy", "throughput")     # the order of the section's family line


@pytest.fixture(scope="module")
def rows():
    return read_rows("published_predictions.csv")


@pytest.fixture(scope="module")
def text():
    return doc_section("docs/validation.md", SECTION)


def test_the_predictions_are_the_data_files_rows(rows):
    with open(DATA / "published_gpu.csv", newline="") as f:
        import csv
        source = {r["id"]: r for r in csv.DictReader(f)}
    assert [r["id"] for r in rows] == list(source)
    for r in rows:
        s = source[r["id"]]
        assert (r["split"], r["hardware"], r["runtime"], r["metric"]) == (s["split"], s["hardware"], s["runtime"],
                                                                          s["measure"])
        assert float(r["measured"]) == pytest.approx(float(s["value"]), rel=1e-5)


def test_the_row_count(rows, text):
    assert f"predicts the {len(rows)} rows of scripts/data/published_gpu.csv" in " ".join(text.split())


@pytest.mark.parametrize("split", ["held-out", "fit"])
def test_each_splits_median(rows, text, split):
    part = [r for r in rows if r["split"] == split]
    assert table_line(text, f"{split} ({len(part)})")[1] == pct(median_abs_error(part))


def test_the_held_out_families(rows, text):
    held = [r for r in rows if r["split"] == "held-out"]
    assert sorted({r["family"] for r in held}) == sorted(FAMILIES)
    line = table_line(text, "held-out " + " / ".join(FAMILIES))
    assert line[1] == " / ".join(pct(median_abs_error([r for r in held if r["family"] == f])) for f in FAMILIES)


def test_each_device_and_runtime(rows, text):
    paragraph = " ".join(text.split("By device and runtime (all rows):")[1].split("\n\n")[0].split())
    quoted = {(d, rt): (figure, int(n)) for d, rt, figure, n in
              re.findall(r"(\S+) (eager|compiled|serving) ([\d.]+%) \((\d+)(?: rows)?\)", paragraph)}
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["hardware"].split("-")[0], r["runtime"]), []).append(r)
    assert set(quoted) == set(groups)
    for key, part in groups.items():
        assert quoted[key] == (pct(median_abs_error(part)), len(part)), key
