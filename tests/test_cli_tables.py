"""``dispatchprof report FILE --format csv|parquet``: a saved count's rows as a file (raw units)."""

import csv
import sys

import pytest
import torch

from dispatchprof import OpCounter
from dispatchprof.cli import main


@pytest.fixture
def saved(tmp_path):
    model, x = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), torch.randn(2, 8)
    with OpCounter(model) as c:
        model(x)
    return c.profile.save(tmp_path / "p.json")


def test_report_writes_operator_rows_as_csv(saved, tmp_path, capsys):
    out = tmp_path / "ops.csv"
    assert main(["report", saved, "--format", "csv", "--device", "L4", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    rows = {r["op"]: r for r in csv.DictReader(open(out))}
    assert set(rows) == {"aten.addmm", "aten.relu"}
    # addmm [2,8]@[8,4] + bias: MULT 2*4*8 = 64, ADD 2*4*7 + 2*4 = 64, MACs 64
    assert (rows["aten.addmm"]["mult"], rows["aten.addmm"]["add"], rows["aten.addmm"]["macs"]) == ("64", "64", "64")
    assert rows["aten.relu"]["cmp"] == "8" and rows["aten.relu"]["scenario"] == "L4"
    assert float(rows["aten.addmm"]["time_s"]) > 0


def test_report_writes_module_rows_as_parquet_beside_the_file(saved):
    import pandas as pd                  # a test extra (dispatchprof[pandas]): installed by make test
    assert main(["report", saved, "--format", "parquet", "--by", "module"]) == 0
    frame = pd.read_parquet(saved + ".parquet")
    assert list(frame["module"]) == ["", "0", "1"] and list(frame["params"]) == [36, 36, 0]   # 8*4 + 4


def test_a_missing_parquet_engine_is_one_line_and_no_file(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    out = tmp_path / "x.parquet"
    assert main(["report", saved, "--format", "parquet", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pyarrow" in err and not out.exists()
