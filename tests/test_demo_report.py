"""The demo's report as a new user reads it: 100 columns, every group labelled, decode's tables,
and a loud UNKNOWN where a profile could not source a figure (never a silent zero)."""

import pytest

from conftest import run_cli as run
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.unknowns import unknown_figures

SMALL = ["llama-3.2-1b", "--batch", "2", "--prompt-len", "16", "--new-tokens", "4"]

def test_report_fits_100_columns_and_shows_decode_tables(capsys):
    code, out, _ = run(capsys, *SMALL, "--device", "PIM-AI-1chip", "--device", "H100-SXM")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "Last decode step (token 4 of 4) by module on PIM-AI-1chip (weights bf16, KV cache bf16, runtime" in out
    assert "Last decode step (token 4 of 4) by operator on PIM-AI-1chip (weights bf16" in out
    speed = out.split("TPOT first .. last")[1].splitlines()
    pim = next(line for line in speed if line.startswith("PIM-AI-1chip"))
    last_tpot = " ".join(pim.split()[5:7])                    # TTFT 2 cells, mean 2 cells, first 2, "..", last
    tree = out.split("Last decode step (token 4 of 4) by module")[1].splitlines()
    root = next(line for line in tree if line.startswith("(root)"))
    assert last_tpot in root                                   # the step's tree sums to the last TPOT


def test_pim_static_energy_is_unknown_not_zero(capsys):
    code, out, _ = run(capsys, *SMALL, "--device", "PIM-AI-1chip", "--device", "H100-SXM", "--top", "0")
    energy = out.split("static/token")[1].splitlines()
    pim = next(line for line in energy if line.startswith("PIM-AI-1chip")).split()
    h100 = next(line for line in energy if line.startswith("H100-SXM")).split()
    assert pim[3] == "UNKNOWN" and h100[3] != "UNKNOWN"       # name, energy/token (2 cells), static/token
    assert "PIM-AI-1chip: UNKNOWN (not published by its sources): memory capacity, static power" in out


@pytest.mark.parametrize("name", ["PIM-AI-1chip", "PIM-AI-24dimm", "CXL-PIM-BC", "SAM-LPDDR5PIM"])
def test_every_pim_profile_marks_its_unsourced_figures(name):
    device = load_device(name)
    assert device.static_power_w == 0 and device.launch_overhead_us == 0
    assert unknown_figures(device) == ("memory_capacity_gb", "static_power_w", "launch_overhead_us",
                                       "host_overhead_us")


def test_the_unknown_note_says_capacity_unchecked_only_when_capacity_is_unknown():
    import dataclasses

    from dispatchprof.sim.unknowns import unknown_note

    pim = load_device("PIM-AI-1chip")
    assert unknown_note(pim).endswith("simulated as 0 (capacity not checked), so time and energy leave them out")
    known = dataclasses.replace(pim, sources={**pim.sources, "memory_capacity_gb": "datasheet: 16 GB"})
    note = unknown_note(known)
    assert "memory capacity" not in note and "capacity not checked" not in note
    assert note.endswith("static power, launch overhead, host cost per op; simulated as 0, so time and energy "
                         "leave them out")


@pytest.mark.parametrize("name", ["H100-SXM", "L4", "MI300X"])
def test_gpu_profiles_have_no_unknown_figures(name):
    assert unknown_figures(load_device(name)) == ()


def test_placement_shows_total_weights_and_each_share(capsys):
    import re
    _, one, _ = run(capsys, *SMALL, "--device", "PIM-AI-4chip", "--top", "0", "--depth", "0")
    _, out, _ = run(capsys, *SMALL, "--place", "*.self_attn*=PIM-AI-1chip", "--place", "*=PIM-AI-4chip",
                    "--top", "0", "--depth", "0")
    text = " ".join(out.split())
    assert "weights 2.47 GB;" in " ".join(one.split())
    m = re.search(r"weights 2\.47 GB in all \(placement: PIM-AI-1chip ([\d.]+) MB, PIM-AI-4chip ([\d.]+) GB\)", text)
    assert m is not None
    # 16 layers x (q, o: 2048 x 2048; k, v: 512 x 2048) x 2 bytes = 335,544,320 B on the attention device
    assert m.group(1) == "335.54"
    assert float(m.group(1)) * 1e6 + float(m.group(2)) * 1e9 == pytest.approx(2.47e9, abs=0.01e9)


def test_devices_table_shows_unknown_figures(capsys):
    code, out, _ = run(capsys, "devices")
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isalnum()}
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    assert rows["PIM-AI-1chip"][2] == "UNKNOWN" and rows["PIM-AI-1chip"][-1] == "UNKNOWN"
    assert rows["H100-SXM"][2:4] == ["80", "GB"] and rows["H100-SXM"][-1] == "350"   # nvidia.yaml: half of 700 W
