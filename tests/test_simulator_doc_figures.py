"""docs/simulator.md's host-time figures agree with the files they quote:

- the three as-shipped runs on the project's 2-core machine, from scripts/data/host_time_fit_2core_runs.txt
  (each run's rows under "## run N");
- the bare HF decode step measured on the lent H100 and the hosts' measured loop times.

Each figure is recomputed from a run's per-row lines: the row's measured step from
scripts/data/host_time_rows.csv, its predicted step as printed (ms, 2 decimals), error = predicted /
measured - 1; a row's family is `validate_host_time.family`. The printed milliseconds round to
0.005 ms, so a row's recomputed error may be off by 0.5 / measured ms percentage points, and a median
by the most of its rows' (`_tolerance`); a quoted figure may then round by half its last digit."""

from __future__ import annotations

import re
import statistics

import pytest
import validate_host_time as vh

from dispatchprof.sim.hostprofile import hosts
from tests.accuracy_docs import DATA, cells, doc_section, read_rows

DOC = "docs/simulator.md"
SECTION = "Host time: measured, then scaled to the target's CPU"
RUNS = DATA / "host_time_fit_2core_runs.txt"
ROW = re.compile(r"^(\S+)\s+(?:fit|held-out)\s+\w+\s+measured\s+[\d.]+ ms\s+predicted\s+([\d.]+) ms", re.M)
#: The short model names of the lent-H100 line, in its order.
H100_MODELS = {"1B": "llama-3.2-1b", "8B": "llama-3.1-8b", "3B": "llama-3.2-3b", "Qwen2.5-7B": "qwen2.5-7b",
               "Mistral-7B": "mistral-7b", "Phi-3": "phi-3-mini", "Gemma-2": "gemma-2-9b", "Qwen3-14B": "qwen3-14b"}


def _errors(block: str) -> dict[str, float]:
    """Row id -> signed error in percent, from one run's printed rows."""
    rows = {r["id"]: r for r in read_rows("host_time_rows.csv")}
    predicted = {i: float(ms) / 1e3 for i, ms in ROW.findall(block)}
    assert set(predicted) <= set(rows) and predicted, "a run prints rows of the rows file"
    return {i: 100 * (p / float(rows[i]["value"]) - 1) for i, p in predicted.items()}


def _select(errors: dict[str, float], **where: str) -> list[float]:
    rows = {r["id"]: r for r in read_rows("host_time_rows.csv")}
    out = []
    for i, e in errors.items():
        r = dict(rows[i], family=vh.family(rows[i]["model"]))
        if all(r[k] == v for k, v in where.items()):
            out.append(e)
    return out


def _median_abs(errors: list[float]) -> float:
    return statistics.median(map(abs, errors))


def _tolerance(errors: dict[str, float], figures: list[float], digits: int) -> float:
    """How far a figure quoted to ``digits`` decimals may sit from one recomputed from ``figures``
    (errors of rows of ``errors``): the printed milliseconds' rounding, then the quote's."""
    rows = {r["id"]: r for r in read_rows("host_time_rows.csv")}
    ids = [i for i, e in errors.items() if e in figures]
    return max(0.5 / (1e3 * float(rows[i]["value"])) for i in ids) + 0.5 * 10 ** -digits + 1e-9


def _table(first: str) -> list[list[str]]:
    """The body of the section's table whose header starts with ``first``."""
    text = doc_section(DOC, SECTION)
    lines = text[text.index(f"| {first}"):].splitlines()
    body = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        body.append(cells(line))
    return body


def _line(table: list[list[str]], start: str) -> list[str]:
    (line,) = [l for l in table if l[0].startswith(start)]
    return line


def _pct(cell: str) -> float:
    return float(cell.replace("−", "-").rstrip("%"))


# --- the three runs on the project's 2-core machine ----------------------------------------------------
RUN_ERRORS = [_errors(block) for block in re.split(r"^## run ", RUNS.read_text(), flags=re.M)[1:]]
SECOND = "rows, median"


@pytest.mark.parametrize("split,runtime", [("held-out", "eager"), ("held-out", "compiled"), ("fit", "eager"),
                                           ("fit", "compiled")])
def test_each_runs_split_and_runtime(split, runtime):
    line = _line(_table(SECOND), f"{split} {runtime}")
    assert len(line) == 1 + len(RUN_ERRORS), line
    for n, (cell, errors) in enumerate(zip(line[1:], RUN_ERRORS), 1):
        part = _select(errors, split=split, runtime=runtime)
        assert line[0] == f"{split} {runtime} ({len(part)} rows)", line
        assert _pct(cell) == pytest.approx(_median_abs(part), abs=_tolerance(errors, part, 1)), \
            f"{line[0]}, run {n}: {_median_abs(part):.2f}%"


