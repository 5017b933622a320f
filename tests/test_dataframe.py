"""DataFrames (rows and columns checked against the count by hand), table files, and the HTML
notebook views of OpCounter, Profile, Simulation and GenerationProfile."""

import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from conftest import MICRO_LLAMA, mlp, tiny_model
from dispatchprof import OpCounter
from dispatchprof.report.dataframe import write_table
from dispatchprof.results.records import COUNT_FIELDS, TOTAL_COLUMNS


@pytest.fixture(scope="module")
def trained():
    """One training step of the issue's MLP (batch 4), counted."""
    model = mlp()
    x, y = torch.randn(4, 64), torch.randn(4, 10)
    with OpCounter(model) as c:
        nn.functional.mse_loss(model(x), y).backward()
    return c


@pytest.fixture(scope="module")
def simulated():
    model = mlp()
    with torch.no_grad(), OpCounter(model, devices=["PIM-AI-1chip", "H100-SXM"]) as c:
        model(torch.randn(4, 64))
    return c


def test_operator_rows_by_hand(trained):
    df = trained.to_dataframe("operator", phase="forward")
    assert list(df.columns) == ["op", "state", *TOTAL_COLUMNS]
    addmm = df.set_index("op").loc["aten.addmm"]
    # 4x64 @ 64x256: 65,536 MULT, 4*256*63 + 4*256 (bias) = 65,536 ADD; 4x256 @ 256x10: 10,240 MULT,
    # 4*10*255 + 40 = 10,240 ADD. MACs 65,536 + 10,240 = 75,776.
    assert (addmm["calls"], addmm["mult"], addmm["add"], addmm["macs"], addmm["flops"]) == (2, 75_776, 75_776, 75_776, 151_552)
    # bytes read (float32): x 4*64*4 + W1 64*256*4 + b1 256*4 = 67,584; h 4*256*4 + W2 256*10*4 + b2 10*4 = 14,376
    assert addmm.bytes_read == 67_584 + 14_376
    assert addmm.bytes_written == 4 * 256 * 4 + 4 * 10 * 4
    relu = df.set_index("op").loc["aten.relu"]
    assert (relu.calls, relu.cmp, relu.flops) == (1, 4 * 256, 0)
    assert df["macs"].dtype.kind == "i"              # raw integer counts, not strings


def test_module_and_record_rows_match_the_count(trained):
    mods = trained.to_dataframe("module").set_index("module")
    assert mods.loc["", "inclusive_macs"] == trained.total().macs == 161_792     # forward + backward
    assert mods.loc["0", "type"] == "Linear" and mods.loc["0", "params"] == 64 * 256 + 256
    # the ReLU: 4*256 CMP forward, and 4*256 CMP in its backward (threshold_backward)
    assert mods.loc["1", "self_cmp"] == 2 * 4 * 256 and mods.loc["1", "parent"] == ""
    assert trained.to_dataframe("module", phase="forward").set_index("module").loc["1", "self_cmp"] == 4 * 256
    records = trained.to_dataframe("record")
    assert len(records) == len(trained.profile.records)
    assert list(records.columns) == ["index", "op", "scope", "phase", "dtype", "causal", *COUNT_FIELDS, "flops"]
    for f in COUNT_FIELDS:
        assert records[f].sum() == getattr(trained.total(), f)
    # backward: weight grads of both layers (75,776) + input grad of the second (4*10*256)
    assert records.loc[records.phase == "backward", "macs"].sum() == 75_776 + 10_240
    with pytest.raises(ValueError, match=r"by=\.\.\.\) must be one of \('operator', 'module', 'record'\), got 'op'"):
        trained.to_dataframe("op")


def test_simulation_rows_add_up(simulated):
    sim = simulated.simulated("PIM-AI-1chip")
    total = sim.total
    for by in ("operator", "record"):
        df = sim.to_dataframe(by)
        assert math.isclose(df["time_s"].sum(), total.time_s, rel_tol=1e-12)
        # PIM-AI publishes no static power: the total and static columns are NaN, the dynamic part adds up
        assert df["energy_j"].isna().all() and df["static_energy_j"].isna().all()
        assert math.isclose(df["dynamic_energy_j"].sum(), total.dynamic_j, rel_tol=1e-12)
        assert df["macs"].sum() == 75_776
    h100 = simulated.simulated("H100-SXM")
    df = h100.to_dataframe("record")
    assert math.isclose(df["energy_j"].sum(), h100.total.energy_j - h100.static_power_w * (h100.total.time_s - sum(
        t.time_s for t in h100.ops)), rel_tol=1e-9)      # the ops' own energy: static power drawn for their own time
    assert ((df["energy_j"] - df["dynamic_energy_j"] - df["static_energy_j"]).abs() <= 1e-15).all()
    mods = sim.to_dataframe("module").set_index("module")
    assert math.isclose(mods.loc["", "time_s"], total.time_s, rel_tol=1e-12)
    assert math.isclose(mods.loc["0", "time_s"], sim.by_module()["0"].time_s, rel_tol=1e-12)
    assert mods.loc["2", "macs"] == 4 * 256 * 10
    records = sim.to_dataframe("record")
    assert (records["time_s"] >= records[["t_compute", "t_memory"]].max(axis=1)).all()


