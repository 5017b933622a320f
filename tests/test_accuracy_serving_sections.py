"""docs/deploy.md's two tables of AIConfigurator's silicon-sample rows outside the dense table
(docs/validation.md) agree with the per-row predictions they were made from, written by
``scripts/validate_serving.py --errors FILE`` with each section's ``--match``: "Expert-parallel rows
of AIConfigurator's silicon sample" (scripts/data/serving_moe_predictions.csv) and "Disaggregated
rows of AIConfigurator's silicon sample" (scripts/data/serving_disagg_predictions.csv). Each median
|error| is recomputed here over its group's rows: dispatchprof's over the rows it predicts,
AIConfigurator's over the rows both predict, "-" where AIConfigurator predicts none of them. The
CSVs keep 4 significant digits, so a median may differ from the doc's by rounding: 0.1 percentage
point at most."""

import re

import pytest

from tests.accuracy_docs import doc_section, median_abs_error, read_rows, table_rows

METRICS = {"TTFT mean": "ttft_mean", "TPOT mean": "tpot_mean"}
DOC = "docs/deploy.md"
MOE = "Expert-parallel rows of AIConfigurator's silicon sample"
DISAGG = "Disaggregated rows of AIConfigurator's silicon sample"
#: The MoE section's groups: label -> which rows (the experts spread over all tp GPUs: EP = tp).
MOE_GROUPS = {"held-out": lambda r: r["split"] == "held-out",
              "held-out, EP 4": lambda r: r["split"] == "held-out" and r["tp"] == "4",
              "held-out, EP 8": lambda r: r["split"] == "held-out" and r["tp"] == "8",
              "fit": lambda r: r["split"] == "fit"}
#: The disaggregated section's groups: label without its row count -> which rows.
DISAGG_GROUPS = {"held-out, all": lambda r: r["split"] == "held-out",
                 "held-out, both predict: NVFP4 on B200, GB200": lambda r: (r["split"] == "held-out"
                                                                           and r["aiconfigurator"] != ""),
                 "held-out, H100 SGLang": lambda r: (r["split"] == "held-out" and r["device"] == "H100-SXM"
                                                    and r["engine"] == "sglang"),
                 "fit, NVFP4 on GB200": lambda r: r["split"] == "fit" and r["device"] == "GB200" and r["weights"] == "fp4",
                 "fit, H100 SGLang and vLLM": lambda r: r["split"] == "fit" and r["device"] == "H100-SXM"}


def _figure(rows: list[dict], column: str) -> float | None:
    part = [r for r in rows if r[column]]
    return median_abs_error(part, column) if part else None


def _check(cell: str, figure: float | None) -> None:
    if figure is None:
        assert cell == "-"
    else:
        # a figure with no decimal is rounded to a whole percent
        assert float(cell.rstrip("%")) == pytest.approx(figure, abs=0.1 if "." in cell else 0.6), (cell, figure)


def _label(cell: str) -> tuple[str, int]:
    """A table's first cell "GROUP (N)" -> (GROUP, N)."""
    m = re.fullmatch(r"(.*) \((\d+)\)", cell)
    assert m, f"not a group and its row count: {cell!r}"
    return m.group(1), int(m.group(2))


def test_the_moe_lines():
    rows = read_rows("serving_moe_predictions.csv")
    lines = table_rows(doc_section(DOC, MOE))
    assert {(_label(l[0])[0], l[1]) for l in lines} >= {("held-out", m) for m in METRICS}
    for cell, metric, ours, theirs in lines:
        group, n = _label(cell)
        part = [r for r in rows if r["metric"] == METRICS[metric] and MOE_GROUPS[group](r)]
        assert len(part) == n and all(r["dispatchprof"] and r["aiconfigurator"] for r in part), cell
        _check(ours, _figure(part, "dispatchprof"))
        _check(theirs, _figure(part, "aiconfigurator"))


def test_the_disaggregated_lines():
    """A line gives one metric ("TTFT mean") or both ("TTFT / TPOT mean", each cell "a / b")."""
    rows = read_rows("serving_disagg_predictions.csv")
    lines = table_rows(doc_section(DOC, DISAGG))
    assert sorted({_label(l[0])[0] for l in lines}) == sorted(DISAGG_GROUPS)
    for cell, metric, ours, theirs in lines:
        group, n = _label(cell)
        metrics = [METRICS[f"{m} mean"] for m in metric.removesuffix(" mean").split(" / ")]
        for column, quoted in (("dispatchprof", ours), ("aiconfigurator", theirs)):
            figures = quoted.split(" / ") if quoted != "-" else ["-"] * len(metrics)
            assert len(figures) == len(metrics), cell
            for figure, m in zip(figures, metrics):
                part = [r for r in rows if r["metric"] == m and DISAGG_GROUPS[group](r)]
                assert len(part) == n and all(r["dispatchprof"] for r in part), cell
                _check(figure, _figure(part, column) if all(r[column] for r in part) else None)
