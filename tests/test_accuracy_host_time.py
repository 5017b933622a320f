"""docs/accuracy.md's "Eager and compiled decode on one GPU" quotes the runs of
scripts/validate_host_time.py kept in scripts/data/host_time_fit_2core_runs.txt (each run's printed
output under "## run N"; host times are measured while counting, so runs differ). Each quoted
held-out median |error| is recomputed here from that run's per-row lines: the row's measured step
from scripts/data/host_time_rows.csv, its predicted step as printed (ms, 2 decimals, so a median
may differ from the printed one by rounding: 0.1 percentage point at most); the row counts by
source come from the rows file. A new run's ``--errors FILE`` writes the same rows at full precision."""

import csv
import re
import statistics

import pytest

from tests.accuracy_docs import DATA, doc_section

SECTION = "Eager and compiled decode on one GPU: the host's share"
RUNS = DATA / "host_time_fit_2core_runs.txt"
#: The project's own measurements, by the host they ran on; every other row is published.
OWN = {"lent-h200-vm": "H200", "lent-h100": "lent H100"}
ROW = re.compile(r"^(\S+)\s+(?:fit|held-out)\s+\w+\s+measured\s+[\d.]+ ms\s+predicted\s+([\d.]+) ms", re.M)


def _rows() -> dict[str, dict]:
    with open(DATA / "host_time_rows.csv", newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def _text() -> str:
    return " ".join(doc_section("docs/accuracy.md", SECTION).split())


def _quoted(runtime: str) -> tuple[list[float], int]:
    """The figures (percent) the section quotes for ``runtime``'s held-out rows, one per run, and their count."""
    m = re.search(rf"held-out {runtime}(?: median \|error\|)? ([\d.%, and]+?) \((\d+) rows\)", _text())
    assert m, f"no held-out {runtime} figures in the section"
    return [float(f.rstrip("%")) for f in re.split(r", | and ", m.group(1))], int(m.group(2))


def _runs() -> list[str]:
    return re.split(r"^## run ", RUNS.read_text(), flags=re.M)[1:]


def _recomputed(block: str, runtime: str) -> tuple[float, int]:
    """(median |error| in percent, row count) of ``runtime``'s held-out rows of one run's lines."""
    rows = _rows()
    predicted = {i: float(ms) / 1e3 for i, ms in ROW.findall(block)}
    assert set(predicted) == set(rows), "a run prints every row of the rows file once"
    errs = [abs(100 * (predicted[i] / float(r["value"]) - 1)) for i, r in rows.items()
            if r["split"] == "held-out" and r["runtime"] == runtime]
    return statistics.median(errs), len(errs)


@pytest.mark.parametrize("runtime", ["eager", "compiled"])
def test_every_quoted_figure_is_its_runs_rows_median(runtime):
    figures, count = _quoted(runtime)
    runs = _runs()
    assert len(figures) == len(runs)
    for figure, block in zip(figures, runs):
        median, n = _recomputed(block, runtime)
        printed = re.search(rf"^  held-out runtime {runtime}\s+([\d.]+)%", block, re.M).group(1)
        assert n == count
        assert figure == pytest.approx(median, abs=0.1) and figure == float(printed)


def test_the_rows_by_source():
    rows = _rows().values()
    own = {label: sum(r["host"] == host for r in rows) for host, label in OWN.items()}
    published = len(rows) - sum(own.values())
    assert (f"on {published} published rows, {own['H200']} measured by the project on an H200 and "
            f"{own['lent H100']} on a lent H100") in _text()