def test_counter_with_devices_stacks_its_scenarios(simulated):
    df = simulated.to_dataframe("operator")
    assert list(df.columns[:2]) == ["scenario", "op"]
    assert set(df.scenario) == {"PIM-AI-1chip", "H100-SXM"}
    for name in ("PIM-AI-1chip", "H100-SXM"):
        part, sim = df[df.scenario == name], simulated.simulated(name)
        own = sum(t.time_s for t in sim.ops)         # each op's own time on its device
        assert math.isclose(part["time_s"].sum(), own, rel_tol=1e-12)
        assert sim.total.time_s >= own               # the host/device timeline adds waits for the host
        assert part["macs"].sum() == 75_776


def test_missing_pandas_is_one_line(trained, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)            # import pandas now raises ImportError
    with pytest.raises(ImportError, match=r"^to_dataframe\(\) needs pandas, which is not installed: "
                                          r"pip install 'dispatchprof\[pandas\]'$"):
        trained.to_dataframe()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_write_table_round_trips(trained, tmp_path, fmt):
    df = trained.to_dataframe("module")
    path = write_table(df, tmp_path / f"t.{fmt}", fmt)
    back = pd.read_csv(path, keep_default_na=False) if fmt == "csv" else pd.read_parquet(path)
    assert list(back.columns) == list(df.columns)
    assert back["inclusive_macs"].tolist() == df["inclusive_macs"].tolist()
    assert back["module"].tolist() == df["module"].tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"t.{fmt}"]      # no temporary left


def test_write_table_errors(trained, tmp_path, monkeypatch):
    df = trained.to_dataframe()
    with pytest.raises(ValueError, match=r"table format must be one of \('csv', 'parquet'\), got 'xlsx'"):
        write_table(df, tmp_path / "t.xlsx", "xlsx")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"writing parquet needs pyarrow.*pip install 'dispatchprof\[pandas\]'"):
        write_table(df, tmp_path / "t.parquet", "parquet")


def tables(html: str) -> list[ET.Element]:
    """The <table> elements of ``html`` (it must parse as XML: every cell escaped, every tag closed)."""
    root = ET.fromstring(f"<div>{html}</div>")
    return root.findall("table")


def cells(table: ET.Element) -> list[list[str]]:
    return [[c.text or "" for c in tr] for tr in table.iter("tr")]


def test_html_views_are_tables(simulated, trained):
    t = tables(trained.profile._repr_html_())
    assert len(t) == 2
    head, row = cells(t[0])
    assert head[:3] == ["ops counted", "FLOPs (ADD+MULT)", "MACs"] and row[2] == "161.79 K"
    top = cells(t[1])
    assert top[0] == ["module", "type", "FLOPs", "MACs", "bytes"] and top[1][:2] == ["0", "Linear"]
    t = tables(simulated._repr_html_())
    assert len(t) == 2 + 2 * 2                              # the count, then each scenario's two tables
    assert cells(t[0])[1][2] == "75.78 K"
    assert [x.find("caption").text for x in t[2::2]] == ["simulation PIM-AI-1chip", "simulation H100-SXM"]
    sim_cells = cells(tables(simulated.simulated("H100-SXM")._repr_html_())[0])
    assert sim_cells[1][0] == "H100-SXM" and sim_cells[1][1].endswith("s")
    assert OpCounter()._repr_html_() == "<p>OpCounter (nothing counted yet)</p>"


def test_generation_html():
    from dispatchprof.llm.generation import profile_generation
    model = tiny_model(**MICRO_LLAMA)
    g = profile_generation(model, batch=1, prompt_len=4, new_tokens=3, devices=["PIM-AI-1chip"])
    counts, devices, modules = tables(g._repr_html_())
    rows = cells(counts)
    assert [r[:2] for r in rows[1:]] == [["prefill", "1"], ["decode", "2"]]
    # prefill MACs, 4 tokens: linears 4 * (4*16*16 + 3*16*32) = 10,240; lm_head 4 * 16*64 = 4,096;
    # attention 2 heads * 4*4*8 * 2 products = 512 -> 14,848
    assert g.prefill_totals.macs == 14_848 and rows[1][3] == "14.85 K"
    assert cells(devices)[1][0] == "PIM-AI-1chip"
    assert cells(modules)[0] == ["module", "FLOPs", "MACs", "bytes"] and len(cells(modules)) == 6


def test_html_escapes_names():
    from dispatchprof.results.frame import html_table
    assert html_table(["a<b"], [["x&y"]]) == \
        "<table><thead><tr><th>a&lt;b</th></tr></thead><tbody><tr><td>x&amp;y</td></tr></tbody></table>"


def test_example_notebook_runs_headless():
    """scripts/examples/notebook.ipynb runs top to bottom in a fresh kernel (its cells assert)."""
    import nbclient
    import nbformat
    root = Path(__file__).resolve().parent.parent
    nb = nbformat.read(root / "scripts" / "examples" / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(root)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(tables(html[0])) == 2 + 2 * 2          # the counter: its count, then two scenarios
    assert "<table" in html[1]                        # the DataFrame
    assert "('152.58 K', '75.78 KMACs', '19.21 K')" == outputs[-1]["data"]["text/plain"]


def test_table_file_for_the_cli(simulated, tmp_path):
    from dispatchprof.report.dataframe import table_file
    path = table_file(simulated.profile, simulated.simulations(), tmp_path / "run.parquet", "parquet", by="record")
    back = pd.read_parquet(path)
    assert set(back.scenario) == {"PIM-AI-1chip", "H100-SXM"}
    assert len(back) == 2 * len(simulated.profile.records) and back["macs"].sum() == 2 * 75_776
