"""A generation's (and an encoder forward pass's) JSON writes null for energy a profile cannot source, never the simulation's 0, and
reads back to the same in-memory figures (dispatchprof.results.energy_null,
dispatchprof.report.generation_json)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from conftest import run_cli as run
from dispatchprof.results.energy_null import null_unknown, stand_ins


def entry(energy: tuple[float, float], static: tuple[float, float], per_token: float) -> dict:
    """A DeviceGeneration's dict, reduced to the fields the rule reads and writes."""
    return {"name": "d", "energy_per_token_j": per_token, "ttft_s": 0.5,
            "prefill": {"time_s": 0.5, "energy_j": energy[0], "static_j": static[0]},
            "decode": {"time_s": 1.5, "energy_j": energy[1], "static_j": static[1]}}


def test_static_power_unknown_keeps_the_dynamic_part_by_hand():
    e = entry((3.0, 9.0), (0.0, 0.0), 1.5)          # static stand-in 0: the energies are all dynamic
    out = null_unknown(e, dynamic_known=True, static_known=False)
    assert out["prefill"] == {"time_s": 0.5, "energy_j": None, "static_j": None, "dynamic_j": 3.0}
    assert out["decode"] == {"time_s": 1.5, "energy_j": None, "static_j": None, "dynamic_j": 9.0}
    assert (out["energy_per_token_j"], out["dynamic_energy_per_token_j"]) == (None, 1.5)
    assert stand_ins(json.loads(json.dumps(out))) == e                           # read back: the same figures


def test_dynamic_energy_unknown_keeps_the_static_part_by_hand():
    e = entry((2.0, 6.0), (2.0, 6.0), 0.0)          # per-op and per-bit stand-ins 0: only static power counted
    out = null_unknown(e, dynamic_known=False, static_known=True)
    assert out["prefill"] == {"time_s": 0.5, "energy_j": None, "static_j": 2.0, "dynamic_j": None}
    assert (out["energy_per_token_j"], out["dynamic_energy_per_token_j"]) == (None, None)
    assert stand_ins(out)["prefill"] == {"time_s": 0.5, "energy_j": 2.0, "static_j": 2.0}


def test_both_unknown_and_both_known():
    e = entry((0.0, 0.0), (0.0, 0.0), 0.0)
    out = null_unknown(e, dynamic_known=False, static_known=False)
    assert [out[p][k] for p in ("prefill", "decode") for k in ("energy_j", "static_j", "dynamic_j")] == [None] * 6
    assert stand_ins(out) == e
    known = entry((3.0, 9.0), (1.0, 2.0), 1.5)
    assert null_unknown(known, True, True) is known and stand_ins(known) is known


def test_a_malformed_entry_is_left_for_the_files_checks():
    bad = {"energy_per_token_j": None, "prefill": {"energy_j": None, "static_j": "x", "dynamic_j": 1.0}}
    assert stand_ins(bad)["prefill"]["energy_j"] is None                        # not a number: not made one
    assert stand_ins([1, 2]) == [1, 2]


def test_command_json_and_report_round_trip(capsys, tmp_path):
    code, out, _ = run(capsys, "llama-3.2-1b", "--prompt-len", "8", "--new-tokens", "2", "--device", "PIM-AI-1chip",
                       "--device", "UPMEM-640", "--device", "H100-SXM", "--format", "json")
    assert code == 0
    data = json.loads(out)
    pim, upmem, h100 = (data["devices"][n] for n in ("PIM-AI-1chip", "UPMEM-640", "H100-SXM"))
    # PIM-AI: no static power published; UPMEM: no energy figure at all; H100: every figure sourced
    assert (pim["prefill"]["static_j"], pim["prefill"]["energy_j"], pim["energy_per_token_j"]) == (None, None, None)
    assert pim["prefill"]["dynamic_j"] > 0 and pim["dynamic_energy_per_token_j"] > 0
    assert (upmem["decode"]["dynamic_j"], upmem["decode"]["static_j"], upmem["dynamic_energy_per_token_j"]) == \
        (None, None, None)
    assert h100["decode"]["static_j"] > 0 and h100["energy_per_token_j"] > 0 and "dynamic_j" not in h100["decode"]
    saved = tmp_path / "g.json"
    saved.write_text(out)
    code, again, _ = run(capsys, "report", str(saved), "--format", "json")
    assert code == 0 and json.loads(again)["generation"]["devices"] == data["devices"]   # nulls again, same numbers
    code, text, _ = run(capsys, "report", str(saved), "--top", "0")
    pim_line = next(line for line in text.split("static/token")[1].splitlines() if line.startswith("PIM-AI-1chip"))
    assert pim_line.split()[3] == "UNKNOWN"                                      # static/token


def test_encoder_forward_json_and_csv(capsys, tmp_path):
    from tests.test_cli_commands import BERT
    bert = tmp_path / "bert.json"
    bert.write_text(json.dumps(BERT))
    # --host fixed: the L4's eager time (and so its static energy) the same in both runs
    argv = (str(bert), "--prompt-len", "8", "--device", "PIM-AI-1chip", "--device", "UPMEM-640", "--device", "L4",
            "--host", "fixed")
    code, out, _ = run(capsys, *argv, "--format", "json")
    devices = json.loads(out)["devices"]
    pim, upmem, l4 = (devices[n] for n in ("PIM-AI-1chip", "UPMEM-640", "L4"))
    assert code == 0 and (pim["energy_j"], pim["energy_per_token_j"]) == (None, None)
    # PIM-AI: the dynamic part kept beside the null total, per token = energy / 8 tokens processed
    assert pim["dynamic_energy_per_token_j"] == pytest.approx(pim["dynamic_energy_j"] / 8) and pim["dynamic_energy_j"] > 0
    assert (upmem["energy_j"], "dynamic_energy_j" in upmem) == (None, False)           # nothing known
    assert l4["energy_j"] > 0 and "dynamic_energy_j" not in l4
    code, out, _ = run(capsys, *argv, "--format", "csv")
    rows = {r["device"]: r for r in csv.DictReader(io.StringIO(out))}
    assert (rows["PIM-AI-1chip"]["energy_j"], rows["UPMEM-640"]["energy_per_token_j"]) == ("", "")
    assert float(rows["L4"]["energy_j"]) == pytest.approx(l4["energy_j"])
