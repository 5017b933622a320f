"""scripts/serving_moe_rows_report.py: the per-row lines and the table's medians, worked by hand."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import serving_moe_rows_report as report  # noqa: E402
from serving_rows import ServingRow  # noqa: E402


def _row(n: int, split: str, ttft_ms: float, tpot_ms: float) -> ServingRow:
    return ServingRow(f"r{n}", "test", split, "deepseek-r1", "B200", 8, "sglang", "0.5", "fp8", None, 1024, 1024, 4,
                      4, 36, {"ttft_mean": ttft_ms / 1e3, "tpot_mean": tpot_ms / 1e3}, {}, ep=8)


def test_lines_and_medians_by_hand():
    rows = [_row(1, "held-out", 100, 10), _row(2, "held-out", 200, 20), _row(3, "held-out", 400, 40),
            _row(4, "fit", 100, 10)]
    figures = {"r1": {"ttft_mean": ("100", "110", "150"), "tpot_mean": ("10", "8", "10")},     # +10%, -20%; AIC +50%, 0%
               "r2": {"ttft_mean": ("200", "100", "200"), "tpot_mean": ("20", "23", "")},      # -50%, +15%; AIC none
               "r3": {"ttft_mean": ("400", "440", "300"), "tpot_mean": ("40", "30", "44")}}    # +10%, -25%; AIC -25%, +10%
    lines = report.lines_of(rows, figures)
    assert [ln["id"] for ln in lines] == ["r1", "r2", "r3", "r4"]
    assert lines[0]["ep"] == 8 and lines[3]["dispatchprof_tpot_ms"] == "" and lines[3]["measured_tpot_ms"] == "10"
    text = report.table(lines).splitlines()
    held = text[1].split()
    # held-out: 3 rows predicted; TTFT |errors| 10, 50, 10 -> 10.0%, signed +10, -50, +10 -> +10.0%;
    # TPOT |errors| 20, 15, 25 -> 20.0%, signed -20, +15, -25 -> -20.0%; both: r1 and r3
    assert held[:10] == ["deepseek-r1", "held-out", "3", "3", "10.0%", "+10.0%", "20.0%", "-20.0%", "2", "10.0%"]
    # TTFT ours over r1, r3: 10, 10 -> 10.0%; AIC 50, 25 -> 37.5%; TPOT ours 20, 25 -> 22.5%, AIC 0, 10 -> 5.0%
    assert held[10:] == ["/", "37.5%", "22.5%", "/", "5.0%"]
    fit = text[2].split()
    assert fit[:4] == ["deepseek-r1", "fit", "1", "0"] and fit[4] == "-"
