"""A profile without sourced energy figures (UPMEM: no energy per operation or per bit is published)
shows its energy as UNKNOWN in every report, never the 0 J its zeros would give."""

import torch

from conftest import run_cli as run
from dispatchprof import OpCounter
from dispatchprof.report.unknowns import dynamic_energy_known, energy_cell
from dispatchprof.report.tables import summary
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.unknowns import ENERGY_FIELDS, energy_unknown, unknown_figures


def test_upmem_marks_every_energy_figure_unknown_and_gpus_none():
    upmem, h100 = load_device("UPMEM-2556"), load_device("H100-SXM")
    assert set(ENERGY_FIELDS) <= set(unknown_figures(upmem)) and energy_unknown(upmem)
    assert not energy_unknown(h100) and not energy_unknown(load_device("PIM-AI-1chip"))
    assert energy_cell(0.0, [upmem]) == "UNKNOWN"
    assert energy_cell(2.5, [h100]) == "2.50 J"
    assert not dynamic_energy_known([h100, upmem])                 # a placement with one unknown device


def test_generation_report_shows_upmem_energy_as_unknown(capsys):
    code, out, _ = run(capsys, "llama-3.2-1b", "--prompt-len", "8", "--new-tokens", "2", "--device", "UPMEM-640",
                       "--device", "H100-SXM", "--top", "0")
    assert code == 0
    energy = out.split("static/token")[1].splitlines()
    upmem = next(line for line in energy if line.startswith("UPMEM-640")).split()
    h100 = next(line for line in energy if line.startswith("H100-SXM")).split()
    assert upmem[1:4] == ["UNKNOWN", "UNKNOWN", "UNKNOWN"]          # energy/token, static/token, dynamic/token
    assert h100[1] != "UNKNOWN" and h100[2] in ("J", "mJ", "uJ", "kJ")
    assert "energy per operation, memory energy per bit" in out


def test_summary_table_shows_upmem_energy_and_power_as_unknown():
    with OpCounter(devices=["UPMEM-640", "H100-SXM"]) as c:
        torch.ones(64, 64) @ torch.ones(64, 64)
    rows = {line.split()[0]: line.split() for line in summary(c.profile, [c.simulated("UPMEM-640"),
                                                                            c.simulated("H100-SXM")]).splitlines()
            if line.startswith(("UPMEM-640", "H100-SXM"))}
    assert rows["UPMEM-640"][3:5] == ["UNKNOWN", "UNKNOWN"]         # name, time (2 cells), energy, avg power
    assert rows["H100-SXM"][3] != "UNKNOWN"
