"""A sweep never shows a silent zero for energy a profile cannot source: JSON null, CSV empty cells,
the table UNKNOWN (or the dynamic part + static UNKNOWN), no Pareto mark, not drawn
(dispatchprof.results.sweep, dispatchprof.report.sweep, scripts/docs_tables.py)."""

from __future__ import annotations

import csv
import io
import json
from concurrent.futures import ThreadPoolExecutor

import docs_tables
import pytest

from dispatchprof.cli import main
from dispatchprof.llm.sweep import sweep
from dispatchprof.report.sweep import energy_per_token_cell, mark_known_energy, mark_pareto, sweep_csv
from dispatchprof.results.sweep import COLUMNS, SweepRow, sweep_to_dict
from dispatchprof.sim.catalog import load_device
from tests.test_cli_inputs import TINY


def row(device: str, batch: int, j_per_token: float, tpot: float, **kw) -> SweepRow:
    return SweepRow("m", device, "decoder", "bf16", batch, 8, 2, 1.0, j_per_token * 2 * batch, 2.0 * batch,
                    j_per_token, 0.1, tpot, 10, None, None, **kw)


def devices(*names: str) -> dict:
    return {n: (load_device(n),) for n in names}


def test_flags_follow_each_profiles_sources():
    rows = mark_known_energy([row("H100-SXM", 1, 2.0, 0.01), row("PIM-AI-4chip", 1, 0.025, 0.007),
                              row("UPMEM-2556", 1, 0.0, 0.5), row("not-given", 1, 1.0, 0.1)],
                             devices("H100-SXM", "PIM-AI-4chip", "UPMEM-2556"))
    flags = [(r.dynamic_energy_known, r.static_energy_known, r.energy_known) for r in rows]
    # H100: every figure sourced; PIM-AI: no static power; UPMEM: no per-op or per-bit energy (nor static);
    # a scenario the mapping does not name keeps its defaults
    assert flags == [(True, True, True), (True, False, False), (False, False, False), (True, True, True)]
    # the known part is kept only where the static power alone is missing: PIM-AI's 25 mJ is all dynamic
    assert [r.dynamic_energy_per_token_j for r in rows] == [None, 0.025, None, None]


def test_json_writes_null_where_the_total_is_unknown():
    known, pim = mark_known_energy([row("H100-SXM", 1, 2.0, 0.01), row("PIM-AI-4chip", 1, 0.025, 0.007)],
                                   devices("H100-SXM", "PIM-AI-4chip"))
    data = json.loads(json.dumps(sweep_to_dict([known, pim])))
    a, b = data["rows"]
    assert (a["energy_j"], a["energy_per_token_j"]) == (4.0, 2.0)              # 2 J/token x 2 tokens
    assert (b["energy_j"], b["energy_per_token_j"]) == (None, None)
    assert (b["static_energy_known"], b["dynamic_energy_per_token_j"]) == (False, 0.025)
    assert list(a) == list(COLUMNS) == data["columns"]


def test_csv_leaves_the_cells_empty():
    rows = mark_known_energy([row("H100-SXM", 1, 2.0, 0.01), row("UPMEM-2556", 1, 0.0, 0.5)],
                             devices("H100-SXM", "UPMEM-2556"))
    h100, upmem = csv.DictReader(io.StringIO(sweep_csv(rows)))
    assert (h100["energy_j"], h100["energy_per_token_j"]) == ("4.0", "2.0")
    assert (upmem["energy_j"], upmem["energy_per_token_j"], upmem["dynamic_energy_per_token_j"]) == ("", "", "")
    assert upmem["time_s"] == "1.0"                                             # the rest of the row stays


def test_table_cell_names_what_is_missing():
    h100, pim, upmem = mark_known_energy(
        [row("H100-SXM", 1, 1.87076, 0.01), row("PIM-AI-4chip", 1, 0.02501, 0.007), row("UPMEM-2556", 1, 0.0, 0.5)],
        devices("H100-SXM", "PIM-AI-4chip", "UPMEM-2556"))
    assert energy_per_token_cell(h100) == "1871"                                # mJ, 4 significant digits
    assert energy_per_token_cell(pim) == "25.01 + static UNKNOWN"
    assert energy_per_token_cell(upmem) == "UNKNOWN"


def test_a_row_of_unknown_energy_is_never_on_the_front():
    rows = mark_known_energy([row("PIM-AI-4chip", 1, 0.03, 0.007), row("PIM-AI-4chip", 8, 0.01, 0.009),
                              row("H100-SXM", 1, 2.0, 0.005)], devices("H100-SXM", "PIM-AI-4chip"))
    # alone in their groups, the H100 row is on its front and the PIM-AI rows (no J/token) on none
    assert [r.pareto for r in mark_pareto(rows)] == [False, False, True]


def test_docs_table_cell_from_the_csv():
    assert docs_tables._mj_per_token({"energy_per_token_j": "1.87076"}) == "1,870.76"
    assert docs_tables._mj_per_token({"energy_per_token_j": "", "dynamic_energy_per_token_j": "0.02501"}) \
        == "25.01 + static UNKNOWN"
    assert docs_tables._mj_per_token({"energy_per_token_j": "", "dynamic_energy_per_token_j": ""}) == "UNKNOWN"


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


def test_sweep_rows_and_the_command_carry_the_rule(tiny, capsys):
    with ThreadPoolExecutor(1) as pool:
        rows = sweep([str(tiny)], ["L4", "PIM-AI-1chip"], [1], [8], [2], executor=pool)
    l4, pim = rows
    assert (l4.energy_known, pim.energy_known, pim.dynamic_energy_known) == (True, False, True)
    assert pim.dynamic_energy_per_token_j == pim.energy_per_token_j > 0     # the simulation's static part is 0
    assert main(["sweep", str(tiny), "--device", "PIM-AI-1chip", "--batch", "1", "--prompt-len", "8",
                 "--new-tokens", "2", "--workers", "0", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert f"{pim.energy_per_token_j * 1e3:.4g} + static UNKNOWN" in out
