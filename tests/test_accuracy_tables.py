"""The serving table of docs/accuracy.md agrees with the per-row predictions it was made from
(scripts/data/serving_predictions.csv, written by scripts/validate_serving.py --errors): the held-out median |error| of mean TTFT and TPOT, over all
rows dispatchprof predicts and over the rows both tools predict, recomputed here independently of the
script. The CSV keeps 4 significant digits, so a median may differ from the table's by rounding:
0.1 percentage point at most. The README's quote of these lines is checked in
tests/test_docs_examples.py (test_readme_serving_errors_are_accuracy_mds)."""

import pytest

from tests.accuracy_docs import doc_section, median_abs_error, read_rows, table_line

METRICS = {"TTFT mean": "ttft_mean", "TPOT mean": "tpot_mean"}
SECTION = "Serving benchmarks under load"


def _held_out(engine: str | None) -> list[dict]:
    return [r for r in read_rows("serving_predictions.csv")
            if r["split"] == "held-out" and (engine is None or r["engine"] == engine)]


def _table_line(group: str, metric: str) -> list[str]:
    return table_line(doc_section("docs/accuracy.md", SECTION), group, metric)


@pytest.mark.parametrize("engine", [None, "vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("metric", list(METRICS))
def test_the_held_out_lines_are_the_rows_medians(engine, metric):
    rows = [r for r in _held_out(engine) if r["metric"] == METRICS[metric] and r["dispatchprof"]]
    both = [r for r in rows if r["aiconfigurator"]]
    group = "held-out" if engine is None else f"held-out, {engine}"
    _, _, count, ours, n_both, ours_both, theirs = _table_line(group, metric)
    assert count == f"{len(rows)}/{len(rows)}" and int(n_both) == len(both)
    assert float(ours.rstrip("%")) == pytest.approx(median_abs_error(rows), abs=0.1)
    assert float(ours_both.rstrip("%")) == pytest.approx(median_abs_error(both), abs=0.1)
    assert float(theirs.rstrip("%")) == pytest.approx(median_abs_error(both, "aiconfigurator"), abs=0.1)

