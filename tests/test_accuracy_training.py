"""docs/training.md's accuracy figures agree with the per-row predictions they were made from:
scripts/data/training_predictions.csv (``scripts/validate_training.py --errors FILE``: tokens/s per
GPU of every published row) and scripts/data/calculon_predictions.csv
(``scripts/calculon_side_by_side.py --errors FILE``: iteration seconds of the eight Megatron-LM
rows, Calculon's and ours, 9 significant digits). Every quoted line of the "Accuracy" blocks (median |error| and median
signed error per split and source, median signed error per group) and of the "Calculon side by
side" block (each row's seconds and errors, each tool's mean, median and max |error|) is
recomputed here from the rows, and the prose's figures from the same rows. The CSVs keep 6
significant digits: a median rounds to the doc's decimals as the unrounded one does."""

from __future__ import annotations

import csv
import re
import statistics

import pytest

from dispatchprof.train.factors import FACTORS
from tests.accuracy_docs import DATA, doc_section, median_abs_error, read_rows, signed_error

DOC = "docs/training.md"
#: A line of the by-source block: split, source, rows, median |error|, median signed error (not on "all").
SOURCE_LINE = re.compile(r"(fit|held-out)\s+(\S+)\s+rows\s+(\d+)\s+median \|error\|\s+(\d+\.\d%)"
                         r"(?:\s+median error\s+([+-]\d+\.\d%))?")
#: A line of the by-group block: group, split, value, rows, median signed error.
GROUP_LINE = re.compile(r"by (device|parallelism|precision)\s+(fit|held-out)\s+(.+?)\s+rows\s+(\d+)"
                        r"\s+median error\s+([+-]\d+\.\d%)")
#: A row line of the side-by-side block and its summary lines.
CALCULON_ROW = re.compile(r"(mlm-\S+)\s+(fit|held-out)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+([+-]\d+\.\d%)\s+(\d+\.\d\d)"
                          r"\s+([+-]\d+\.\d%)")
CALCULON_SUMMARY = re.compile(r"(Calculon|dispatchprof)\s+rows (\d+)\s+mean \|error\| (\d+\.\d{3}%)\s+"
                              r"median \|error\| (\d+\.\d{3}%)\s+max \|error\| (\d+\.\d{3}%)")
TOOLS = {"Calculon": "calculon", "dispatchprof": "dispatchprof"}


def _signed(figure: float, decimals: int = 1) -> str:
    return f"{figure:+.{decimals}f}%"


def _abs(figure: float, decimals: int = 1) -> str:
    return f"{figure:.{decimals}f}%"


def _block_lines(pattern: re.Pattern, section: str) -> list[tuple[str, re.Match]]:
    """The lines of ``section`` of the doc that ``pattern`` matches whole, with their match."""
    return [(line.strip(), m) for line in doc_section(DOC, section).splitlines()
            if (m := pattern.fullmatch(line.strip()))]


def _rows(split: str | None = None, **where: str) -> list[dict]:
    return [r for r in read_rows("training_predictions.csv")
            if (split is None or r["split"] == split) and all(r[k] == v for k, v in where.items())]


def _median_signed(rows: list[dict], column: str = "dispatchprof") -> float:
    return statistics.median(signed_error(r, column) for r in rows)


