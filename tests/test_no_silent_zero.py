"""No silent zero: every report that shows energy shows UNKNOWN (text) or NaN / an empty cell
(numbers) where the device's profile cannot source the figure (dispatchprof.sim.energy_known).
UPMEM publishes no energy per operation or per bit (dynamic part unknown); PIM-AI no static power
(static part unknown); H100-SXM sources both."""

import csv
import io
import math

import pytest
import torch

from conftest import run_cli as run
from dispatchprof import OpCounter
from dispatchprof.report.tables import module_tree, summary
from dispatchprof.report.trace import trace_events
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.energy_known import KnownEnergy, known_energy, or_nan, total_text

DEVICES = ["UPMEM-640", "PIM-AI-1chip", "H100-SXM"]


@pytest.fixture(scope="module")
def counted():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    with torch.no_grad(), OpCounter(model, devices=DEVICES) as c:
        model(torch.ones(8, 64))
    return c


def test_the_rule_by_hand():
    upmem, pim_ai, h100 = (load_device(n) for n in DEVICES)
    assert known_energy([upmem]) == KnownEnergy(dynamic=False, static=False)
    assert known_energy([pim_ai]) == KnownEnergy(dynamic=True, static=False)
    assert known_energy([h100]) == KnownEnergy(dynamic=True, static=True)
    assert known_energy([h100, pim_ai]) == KnownEnergy(dynamic=True, static=False)    # a placement: any unknown
    assert total_text(2.5, 1.0, known_energy([h100])) == "2.50 J"
    assert total_text(2.5, 1.0, known_energy([pim_ai])) == "1.00 J + static UNKNOWN"
    assert total_text(2.5, 1.0, known_energy([upmem])) == "UNKNOWN"
    assert math.isnan(or_nan(0.0, False)) and or_nan(0.0, True) == 0.0


def test_counter_text(counted):
    lines = {line.split(":")[0].strip(): line for line in str(counted).splitlines()[1:]}
    assert lines["UPMEM-640"].endswith(", UNKNOWN, UNKNOWN")
    sim = counted.simulated("PIM-AI-1chip")
    dynamic_w = sim.total.dynamic_j / sim.total.time_s
    assert f"{sim.total.dynamic_j * 1e9:.2f} nJ + static UNKNOWN" in lines["PIM-AI-1chip"]
    assert f"{dynamic_w * 1e3:.2f} mW + static UNKNOWN" in lines["PIM-AI-1chip"]
    assert "UNKNOWN" not in lines["H100-SXM"]


def test_summary_and_module_tree(counted):
    sims = counted.simulations()
    rows = {line.split()[0]: line for line in summary(counted.profile, sims).splitlines() if line.startswith(tuple(DEVICES))}
    assert rows["UPMEM-640"].split()[3:5] == ["UNKNOWN", "UNKNOWN"]
    assert rows["PIM-AI-1chip"].count("+ static UNKNOWN") == 2
    assert "UNKNOWN" not in rows["H100-SXM"]
    for name, want in (("UPMEM-640", "UNKNOWN"), ("PIM-AI-1chip", "+ static UNKNOWN")):
        tree = module_tree(counted.profile, counted.simulated(name), columns=["time", "energy"])
        body = tree.splitlines()[2:]
        assert body and all(line.rstrip().endswith(want) for line in body)
    tree = module_tree(counted.profile, counted.simulated("H100-SXM"), columns=["energy"])
    assert "UNKNOWN" not in tree and "mJ" in tree


def test_simulation_frames_are_nan_where_unknown(counted):
    for by in ("operator", "module", "record"):
        df = counted.to_dataframe(by)
        upmem, pim, h100 = (df[df.scenario == n] for n in DEVICES)
        assert upmem[["energy_j", "dynamic_energy_j", "static_energy_j"]].isna().all().all()
        assert pim["energy_j"].isna().all() and pim["static_energy_j"].isna().all()
        assert pim["dynamic_energy_j"].notna().all() and (pim["dynamic_energy_j"] > 0).all()
        assert h100[["energy_j", "dynamic_energy_j", "static_energy_j"]].notna().all().all()
    records = counted.to_dataframe("record")
    pim_ops = counted.simulated("PIM-AI-1chip").ops
    assert math.isclose(records[records.scenario == "PIM-AI-1chip"]["dynamic_energy_j"].sum(),
                        sum(t.dynamic_j for t in pim_ops), rel_tol=1e-12)


def test_simulation_html(counted):
    html = counted.simulated("UPMEM-640")._repr_html_()
    assert "<td>UNKNOWN</td><td>UNKNOWN</td>" in html and " J</td>" not in html
    assert "+ static UNKNOWN" in counted.simulated("PIM-AI-1chip")._repr_html_()


def test_trace_energy_counters(counted):
    names = {n: {e["name"] for e in trace_events(counted.simulated(n)) if e["ph"] == "C"} for n in DEVICES}
    assert names == {"UPMEM-640": set(), "PIM-AI-1chip": {"dynamic energy (J), static UNKNOWN"},
                     "H100-SXM": {"energy (J)"}}
    last = [e for e in trace_events(counted.simulated("PIM-AI-1chip")) if e["ph"] == "C"][-1]
    assert math.isclose(last["args"]["J"], counted.simulated("PIM-AI-1chip").total.dynamic_j, rel_tol=1e-12)


def test_generation_csv_leaves_unknown_cells_empty(capsys):
    code, out, _ = run(capsys, "llama-3.2-1b", "--prompt-len", "8", "--new-tokens", "2", "--format", "csv",
                       *(a for d in DEVICES for a in ("--device", d)))
    assert code == 0
    rows = {r["device"]: r for r in csv.DictReader(io.StringIO(out))}
    assert [rows["UPMEM-640"][k] for k in ("energy_per_token_j", "static_j", "dynamic_j")] == ["", "", ""]
    assert rows["PIM-AI-1chip"]["energy_per_token_j"] == rows["PIM-AI-1chip"]["static_j"] == ""
    assert float(rows["PIM-AI-1chip"]["dynamic_j"]) > 0
    h100 = rows["H100-SXM"]
    tokens = 1 * 2
    assert math.isclose(float(h100["energy_per_token_j"]), (float(h100["static_j"]) + float(h100["dynamic_j"])) / tokens,
                        rel_tol=1e-9)


def test_devices_table(capsys):
    code, out, _ = run(capsys, "devices")
    assert code == 0
    upmem = next(line for line in out.splitlines() if line.startswith("UPMEM-640")).split()
    assert upmem[-3:] == ["UNKNOWN", "UNKNOWN", "UNKNOWN"]          # pJ/FLOP, pJ/bit, static W
    pim = next(line for line in out.splitlines() if line.startswith("PIM-AI-1chip ")).split()
    assert pim[-3:] == ["0.4", "0.95", "UNKNOWN"]


def test_a_placement_with_an_unknown_figure_leaves_its_cells_empty(capsys):
    code, out, _ = run(capsys, "llama-3.2-1b", "--prompt-len", "8", "--new-tokens", "2", "--format", "csv",
                       "--place", "*.self_attn*=PIM-AI-1chip", "--place", "*=H100-SXM")
    assert code == 0
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert row["energy_per_token_j"] == row["static_j"] == ""          # PIM-AI's static power is not published
    assert float(row["dynamic_j"]) > 0
