"""Every line of docs/accuracy.md's serving table ("Serving benchmarks under load": held-out and fit,
by engine, device and source) agrees with the per-row predictions it was made from
(scripts/data/serving_predictions.csv, ``scripts/validate_serving.py --errors FILE``): its row
counts, dispatchprof's median |error| over the rows it predicts and over the rows both tools
predict, and AIConfigurator's over the latter, recomputed here. The CSV keeps 4 significant
digits, so a median may differ from the table's by rounding: 0.1 percentage point at most.

A line's group is "fit", "held-out" or "held-out, X" where X is an engine, a device or a source; a
row's source follows from its id (`SOURCES`)."""

from __future__ import annotations

import pytest

from tests.accuracy_docs import doc_section, median_abs_error, read_rows, table_rows

SECTION = "Serving benchmarks under load"
METRICS = {"TTFT mean": "ttft_mean", "TTFT P90": "ttft_p90", "TTFT P99": "ttft_p99", "TPOT mean": "tpot_mean",
           "E2E mean": "e2e_mean", "E2E P90": "e2e_p90", "E2E P99": "e2e_p99", "throughput": "output_tokens_per_s"}
#: A row's source, by the start of its id; every other row is the silicon sample's.
SOURCES = {"trtllm-bench-": "TensorRT-LLM perf-overview.md", "sim2real-": "sim-to-real vLLM runs"}
SILICON = "aiconfigurator silicon_sample.csv"


def _source(row: dict) -> str:
    return next((name for start, name in SOURCES.items() if row["id"].startswith(start)), SILICON)


def _rows() -> list[dict]:
    return read_rows("serving_predictions.csv")


def _selected(group: str, metric: str) -> list[dict]:
    """The rows of a table line: its split, its engine, device or source if it names one, its metric."""
    split, _, value = group.partition(", ")
    return [r for r in _rows() if r["split"] == split and r["metric"] == METRICS[metric]
            and (not value or value in (r["engine"], r["device"], _source(r)))]


TABLE = table_rows(doc_section("docs/accuracy.md", SECTION))


def test_the_table_is_found_and_its_groups_name_something():
    assert len(TABLE) > 20
    names = {v for r in _rows() for v in (r["engine"], r["device"], _source(r))}
    for group, *_ in TABLE:
        split, _, value = group.partition(", ")
        assert split in ("fit", "held-out") and (not value or value in names), group


@pytest.mark.parametrize("line", TABLE, ids=[" ".join(l[:2]) for l in TABLE])
def test_each_line(line):
    group, metric, count, ours, n_both, ours_both, theirs = line
    rows = _selected(group, metric)
    predicted = [r for r in rows if r["dispatchprof"]]
    both = [r for r in predicted if r["aiconfigurator"]]
    where = " | ".join(line)
    assert count == f"{len(predicted)}/{len(rows)}", f"{where}: {len(predicted)}/{len(rows)} rows"
    assert float(ours.rstrip("%")) == pytest.approx(median_abs_error(predicted), abs=0.1), \
        f"{where}: dispatchprof {median_abs_error(predicted):.2f}%"
    assert int(n_both) == len(both), f"{where}: {len(both)} rows both predict"
    if both:
        assert float(ours_both.rstrip("%")) == pytest.approx(median_abs_error(both), abs=0.1), \
            f"{where}: dispatchprof on both {median_abs_error(both):.2f}%"
        assert float(theirs.rstrip("%")) == pytest.approx(median_abs_error(both, "aiconfigurator"), abs=0.1), \
            f"{where}: AIConfigurator {median_abs_error(both, 'aiconfigurator'):.2f}%"
    else:
        assert ours_both == theirs == "-", where


@pytest.mark.parametrize("split", ["fit", "held-out"])
def test_every_metric_of_a_split_has_its_line(split):
    quoted = {l[1] for l in TABLE if l[0] == split}
    assert {METRICS[m] for m in quoted} == {r["metric"] for r in _rows() if r["split"] == split}
