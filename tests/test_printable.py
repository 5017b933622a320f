"""Text read from a file is printed with control characters escaped (dispatchprof.report.render):
scope, op and model names of a saved result cannot drive the terminal."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from dispatchprof import OpCounter
from dispatchprof.cli import main
from dispatchprof.report.render import printable, render

ESCAPE = "\x1b]0;pwned\x07\x1b[2J"


@pytest.mark.parametrize("text, shown", [
    ("layers.0.mlp", "layers.0.mlp"),
    ("a\x1b[31mred", "a\\x1b[31mred"),
    ("cr\rtab\tnl\n", "cr\\rtab\\tnl\\n"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("caf\u00e9 \u4e2d", "caf\u00e9 \u4e2d"),            # printable non-ASCII stays as it is
])
def test_printable_escapes_control_characters_only(text, shown):
    assert printable(text) == shown


def test_every_table_cell_is_printable():
    assert render([["x\x1b[2J", 3]], ["name", "n"], "github").splitlines()[2] == "| x\\x1b[2J | 3   |"


def test_report_of_a_saved_result_shows_hostile_names_escaped(capsys, tmp_path):
    with OpCounter() as c:
        nn.Sequential(nn.Linear(2, 2))(torch.ones(1, 2))
    data = json.loads(open(c.profile.save(tmp_path / "p.json")).read())
    for s in data["scopes"]:
        s[0] = s[0] and s[0] + ESCAPE
        s[2] = s[2] and s[2] + ESCAPE
    for r in data["records"]:
        r[0] += ESCAPE
        r[1] = r[1] and r[1] + ESCAPE
    (tmp_path / "p.json").write_text(json.dumps(data))
    assert main(["report", str(tmp_path / "p.json"), "--depth", "-1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out
