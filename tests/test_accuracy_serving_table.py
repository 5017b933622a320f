"""Every line of docs/validation.md's serving table ("Serving benchmarks under load": held-out and fit,
by engine, device and source; docs/accuracy.md quotes its held-out lines) agrees with the per-row predictions it was made from
(scripts/data/serving_predictions.csv, ``scripts/validate_serving.py --errors FILE``): its row
counts, dispatchprof's median |error| over the rows it predicts and over the rows both tools
predict, and AIConfigurator's over the latter, recomputed here. The CSV keeps 4 significant
digits, so a median may differ from the table's by rounding: 0.1 percentage point at most.

A line's group is "fit", "held-out" or "held-out, X" where X is an engine, a device or a source; a
row's source follows from its id (`SOURCES`)."""

from __future__ import annotations

import pytest

from tests.accuracy_docs import doc_section, median_abs_error, read_rows, table_rows

DOC = "docs/validation.md"
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


TABLE = table_rows(doc_section(DOC, SECTION))


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


def _text() -> str:
    return " ".join(doc_section(DOC, SECTION).split())


def test_the_row_counts_of_the_text():
    """The silicon-sample rows predicted, the rows of each split, the rows AIConfigurator refuses."""
    silicon = {r["id"] for r in _rows() if _source(r) == SILICON}
    split = {s: len({r["id"] for r in _rows() if r["split"] == s}) for s in ("fit", "held-out")}
    refused = {r["id"] for r in _rows() if _source(r) == SILICON and not r["aiconfigurator"]}
    text = _text()
    assert f"**{len(silicon):,} rows**" in text, len(silicon)
    assert f"a fit row ({split['fit']}), the others are held out ({split['held-out']})" in text, split
    assert f"{len(refused)} silicon-sample rows are refused by AIConfigurator" in text, len(refused)


def _cell(group: str, metric: str, column: int) -> str:
    (line,) = [l for l in TABLE if l[:2] == [group, metric]]
    return line[column]


def test_where_it_stands_quotes_the_table():
    """The paragraph's figures are the table's: both tools on the rows both predict, per engine and
    device; the sim-to-real runs' medians."""
    text = _text()
    both = lambda g, m: (_cell(g, m, 5), _cell(g, m, 6))  # noqa: E731
    ttft, tpot = both("held-out", "TTFT mean"), both("held-out", "TPOT mean")
    assert (f"On the {_cell('held-out', 'TTFT mean', 4)} held-out rows both tools predict, dispatchprof is "
            f"{ttft[0]} off on mean TTFT against AIConfigurator's {ttft[1]}, and {tpot[0]} off on mean TPOT against "
            f"{tpot[1]}") in text
    for engine, name in (("sglang", "under SGLang"), ("vllm", "under vLLM"), ("trtllm", "on TensorRT-LLM")):
        t, p = both(f"held-out, {engine}", "TTFT mean"), both(f"held-out, {engine}", "TPOT mean")
        assert f"{name} (TTFT {t[0]} against {t[1]}, TPOT {p[0]} against {p[1]})" in text, engine
    cell = lambda device: both(f"held-out, {device}", "TPOT mean")[0]  # noqa: E731
    assert (f"TPOT is within 10% under every engine and on H100s ({cell('H100-SXM')}), B200s ({cell('B200')}) and "
            f"H200s ({cell('H200')}), over on GB200s' 10 rows ({cell('GB200')})") in text
    s2r = lambda m: _cell("held-out, sim-to-real vLLM runs", m, 3)  # noqa: E731
    assert (f"TTFT is {s2r('TTFT mean')} off (P90 {s2r('TTFT P90')}, P99 {s2r('TTFT P99')}) and TPOT "
            f"{s2r('TPOT mean')}") in text
    a100 = float(_cell("held-out, A100-80GB", "TPOT mean", 3).rstrip("%"))
    assert f"on A100-80GB TPOT is {a100:.0f}% high" in text
    assert all(float(r["dispatchprof"]) > float(r["measured"]) for r in _selected("held-out, A100-80GB", "TPOT mean"))
    for group in ("held-out, vllm", "held-out, sglang", "held-out, trtllm", "held-out, H100-SXM", "held-out, B200",
                  "held-out, H200"):
        assert float(_cell(group, "TPOT mean", 5).rstrip("%")) < 10, group
    assert float(_cell("held-out, GB200", "TPOT mean", 5).rstrip("%")) > 10


