"""docs/simulator.md's lent-H100 table is what `scripts/compare_lent_gpu.py --errors` wrote
(scripts/data/h100_lent_predictions.csv): every row's measured and predicted milliseconds and its
error, recomputed from the CSV."""

from __future__ import annotations

from tests.accuracy_docs import doc_section, read_rows

SECTION = "Kernels on a lent H100"


def _table() -> list[list[str]]:
    lines = [l for l in doc_section("docs/simulator.md", SECTION).splitlines() if l.startswith("| llama")]
    return [[c.strip() for c in l.strip("|").split("|")] for l in lines]


def _predictions() -> dict[tuple, dict[str, dict]]:
    out: dict[tuple, dict[str, dict]] = {}
    for r in read_rows("h100_lent_predictions.csv"):
        key = (r["model"], r["phase"], int(r["batch"]), int(r["tokens"]))
        out.setdefault(key, {})[r["runtime"]] = r
    return out


def test_every_row_of_the_table_is_the_csvs():
    table, rows = _table(), _predictions()
    assert len(table) == len(rows) == 24
    for model, phase, batch, tokens, measured, predicted, error in table:
        runs = rows[(model, phase.split(" ")[0], int(batch), int(tokens))]
        assert measured == f"{float(next(iter(runs.values()))['measured']) * 1e3:.2f}", (model, phase, batch, tokens)
        quoted = dict(p.split(" ") for p in predicted.split(", "))
        assert set(quoted) == set(runs)
        for runtime, r in runs.items():
            ms = float(r["dispatchprof"]) * 1e3
            assert quoted[runtime] == f"{ms:.2f}", (model, phase, batch, tokens, runtime)
        errors = [f"{100 * (float(runs[rt]['dispatchprof']) / float(runs[rt]['measured']) - 1):+.0f}%"
                  for rt in quoted]
        assert error == ", ".join(errors), (model, phase, batch, tokens)


def test_the_prose_quotes_the_512_token_eager_prefills():
    text = " ".join(doc_section("docs/simulator.md", SECTION).split())
    rows = _predictions()
    for model, name in (("llama-3.2-1b", "Llama-3.2-1B"), ("llama-3.1-8b", "Llama-3.1-8B")):
        r = rows[(model, "prefill", 1, 512)]["eager"]
        err = 100 * (float(r["dispatchprof"]) / float(r["measured"]) - 1)
        assert f"{err:+.0f}% for {name}" in text, f"{name}: {err:+.1f}%"