def test_each_runs_held_out_families():
    line = _line(_table(SECOND), "held-out by family")
    names = [f.strip().lower() for f in line[0].split(":", 1)[1].split("/")]
    for n, (cell, errors) in enumerate(zip(line[1:], RUN_ERRORS), 1):
        quoted = [float(f) for f in cell.rstrip("%").split(" / ")]
        assert len(quoted) == len(names)
        for name, figure in zip(names, quoted):
            part = _select(errors, split="held-out", family=name)
            assert figure == pytest.approx(_median_abs(part), abs=0.6), f"{name}, run {n}: {_median_abs(part):.2f}%"
    held = {vh.family(r["model"]) for r in read_rows("host_time_rows.csv") if r["split"] == "held-out"}
    assert set(names) == held


def test_each_runs_lent_h100_rows():
    line = _line(_table(SECOND), "lent H100, eager")
    names = [f.strip() for f in line[0].split(":", 1)[1].split("/")]
    assert names == list(H100_MODELS)
    for n, (cell, errors) in enumerate(zip(line[1:], RUN_ERRORS), 1):
        quoted = [_pct(f.strip()) for f in cell.rstrip("%").split(" / ")]
        for name, figure in zip(names, quoted):
            error = errors[f"own-h100-{H100_MODELS[name]}-hf-eager"]
            assert figure == pytest.approx(error, abs=0.6), f"{name}, run {n}: {error:+.1f}%"


# --- single figures ---------------------------------------------------------------------------------
def _text() -> str:
    return " ".join(doc_section(DOC, SECTION).split())


def test_the_bare_hf_decode_step_on_the_lent_h100():
    (row,) = [r for r in read_rows("host_time_rows.csv") if r["id"] == "own-h100-llama-3.2-1b-hf-eager"]
    assert row["source_url"].startswith("scripts/data/h100_lent/")
    assert (f"The bare HF decode step of this model measured {1e3 * float(row['value']):.1f} ms on the lent H100"
            in _text())


def test_the_hosts_measured_loop_times():
    every = hosts()
    quoted = dict(re.findall(r"`(lent-[\w-]+)`: ([\d.]+) ns", _text()))
    assert set(quoted) == {"lent-h200-vm", "lent-h100"}
    for name, figure in quoted.items():
        assert float(figure) == every[name].measured_loop_ns, name


# --- the GPU calibration worked example (issue #14's H100 figures, tests/test_calibrate_gpu.py) --------
def test_the_calibration_worked_example(tmp_path):
    """The fit's peak, each shape's error under the written profile and their mean, and the profile
    it replaced (largest throughput as the peak, GEMV / copy as the efficiency) on the same sweep."""
    import dataclasses

    from dispatchprof import load_device
    from dispatchprof.sim.calibrate_gpu import fit_calibration, write_gpu_profile
    from dispatchprof.sim.gemm_fit import predicted_s
    from tests.test_calibrate_gpu import H100, N

    text = " ".join(doc_section(DOC, "Writing a device profile").split())
    fit = fit_calibration(H100)
    errors = {m: 100 * (p / t - 1) for m, t, p in fit.points}
    assert (f"a peak of {fit.matrix_tflops:.1f} TFLOP/s" in text), fit.matrix_tflops
    assert (f"The profile gives the GEMV {errors[1]:+.1f}%, M = 64 {errors[64]:+.1f}%" in text), errors
    assert f"M = 256 {errors[256]:+.1f}% and M = 8192 exactly" in text and abs(errors[8192]) < 1e-9, errors
    assert f"mean |error| {100 * fit.mean_error:.1f}%" in text, fit.mean_error
    t64, p64 = [(t, p) for m, t, p in fit.points if m == 64][0]
    assert f"= {1e6 * p64:.1f} us against {1e6 * t64:.1f} measured" in text, (p64, t64)
    d = load_device(write_gpu_profile(tmp_path / "gpu.yaml", H100, fit))
    old = dataclasses.replace(d, matrix_tflops={"fp16": 780.0}, matrix_memory_efficiency=0.7)
    old_errors = {m: 100 * (predicted_s(old, m, N) / t - 1) for m, t, _ in fit.points}
    mean_old = statistics.mean(map(abs, old_errors.values()))
    assert f"is {mean_old:.1f}% off on the same sweep, {old_errors[64]:+.1f}% at M = 64" in text, old_errors
