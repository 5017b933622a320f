"""Every example the README and docs mark runnable runs, and prints what the doc shows; every
generated table in them equals what scripts/docs_tables.py makes now (scripts/run_doc_examples.py
holds the markers and the checks; the slow blocks run with `make docs-examples`)."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import run_doc_examples as docs  # noqa: E402

BLOCKS = [b for path in docs.DOC_FILES for b in docs.blocks(path)]
FAST = [b for b in BLOCKS if b.mark != "run: slow"]


def test_the_readme_has_checked_examples_and_tables():
    marks = {(b.path.name, b.mark) for b in BLOCKS}
    assert {("README.md", "run"), ("README.md", "run: slow"), ("README.md", "generated: sweep_table")} <= marks
    assert any(b.output is not None for b in BLOCKS if b.path.name == "README.md")


@pytest.mark.parametrize("block", FAST, ids=[b.where for b in FAST])
def test_doc_example_runs_as_shown(block):
    assert docs.run_block(block) == ""


def write(tmp_path, text):
    path = tmp_path / "doc.md"
    path.write_text(text)
    return docs.blocks(path)


def test_a_wrong_output_fails(tmp_path):
    [block] = write(tmp_path, "<!-- run -->\n```python\nprint(2 * 3)\n```\n\n<!-- output -->\n```text\n7\n```\n")
    assert block.output == "7" and "printed:\n6" in docs.run_block(block)
    [block] = write(tmp_path, "<!-- run -->\n```python\nprint(2 * 3)\n```\n<!-- output -->\n```\n6\n```\n")
    assert docs.run_block(block) == ""


def test_a_stale_console_line_fails(tmp_path):
    [block] = write(tmp_path, "<!-- run -->\n```\n$ dispatchprof devices --format markdown\n...\n```\n")
    assert docs.run_block(block) == ""
    text = "<!-- run -->\n```\n$ dispatchprof devices --format markdown\n| NO-SUCH-DEVICE | 1 |\n```\n"
    [block] = write(tmp_path, text)
    assert docs.run_block(block).startswith("not printed now:\n| NO-SUCH-DEVICE | 1 |")


def test_a_stale_generated_table_fails(tmp_path):
    [block] = write(tmp_path, "<!-- generated: sweep_table -->\n| model | device |\n|---|---|\n")
    assert docs.run_block(block).startswith("table sweep_table differs")


def test_a_marker_must_precede_a_fence(tmp_path):
    with pytest.raises(ValueError, match="a marker must stand just before a code fence"):
        write(tmp_path, "<!-- run -->\ntext\n")


# --- figures the README quotes from other pages: the same as those pages state --------------------
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_device_count_is_the_catalogs():
    from dispatchprof.sim.catalog import list_devices
    assert f"timed on {len(list_devices())} bundled device profiles" in " ".join(README.split())


def test_readme_serving_errors_are_accuracy_mds():
    """The README's serving figures are the dense serving line of docs/accuracy.md's as-shipped table
    (itself recomputed from the rows by tests/test_accuracy_tables.py)."""
    import re
    text = (ROOT / "docs" / "accuracy.md").read_text(encoding="utf-8")
    (line,) = [l for l in text.splitlines() if l.startswith("| [Dense models served under load](")]
    m = re.search(r"\| (\d+) \| TPOT ([\d.]+)%, TTFT ([\d.]+)% \| AIConfigurator: TPOT ([\d.]+)%, TTFT ([\d.]+)% "
                  r"\(dispatchprof ([\d.]+)%, ([\d.]+)% on these (\d+)\) \|", line)
    assert m, line
    n, tpot, ttft, aic_tpot, aic_ttft, both_tpot, both_ttft, n_both = m.groups()
    assert f"| {both_tpot}% / {both_ttft}% (all {n} rows: {tpot}% / {ttft}%) |" in README
    assert f"| {aic_tpot}% / {aic_ttft}% |" in README
    flat = " ".join(README.split())
    assert f"on {n} held-out serving benchmarks" in flat and f"the {n_both} both tools predict" in flat


def test_readme_gpt2_flops_are_comparison_mds():
    text = (ROOT / "docs" / "comparison.md").read_text(encoding="utf-8")
    for tool, shown in [("dispatchprof", "32.285 G (ADD+MULT)"), ("deepspeed", "32.241 G"),
                        ("FlopCounterMode", "31.624 G")]:
        row = next(line for line in text.splitlines() if line.startswith("| gpt2") and f"| {tool} " in line)
        assert row.split("|")[3].strip() == shown.split(" (")[0] and shown in README


def test_guides_sweep_sentence_is_sweep_csvs():
    import csv
    rows = list(csv.DictReader(open(ROOT / "docs" / "sweep.csv", newline="")))
    over = [r for r in rows if r["fits"] == "False"]
    guide = " ".join((ROOT / "docs" / "guide.md").read_text(encoding="utf-8").split())
    assert f"{len(over)} of the {len(rows)} combinations do not fit in the L4's 24 GB" in guide
    assert {r["device"] for r in over} == {"L4"} and f"= {len(rows)} rows)" in guide
