"""docs/deploy.md's table of the newer mixture-of-experts rows ("gpt-oss-120b, MiniMax-M2.5,
DeepSeek-R1/V3 ...: every aggregated row") recomputed from scripts/data/serving_moe_rows_predictions.csv: per model
and over all, the held-out rows predicted, the median |error| of TTFT and TPOT (TPOT's signed median
beside it), and over the rows AIConfigurator predicts too, both tools' medians. The CSV keeps 4
significant digits: a median may differ from the doc's by 0.1 percentage point."""

from __future__ import annotations

import re
import statistics

import pytest

from tests.accuracy_docs import read_rows, table_rows

HEADING = "**gpt-oss-120b, MiniMax-M2.5, DeepSeek-R1/V3, Kimi-K2.5, Qwen3.5-397B: every aggregated row.**"
NAMES = {"MiniMax-M2.5": "minimax-m2.5", "DeepSeek-V3": "deepseek-v3", "DeepSeek-R1": "deepseek-r1",
         "gpt-oss-120b": "gpt-oss-120b", "Kimi-K2.5": "kimi-k2.5", "Qwen3.5-397B": "qwen3.5-397b-a17b"}


def _errors(rows: list[dict], metric: str, tool: str = "dispatchprof") -> list[float]:
    return [100 * (float(r[f"{tool}_{metric}_ms"]) / float(r[f"measured_{metric}_ms"]) - 1) for r in rows]


def _median_abs(values: list[float]) -> float:
    return statistics.median(abs(v) for v in values)


def _doc_table() -> list[list[str]]:
    from tests.accuracy_docs import ROOT
    text = (ROOT / "docs/deploy.md").read_text()
    return table_rows(text[text.index(HEADING):])


def _figure(cell: str) -> float:
    return float(re.match(r"([+-]?[\d.]+)%", cell).group(1))


@pytest.mark.parametrize("line", _doc_table(), ids=lambda line: line[0])
def test_each_line_is_the_csv(line: list[str]) -> None:
    rows = [r for r in read_rows("serving_moe_rows_predictions.csv")
            if r["split"] == "held-out" and r["dispatchprof_tpot_ms"]
            and (line[0] == "all" or r["model"] == NAMES[line[0]])]
    name, held, ttft, tpot, both, ttft_pair, tpot_pair = line
    assert int(held) == len(rows)
    assert _figure(ttft) == pytest.approx(_median_abs(_errors(rows, "ttft")), abs=0.1)
    assert _figure(tpot) == pytest.approx(_median_abs(_errors(rows, "tpot")), abs=0.1)
    signed = float(re.search(r"\(([+-][\d.]+)%\)", tpot).group(1))
    assert signed == pytest.approx(statistics.median(_errors(rows, "tpot")), abs=0.1)
    shared = [r for r in rows if r["aiconfigurator_tpot_ms"] and r["aiconfigurator_ttft_ms"]]
    assert int(both) == len(shared)
    for pair, metric in ((ttft_pair, "ttft"), (tpot_pair, "tpot")):
        if not shared:
            assert pair == "-"
            continue
        ours, theirs = (float(v) for v in re.findall(r"([\d.]+)%", pair))
        assert ours == pytest.approx(_median_abs(_errors(shared, metric)), abs=0.1)
        assert theirs == pytest.approx(_median_abs(_errors(shared, metric, "aiconfigurator")), abs=0.1)


