"""The serving table of docs/accuracy.md and the README's serving figures agree with the per-row
predictions they were made from (scripts/data/serving_predictions.csv, written by
scripts/validate_serving.py --errors): the held-out median |error| of mean TTFT and TPOT, over all
rows dispatchprof predicts and over the rows both tools predict, recomputed here independently of the
script. The CSV keeps 4 significant digits, so a median may differ from the table's by rounding:
0.1 percentage point at most."""

import csv
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROWS = ROOT / "scripts" / "data" / "serving_predictions.csv"
METRICS = {"TTFT mean": "ttft_mean", "TPOT mean": "tpot_mean"}


def _held_out(engine: str | None) -> list[dict]:
    with open(ROWS, newline="") as f:
        return [r for r in csv.DictReader(f)
                if r["split"] == "held-out" and (engine is None or r["engine"] == engine)]


def _median(rows: list[dict], column: str) -> float:
    return 100 * statistics.median(abs(float(r[column]) / float(r["measured"]) - 1) for r in rows)


def _table_line(group: str, metric: str) -> list[str]:
    text = (ROOT / "docs" / "accuracy.md").read_text()
    (line,) = [l for l in text.splitlines() if l.startswith(f"| {group} | {metric} |")]
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize("engine", [None, "vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("metric", list(METRICS))
def test_the_held_out_lines_are_the_rows_medians(engine, metric):
    rows = [r for r in _held_out(engine) if r["metric"] == METRICS[metric] and r["dispatchprof"]]
    both = [r for r in rows if r["aiconfigurator"]]
    group = "held-out" if engine is None else f"held-out, {engine}"
    _, _, count, ours, n_both, ours_both, theirs = _table_line(group, metric)
    assert count == f"{len(rows)}/{len(rows)}" and int(n_both) == len(both)
    assert float(ours.rstrip("%")) == pytest.approx(_median(rows, "dispatchprof"), abs=0.1)
    assert float(ours_both.rstrip("%")) == pytest.approx(_median(both, "dispatchprof"), abs=0.1)
    assert float(theirs.rstrip("%")) == pytest.approx(_median(both, "aiconfigurator"), abs=0.1)


def test_the_readme_quotes_the_table():
    readme = (ROOT / "README.md").read_text()
    tpot, ttft = _table_line("held-out", "TPOT mean"), _table_line("held-out", "TTFT mean")
    rows = tpot[2].split("/")[0]
    ours = f"{tpot[5]} / {ttft[5]} (all {rows} rows: {tpot[3]} / {ttft[3]})"
    line = next(l for l in readme.splitlines() if l.startswith("| serving: median abs. error"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == ours and cells[-1] == f"{tpot[6]} / {ttft[6]}"