def _published() -> list[dict]:
    with open(DATA / "published_training.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_the_predictions_are_the_published_rows():
    """One prediction per row of published_training.csv, in its order, with its split, source,
    precision and published figure."""
    published, rows = _published(), _rows()
    assert [r["id"] for r in rows] == [p["id"] for p in published]
    for r, p in zip(rows, published):
        assert (r["split"], r["source"], r["precision"]) == (p["split"], p["source"], "fp8" if p["fp8"] == "1" else "bf16")
        assert float(r["measured"]) == pytest.approx(float(p["tokens_per_s_per_gpu"]), rel=1e-5), r["id"]


SOURCE_LINES = _block_lines(SOURCE_LINE, "Accuracy")
GROUP_LINES = _block_lines(GROUP_LINE, "Accuracy")


def test_the_blocks_are_found():
    assert len(SOURCE_LINES) >= 4 and len(GROUP_LINES) >= 3


@pytest.mark.parametrize("line,m", SOURCE_LINES, ids=[l for l, _ in SOURCE_LINES])
def test_each_source_line(line, m):
    split, source, count, abs_median, signed_median = m.groups()
    rows = _rows(split) if source == "all" else _rows(split, source=source)
    assert int(count) == len(rows), f"{line!r}: {len(rows)} rows"
    assert abs_median == _abs(median_abs_error(rows)), f"{line!r}: median |error| {median_abs_error(rows):.2f}%"
    if signed_median is not None:
        assert signed_median == _signed(_median_signed(rows)), f"{line!r}: median error {_median_signed(rows):+.2f}%"


@pytest.mark.parametrize("split", ["fit", "held-out"])
def test_every_source_of_a_split_has_its_line(split):
    quoted = {m.group(2) for _, m in SOURCE_LINES if m.group(1) == split}
    assert quoted == {r["source"] for r in _rows(split)} | {"all"}


@pytest.mark.parametrize("line,m", GROUP_LINES, ids=[l for l, _ in GROUP_LINES])
def test_each_group_line(line, m):
    group, split, value, count, signed_median = m.groups()
    rows = _rows(split, **{group: value})
    assert int(count) == len(rows), f"{line!r}: {len(rows)} rows"
    assert signed_median == _signed(_median_signed(rows)), f"{line!r}: median error {_median_signed(rows):+.2f}%"


def test_every_held_out_group_has_its_line():
    for group in ("device", "parallelism", "precision"):
        quoted = {m.group(3) for _, m in GROUP_LINES if m.group(1) == group and m.group(2) == "held-out"}
        assert quoted == {r[group] for r in _rows("held-out")}, group


def _prose(section: str) -> str:
    return " ".join(doc_section(DOC, section).split())


def test_the_row_counts_and_factors_of_the_text():
    text = _prose("Accuracy")
    assert f"predicts {len(_rows())} published training configurations" in text
    assert f"fitted on the {len(_rows('fit'))} fit rows only" in text
    assert (f"(attention {FACTORS.attention_efficiency:g}, FP8 linears {FACTORS.fp8_efficiency:g})" in text)


def _whole(figure: float) -> str:
    return f"{figure:+.0f}%"


def test_the_torchtitan_bullet():
    """torchtitan's signed medians per split, rounded to whole percents."""
    tt = [_whole(_median_signed(_rows(s, source="torchtitan"))) for s in ("held-out", "fit")]
    assert f"**torchtitan** ({tt[0]} held-out, {tt[1]} on its fit rows)" in _prose("Accuracy"), tt


def test_the_grand_teton_figures():
    """The Grand Teton device's (h100-96gb-500w) signed median per split, with its row counts."""
    gt = {s: _rows(s, device="h100-96gb-500w") for s in ("fit", "held-out")}
    quote = (f"{_whole(_median_signed(gt['fit']))} median on its {len(gt['fit'])} fit rows, "
             f"{_whole(_median_signed(gt['held-out']))} on its {len(gt['held-out'])} held-out rows")
    assert quote in _prose("Accuracy"), quote


def test_the_gb200_bullet():
    gb = [_whole(_median_signed(_rows(s, device="GB200"))) for s in ("fit", "held-out")]
    assert f"**DGX-GB200** ({gb[0]} fit, {gb[1]} held-out;" in _prose("Accuracy"), gb


def test_the_fp8_bullet():
    """FP8 against bf16, signed medians of the held-out rows."""
    fp8, bf16 = (_whole(_median_signed(_rows("held-out", precision=p))) for p in ("fp8", "bf16"))
    assert f"**FP8** rows are {fp8} held-out against {bf16} for bf16" in _prose("Accuracy"), (fp8, bf16)


def test_the_megatron_lm_range_of_the_text():
    errors = [signed_error(r) for r in _rows(source="megatron-lm")]
    assert f"Throughput is {_signed(min(errors))} to {_signed(max(errors))} off" in _prose("Accuracy")


CALCULON_ROWS = _block_lines(CALCULON_ROW, "Calculon side by side")
CALCULON_SUMMARIES = _block_lines(CALCULON_SUMMARY, "Calculon side by side")


def _calculon(split: str | None = None) -> list[dict]:
    return [r for r in read_rows("calculon_predictions.csv") if split is None or r["split"] == split]


def test_the_side_by_side_rows_are_the_megatron_lm_rows():
    assert [r["id"] for r in _calculon()] == [r["id"] for r in _rows(source="megatron-lm")]
    assert [l.split()[0] for l, _ in CALCULON_ROWS] == [r["id"] for r in _calculon()]


@pytest.mark.parametrize("line,m", CALCULON_ROWS, ids=[l.split()[0] for l, _ in CALCULON_ROWS])
def test_each_side_by_side_row(line, m):
    """Published seconds, Calculon's error, our seconds and error. Calculon's seconds are its
    printed ones (0.01 s) where the CSV keeps the time its error comes from: 0.01 s apart at most."""
    row_id, split, published, theirs, their_error, ours, our_error = m.groups()
    (r,) = [r for r in _calculon() if r["id"] == row_id]
    assert split == r["split"], line
    assert published == f"{float(r['measured']):.2f}", f"{line!r}: published {r['measured']}"
    assert float(theirs) == pytest.approx(float(r["calculon"]), abs=0.01 + 1e-9), f"{line!r}: Calculon {r['calculon']}"
    assert their_error == _signed(signed_error(r, "calculon")), f"{line!r}: Calculon {signed_error(r, 'calculon'):+.2f}%"
    assert ours == f"{float(r['dispatchprof']):.2f}", f"{line!r}: dispatchprof {r['dispatchprof']}"
    assert our_error == _signed(signed_error(r)), f"{line!r}: dispatchprof {signed_error(r):+.2f}%"


def test_the_side_by_side_seconds_are_the_training_rows_tokens():
    """Our seconds are the training validation's tokens/s per GPU turned into an iteration:
    global batch x sequence / (tokens/s/GPU x GPUs)."""
    published = {p["id"]: p for p in _published()}
    predicted = {r["id"]: float(r["dispatchprof"]) for r in _rows(source="megatron-lm")}
    for r in _calculon():
        p = published[r["id"]]
        seconds = int(p["global_batch"]) * int(p["seq_len"]) / predicted[r["id"]] / int(p["devices"])
        assert float(r["dispatchprof"]) == pytest.approx(seconds, rel=2e-5), r["id"]


@pytest.mark.parametrize("line,m", CALCULON_SUMMARIES, ids=[l.split()[0] for l, _ in CALCULON_SUMMARIES])
def test_each_tools_summary(line, m):
    tool, count, mean, median, worst = m.groups()
    errors = [abs(signed_error(r, TOOLS[tool])) for r in _calculon()]
    assert int(count) == len(errors), line
    assert mean == _abs(statistics.mean(errors), 3), f"{line!r}: mean {statistics.mean(errors):.4f}%"
    assert median == _abs(statistics.median(errors), 3), f"{line!r}: median {statistics.median(errors):.4f}%"
    assert worst == _abs(max(errors), 3), f"{line!r}: max {max(errors):.4f}%"


def test_both_summaries_are_quoted():
    assert sorted(m.group(1) for _, m in CALCULON_SUMMARIES) == sorted(TOOLS)


def test_the_held_out_sentence():
    held = _calculon("held-out")
    ours = " and ".join(_signed(signed_error(r)) for r in held)
    theirs = " and ".join(_signed(signed_error(r, "calculon")) for r in held)
    count = {2: "two"}.get(len(held), str(len(held)))
    assert (f"On the {count} held-out rows dispatchprof is {ours}, Calculon {theirs}"
            in _prose("Calculon side by side"))


def _measured_table() -> list[list[str]]:
    from tests.accuracy_docs import table_rows
    text = doc_section(DOC, "Accuracy")
    return table_rows(text[text.index("| source | device | batch x seq |"):])


def test_the_measured_steps_table_is_what_the_script_prints_now():
    """The table of the project's own measured steps against `validate_training.measured_rows()`
    (the rows of ``--measured``, counted now: deterministic, about 15 s), every cell as printed."""
    import validate_training as vt
    rows = vt.measured_rows()
    table = _measured_table()
    assert [line[0] for line in table] == [r["source"] for r in rows]
    for line, r in zip(table, rows):
        want = [r["source"], r["device"], f"{r['batch']} x {r['seq']}", f"{r['measured_s']:.4f} s",
                f"{r['predicted_s']:.4f} s", f"{r['predicted_s'] / r['measured_s'] - 1:+.1%}",
                f"{r['measured_gib']:.1f} GiB", f"{r['allocated_gib']:.1f} GiB",
                f"{r['allocated_gib'] / r['measured_gib'] - 1:+.1%}", f"{r['predicted_gib']:.1f} GiB"]
        assert line == want, f"{' | '.join(line)}: now {' | '.join(want)}"


def test_every_memory_row_has_a_layout():
    """scripts/validate_training_memory.py lays out its rows with `validate_training.layout_of`; its
    CSV has no sequence_parallel column, which then defaults to on (as `TrainLayout`)."""
    import validate_training as vt
    with open(DATA / "published_training_memory.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and "sequence_parallel" not in rows[0]
    assert all(vt.layout_of(r).sequence_parallel for r in rows)


def _row_errors(**where) -> list[float]:
    """Signed errors (percent) of the rows matching ``where``: columns of training_predictions.csv
    or of published_training.csv (runtime, seq_len), each a value or a predicate on it."""
    published = {p["id"]: p for p in _published()}
    out = []
    for r in _rows():
        row = {**published[r["id"]], **r}
        if all(v(row[k]) if callable(v) else row[k] == v for k, v in where.items()):
            out.append(signed_error(r))
    assert out, where
    return out


def _span(errors: list[float]) -> str:
    return f"{_whole(min(errors))} to {_whole(max(errors))}"


#: The torchtitan and DGX-GB200 bullets' per-row figures: the quote with {} for the figures, the rows.
GRAND_TETON_8K_DP = dict(device="h100-96gb-500w", parallelism="dp only, zero 3", seq_len="8192")
ROW_FIGURES = [
    ("with torch.compile the predictions are {} on the Grand Teton H100 rows", [dict(runtime="compiled",
                                                                                    **GRAND_TETON_8K_DP)]),
    ("where the eager ones are {} and {}", [dict(runtime="eager", **GRAND_TETON_8K_DP)]),
    ("its FP8 rows on H200 are {} and {}", [dict(source="torchtitan", device="H200")]),
    ("the context-parallel rows {}, most at", [dict(source="torchtitan", parallelism=lambda p: p.startswith("cp"))]),
    ("The A100 rows are {}.", [dict(source="torchtitan", device="A100-80GB")]),
    ("(compiled FP8 {} and {}, compiled bf16 {} and {})", [dict(runtime="compiled", precision="fp8", **GRAND_TETON_8K_DP),
                                                          dict(runtime="compiled", precision="bf16", **GRAND_TETON_8K_DP)]),
]


@pytest.mark.parametrize("quote,groups", ROW_FIGURES, ids=[q for q, _ in ROW_FIGURES])
def test_the_torchtitan_rows_figures(quote, groups):
    """A quote with one {} is its rows' span; with one {} per row, each row's error in order."""
    figures = []
    for where in groups:
        errors = _row_errors(**where)
        figures += [_span(errors)] if quote.count("{}") == len(groups) else [_whole(e) for e in sorted(errors)]
    text = quote.format(*figures)
    assert text in _prose("Accuracy"), text


def test_the_gb200_rows_worst():
    worst = max(_row_errors(device="GB200"))
    assert f"held-out; up to {_whole(worst)})" in _prose("Accuracy"), worst