def _signed_median(held_out: bool = True, **where) -> float:
    """Median signed error (percent) of the silicon sample's rows matching ``where`` (a column ->
    value, or -> a predicate on the value)."""
    import statistics

    from tests.accuracy_docs import signed_error
    rows = [r for r in _rows() if _source(r) == SILICON and (r["split"] == "held-out") == held_out
            and all(v(r[k]) if callable(v) else r[k] == v for k, v in where.items())]
    assert len(rows) >= 5, where                 # the paragraph's groups have at least 5 rows
    return statistics.median(signed_error(r) for r in rows)


#: Each figure of "Where it misses" and the rows it is the signed median of.
MISSES = [
    ("-18% at up to 8 clients", dict(engine="trtllm", metric="ttft_mean", concurrency=lambda c: int(c) <= 8)),
    ("-38% above 64 clients", dict(engine="trtllm", metric="ttft_mean", concurrency=lambda c: int(c) > 64)),
    ("Llama-3.1-8B on H100 -41%", dict(engine="trtllm", metric="ttft_mean", model="llama-3.1-8b", device="H100-SXM")),
    ("Qwen3-32B FP8 on H100 -18%", dict(engine="trtllm", metric="ttft_mean", model="qwen3-32b", weights="fp8")),
    ("(vLLM -3%", dict(engine="vllm", metric="ttft_mean", model="llama-3.1-70b", device="H100-SXM")),
    ("and -8%,", dict(engine="vllm", metric="ttft_mean", model="llama-3.1-70b", device="H200")),
    ("TensorRT-LLM on H200 +5%", dict(engine="trtllm", metric="ttft_mean", model="llama-3.1-70b", device="H200")),
    ("vLLM on B200s (-34% FP8", dict(engine="vllm", metric="ttft_mean", model="llama-3.1-70b", device="B200", weights="fp8")),
    ("and -38% NVFP4", dict(engine="vllm", metric="ttft_mean", model="llama-3.1-70b", device="B200", weights="fp4")),
    ("TensorRT-LLM on B200s (-6%)", dict(engine="trtllm", metric="ttft_mean", model="llama-3.1-70b", device="B200")),
    ("rule 4): +3%", dict(engine="trtllm", metric="ttft_mean", model="llama-3.1-70b", isl="1024",
                                     osl="1024", tp=lambda tp: int(tp) < 8)),
    ("TPOT +124% (vLLM", dict(engine="vllm", metric="tpot_mean", model="llama-3.1-8b", device="H200")),
    ("and -9% (SGLang)", dict(engine="sglang", metric="tpot_mean", model="llama-3.1-8b", device="H200")),
    ("whose TTFT is +156%", dict(engine="sglang", metric="ttft_mean", model="llama-3.1-8b", device="H200")),
    ("TTFT and TPOT -48%", dict(engine="trtllm", metric="ttft_mean", model="qwen3-32b", device="GB200", weights="bf16")),
    ("and -60% (its", dict(engine="trtllm", metric="tpot_mean", model="qwen3-32b", device="GB200", weights="bf16")),
]


@pytest.mark.parametrize("quote,where", MISSES, ids=[q for q, _ in MISSES])
def test_where_it_misses(quote, where):
    import re
    assert quote in _text(), f"{quote!r} is not in the section"
    figure = int(re.search(r"[+-]\d+%", quote).group(0).rstrip("%"))
    median = _signed_median(**where)
    assert figure == round(median), f"{quote!r}: the rows' median is {median:+.1f}%"