def test_the_attention_data_parallel_rows_quote_the_layout_csv() -> None:
    """The attention data-parallel paragraph's figures: held-out rows of scripts/data/
    serving_layout_rows_predictions.csv, median |error| and signed median of each metric, and both
    tools' medians over the rows AIConfigurator predicts too."""
    from tests.accuracy_docs import ROOT

    text = " ".join((ROOT / "docs/deploy.md").read_text().split())
    rows = [r for r in read_rows("serving_layout_rows_predictions.csv") if r["layout_kind"] == "attention-DP"]
    held = [r for r in rows if r["split"] == "held-out" and r["dispatchprof_ttft_ms"]]
    shared = [r for r in held if r["aiconfigurator_ttft_ms"] and r["aiconfigurator_tpot_ms"]]
    assert f"The sample's {len(rows)} aggregated rows" in text and len(held) == len([r for r in rows
                                                                                     if r["split"] == "held-out"])
    t, p = (_median_abs(_errors(held, m)) for m in ("ttft", "tpot"))
    st, sp = (statistics.median(_errors(held, m)) for m in ("ttft", "tpot"))
    assert (f"held-out ({len(held)}) TTFT {t:.1f}%, TPOT {p:.1f}%, both short (signed {st:.1f}% and {sp:.1f}%)"
            in text)
    ours = [_median_abs(_errors(shared, m)) for m in ("ttft", "tpot")]
    theirs = [_median_abs(_errors(shared, m, "aiconfigurator")) for m in ("ttft", "tpot")]
    assert (f"on the {len(shared)} that AIConfigurator predicts too, TTFT {ours[0]:.1f}% against its "
            f"{theirs[0]:.1f}% and TPOT {ours[1]:.1f}% against {theirs[1]:.1f}%") in text


def test_the_disaggregated_rows_quote_the_layout_csv() -> None:
    """The disaggregated mixture-of-experts paragraph's figures: the expressed rows of scripts/data/
    serving_layout_rows_predictions.csv whose layout kind is disaggregated; those of under 800
    clients all run, of those of 1,024 or more every one AIConfigurator predicts (issue 35) and the
    others predicted; held-out medians and signed medians, both tools' medians over the rows
    AIConfigurator predicts too, and the signed TPOT median per device."""
    from tests.accuracy_docs import ROOT

    text = " ".join((ROOT / "docs/deploy.md").read_text().split())
    rows = [r for r in read_rows("serving_layout_rows_predictions.csv") if r["layout_kind"].startswith("disagg")]
    small = [r for r in rows if int(r["clients"]) < 800]
    large = [r for r in rows if int(r["clients"]) >= 1024]
    run = small + [r for r in large if r["dispatchprof_ttft_ms"]]
    predicted = [r for r in run if r["dispatchprof_ttft_ms"]]
    theirs_large = [r for r in large if r["aiconfigurator_ttft_ms"]]
    missing = [r for r in theirs_large if not r["dispatchprof_ttft_ms"]]
    not_run = len(large) - len(run) + len(small)
    which = (f"{len(theirs_large) - len(missing)} of the {len(theirs_large)} AIConfigurator predicts; the other "
             f"{not_run}, {len(missing)} of them AIConfigurator's, are not run" if missing else
             f"every one AIConfigurator predicts; the other {not_run} are not run")
    assert len(small) + len(large) == len(rows)
    assert (f"Of the {len(rows)} disaggregated rows of DeepSeek-R1/V3 and Kimi-K2.5" in text
            and f"the {len(small)} of 4 to 768 clients and {len(run) - len(small)} of the {len(large)} of 1,024 to "
                f"12,288 ({which}" in text
            and f"are run and {len(predicted)} predicted ({len(run) - len(predicted)} SGLang FP8 rows" in text)
    held_large = [r for r in run if r in large and r["split"] == "held-out"]
    theirs = [r for r in held_large if r["aiconfigurator_tpot_ms"]]
    assert (f"held-out ({len(held_large)}) TPOT signed {statistics.median(_errors(held_large, 'tpot')):+.1f}%, "
            f"AIConfigurator's {statistics.median(_errors(theirs, 'tpot', 'aiconfigurator')):+.1f}% on the "
            f"{len(theirs)} it predicts") in text
    held = [r for r in predicted if r["split"] == "held-out"]
    t, p = (_median_abs(_errors(held, m)) for m in ("ttft", "tpot"))
    st, sp = (statistics.median(_errors(held, m)) for m in ("ttft", "tpot"))
    assert f"held-out ({len(held)}) TTFT {t:.1f}%, TPOT {p:.1f}% (signed {st:.1f}% and {sp:+.1f}%)" in text
    shared = [r for r in held if r["aiconfigurator_ttft_ms"] and r["aiconfigurator_tpot_ms"]]
    ours = [_median_abs(_errors(shared, m)) for m in ("ttft", "tpot")]
    theirs = [_median_abs(_errors(shared, m, "aiconfigurator")) for m in ("ttft", "tpot")]
    assert (f"on the {len(shared)} that AIConfigurator predicts too, TTFT {ours[0]:.1f}% against its "
            f"{theirs[0]:.1f}% and TPOT {ours[1]:.1f}% against {theirs[1]:.1f}%") in text
    for device in ("B200", "GB200", "GB300", "H200"):
        signed = statistics.median(_errors([r for r in held if r["device"] == device], "tpot"))
        assert f"{signed:+.1f}%" in text[text.index("Disaggregated mixture-of-experts rows"):], device
    short = {}                      # measured - predicted TTFT (ms) of the predicted rows of up to 64 clients
    for r in predicted:
        if int(r["clients"]) <= 64:
            short.setdefault(r["engine"], []).append(float(r["measured_ttft_ms"]) - float(r["dispatchprof_ttft_ms"]))
    gap = {engine: statistics.median(values) for engine, values in short.items()}
    assert (f"TTFT exceeds the predicted by a median of {gap['sglang']:.0f} ms under SGLang, {gap['trtllm']:.0f} ms "
            f"under TensorRT-LLM and {gap['vllm']:.0f} ms under vLLM") in text


