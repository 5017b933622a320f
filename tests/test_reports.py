"""Console tables (golden strings on a small model) and queries (DeepSpeed-style entry points:
tests/test_flops_profiler.py)."""

import os
from pathlib import Path

import pytest
import torch
from torch import nn

from dispatchprof import OpCounter, report

GOLDEN = Path(__file__).parent / "golden"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 4)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x).softmax(-1)


@pytest.fixture(scope="module")
def counted():
    torch.manual_seed(0)
    model, x = Tiny(), torch.randn(2, 3)
    with torch.no_grad(), OpCounter(devices=["PIM-AI-1chip", "H100-SXM"], host_time=False) as c:   # goldens: fixed host figure
        model(x)
    return c


def golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME.txt; DISPATCHPROF_WRITE_GOLDEN=1 rewrites the files."""
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("DISPATCHPROF_WRITE_GOLDEN") == "1":
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()


def test_hand_checked_numbers_behind_the_tables(counted):
    t = counted.total()
    # embed 2x3 @ 3x4: 24 MULT, 16+8 ADD; 3 blocks of 2x4 @ 4x4: 32 MULT, 24+8 ADD each, 8 CMP (relu);
    # head 2x4 @ 4x2: 16 MULT, 12+4 ADD; softmax over 2, 2 rows: 2 CMP, 6 ADD, 4 EXP, 4 DIV
    assert (t.mult, t.add, t.cmp, t.exp, t.div, t.macs) == (24 + 96 + 16, 24 + 96 + 16 + 6, 24 + 2, 4, 4, 136)


def test_summary_golden(counted):
    golden("summary", report.summary(counted.profile, counted.simulations()))


def test_module_tree_golden_folds_repeated_blocks(counted):
    text = report.module_tree(counted.profile, counted.simulated("PIM-AI-1chip"))
    assert "blocks.0-2 (3x)" in text
    golden("module_tree", text)


def test_module_tree_depth_columns_and_no_fold(counted):
    golden("module_tree_depth1_grid", report.module_tree(
        counted.profile, depth=1, columns=("calls", "mult", "cmp", "%macs"), fmt="grid"))
    unfolded = report.module_tree(counted.profile, fold=False, columns=("flops",), fmt="github")
    assert "blocks.1" in unfolded and "(3x)" not in unfolded
    golden("module_tree_unfolded_markdown", unfolded)


def test_operator_table_golden(counted):
    golden("operators", report.operator_table(counted.profile, counted.simulated("H100-SXM"), sort_by="time"))
    golden("operators_by_shape", report.operator_table(counted.profile, group_by_input_shape=True, row_limit=3,
                                                       fmt="markdown"))


def test_top_modules_and_module_types_golden(counted):
    golden("top_modules", report.top_modules(counted.profile, k=2, metrics=("params", "macs", "flops")))
    golden("module_types", report.module_types(counted.profile))


def test_legend_fits_100_columns_and_names_the_units():
    lines = report.LEGEND.splitlines()
    assert max(map(len, lines)) <= 100 and "FLOPs = ADD + MULT" in report.LEGEND
    assert [line.split(":")[0] for line in lines if not line.startswith("  ")] == [
        "Counts are exact element operations of each aten op's reference algorithm; FLOPs = ADD + MULT; MACs",
        "Bytes", "Units"]


def test_print_counter_gives_a_short_summary(counted):
    golden("str", str(counted))


@pytest.mark.parametrize("call, message", [
    (lambda p: report.module_tree(p, fmt="excel"), r"unknown table format 'excel'; allowed: markdown, .*github"),
    (lambda p: report.module_tree(p, columns=("flops", "watts")), r"unknown column 'watts'; allowed: type, calls"),
    (lambda p: report.module_tree(p, depth=-2), r"depth must be -1 \(all\) or a depth >= 0, got -2"),
    (lambda p: report.operator_table(p, sort_by="speed"), r"unknown sort_by 'speed'; allowed: flops"),
    (lambda p: report.operator_table(p, sort_by="time"), r"sort_by='time' needs a simulation"),
    (lambda p: report.top_modules(p, metrics=("weight",)), r"unknown metric 'weight'; allowed: params"),
])
def test_report_errors(counted, call, message):
    with pytest.raises(ValueError, match=message):
        call(counted.profile)


def test_queries(counted):
    assert counted.get("mult") == counted.total().mult
    assert counted.get("mult", "blocks.*") == 96                 # three 2x4 @ 4x4 matmuls
    assert counted.get("cmp", "ReLU") == 24 and counted.get("params", "Block") == 3 * 20
    assert counted.get("macs", "blocks.0.fc") == 32
    assert counted.get("params", "*") == 16 + 60 + 10            # outermost matches only: no double count
    with pytest.raises(ValueError, match=r"unknown metric 'flop'; allowed: add, mult"):
        counted.get("flop")
    with pytest.raises(ValueError, match=r"scope 'attn' matches no module; give a name glob"):
        counted.get("mult", "attn")


def test_query_keywords_on_llama():
    import zoo

    model, inputs, _ = zoo.build("llama", "fake")
    with torch.no_grad(), OpCounter() as c:
        model(**inputs)
    rows = c.by_module()
    attn = sum(rows[f"model.layers.{i}.self_attn"].inclusive.mult for i in range(2))
    mlp = sum(rows[f"model.layers.{i}.mlp"].inclusive.flops for i in range(2))
    assert c.get("mult", "attn") == attn and c.get("flops", "mlp") == mlp
    assert c.get("macs", "transformer") == sum(rows[f"model.layers.{i}"].inclusive.macs for i in range(2))
