"""docs/accuracy.md's two serving sections outside the main table agree with the per-row predictions
they were made from, written by ``scripts/validate_serving.py --errors FILE`` with each section's
``--match``: "Mixture of experts with expert parallelism" (scripts/data/serving_moe_predictions.csv)
and "Disaggregated prefill and decode" (scripts/data/serving_disagg_predictions.csv). Each median
|error| is recomputed here over its group's rows: dispatchprof's over the rows it predicts,
AIConfigurator's over the rows both predict, "-" where AIConfigurator predicts none of them. The
CSVs keep 4 significant digits, so a median may differ from the doc's by rounding: 0.1 percentage
point at most."""

import re

import pytest

from tests.accuracy_docs import doc_section, median_abs_error, read_rows, table_rows

METRICS = {"TTFT mean": "ttft_mean", "TPOT mean": "tpot_mean"}
MOE = "Mixture of experts with expert parallelism (first rows)"
DISAGG = "Disaggregated prefill and decode (first rows)"
#: The MoE section's groups: label -> which rows (the experts spread over all tp GPUs: EP = tp).
MOE_GROUPS = {"held-out": lambda r: r["split"] == "held-out",
              "held-out, EP 4": lambda r: r["split"] == "held-out" and r["tp"] == "4",
              "held-out, EP 8": lambda r: r["split"] == "held-out" and r["tp"] == "8",
              "fit": lambda r: r["split"] == "fit"}
#: The disaggregated section's groups: label without its row count -> which rows.
DISAGG_GROUPS = {"held-out": lambda r: r["split"] == "held-out",
                 "held-out, both predict": lambda r: r["split"] == "held-out" and r["aiconfigurator"] != "",
                 "held-out, H100 SGLang": lambda r: (r["split"] == "held-out" and r["device"] == "H100-SXM"
                                                    and r["engine"] == "sglang")}


def _figure(rows: list[dict], column: str) -> float | None:
    part = [r for r in rows if r[column]]
    return median_abs_error(part, column) if part else None


def _check(cell: str, figure: float | None) -> None:
    if figure is None:
        assert cell == "-"
    else:
        assert float(cell.rstrip("%")) == pytest.approx(figure, abs=0.1)


def _label(cell: str) -> tuple[str, int]:
    """A table's first cell "GROUP (N)" or "GROUP (N: what)" -> (GROUP, N)."""
    m = re.fullmatch(r"(.*) \((\d+)(?::[^)]*)?\)", cell)
    assert m, f"not a group and its row count: {cell!r}"
    return m.group(1), int(m.group(2))


def test_the_moe_lines():
    rows = read_rows("serving_moe_predictions.csv")
    lines = table_rows(doc_section("docs/accuracy.md", MOE))
    assert {(_label(l[0])[0], l[1]) for l in lines} >= {("held-out", m) for m in METRICS}
    for cell, metric, ours, theirs in lines:
        group, n = _label(cell)
        part = [r for r in rows if r["metric"] == METRICS[metric] and MOE_GROUPS[group](r)]
        assert len(part) == n and all(r["dispatchprof"] and r["aiconfigurator"] for r in part), cell
        _check(ours, _figure(part, "dispatchprof"))
        _check(theirs, _figure(part, "aiconfigurator"))


def test_the_disaggregated_lines():
    rows = read_rows("serving_disagg_predictions.csv")
    lines = table_rows(doc_section("docs/accuracy.md", DISAGG))
    assert [_label(l[0])[0] for l in lines] == list(DISAGG_GROUPS)
    for line in lines:
        group, n = _label(line[0])
        for cell, metric in zip(line[1:], METRICS.values()):
            part = [r for r in rows if r["metric"] == metric and DISAGG_GROUPS[group](r)]
            assert len(part) == n and all(r["dispatchprof"] for r in part), line[0]
            ours, theirs = cell.split(" / ")
            _check(ours, _figure(part, "dispatchprof"))
            _check(theirs, _figure(part, "aiconfigurator") if all(r["aiconfigurator"] for r in part) else None)