def test_deepseek_r1s_ttft_by_prompt_length_quotes_the_csv() -> None:
    """DeepSeek-R1's rows of 4 and 8 clients: short at 1,024-token prompts, close at 8,192 (the
    prefill paragraph), medians of the predicted rows of scripts/data/serving_moe_rows_predictions.csv."""
    from tests.accuracy_docs import ROOT

    text = " ".join((ROOT / "docs/deploy.md").read_text().split())
    rows = [r for r in read_rows("serving_moe_rows_predictions.csv")
            if r["model"] == "deepseek-r1" and r["dispatchprof_ttft_ms"] and r["clients"] in ("4", "8")]
    short = [r for r in rows if r["isl"] == "1024"]
    long = [r for r in rows if r["isl"] == "8192"]
    measured = statistics.median(float(r["measured_ttft_ms"]) for r in short)
    predicted = statistics.median(float(r["dispatchprof_ttft_ms"]) for r in short)
    assert (f"short at 1,024-token prompts (median {measured:.0f} ms measured, {predicted:.0f} ms predicted, "
            f"{statistics.median(_errors(short, 'ttft')):.0f}% signed over {len(short)} rows on B200 and H200) and "
            f"within a few percent at 8,192 ({statistics.median(_errors(long, 'ttft')):+.0f}%, {len(long)} rows)") in text
    assert abs(statistics.median(_errors(long, "ttft"))) < 5
    assert {r["device"] for r in rows} == {"B200", "H200"}


@pytest.mark.parametrize("quote, model, device, engine", [
    ("gpt-oss-120b {}% (vLLM and TensorRT-LLM alike", "gpt-oss-120b", None, None),
    ("MiniMax-M2.5 {}% on B200", "minimax-m2.5", "B200", None), ("and {}% on H200, Qwen3.5", "minimax-m2.5", "H200", None),
    ("Qwen3.5-397B {}% on B200", "qwen3.5-397b-a17b", "B200", None),
    ("DeepSeek-R1 under SGLang {}% (NVFP4, B200)", "deepseek-r1", "B200", "sglang"),
])
def test_the_prefill_paragraph_quotes_inferencemax_client_rows(quote, model, device, engine) -> None:
    """Signed median TTFT error over every predicted row run with InferenceMAX's own client (ids of
    its 2026-04-06 runs) of the model, device and engine."""
    from tests.accuracy_docs import ROOT

    text = " ".join((ROOT / "docs/deploy.md").read_text().split())
    rows = [r for r in read_rows("serving_moe_rows_predictions.csv")
            if r["id"].startswith("2026_04_06_") and r["model"] == model and r["dispatchprof_ttft_ms"]
            and device in (None, r["device"]) and engine in (None, r["engine"])]
    assert len(rows) >= 10
    assert quote.format(f"{statistics.median(_errors(rows, 'ttft')):.0f}") in text
