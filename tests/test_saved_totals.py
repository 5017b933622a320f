"""Totals a saved result states must be the sums of its records (dispatchprof.results.validate):
a disagreement is refused naming the field and both values, never silently recomputed."""

from __future__ import annotations

import json
import re

import pytest

from dispatchprof.cli import main
from dispatchprof.results.generation import generation_from_dict
from tests.test_cli_inputs import TINY

BERT = {"model_type": "bert", "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 128, "max_position_embeddings": 64}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A generation (decoder) and a forward (encoder) result, as `dispatchprof MODEL --json -o` writes them."""
    folder = tmp_path_factory.mktemp("saved")
    files = {}
    for kind, config in (("generation", TINY), ("forward", BERT)):
        (folder / f"{kind}-config.json").write_text(json.dumps(config))
        files[kind] = folder / f"{kind}.json"
        assert main([str(folder / f"{kind}-config.json"), "--prompt-len", "4", "--new-tokens", "3", "--device", "L4",
                     "--json",
                     "-o", str(files[kind])]) == 0
    return {kind: json.loads(path.read_text()) for kind, path in files.items()}


def _sum(rows, field):
    return sum(row[field] for row in rows)


def test_the_saved_totals_are_the_sums_of_their_records_as_written(saved):
    """The invariant the check enforces holds for what dispatchprof writes (computed here independently)."""
    g = saved["generation"]
    records = g["prefill_profile"]["records"]
    fields = g["prefill_profile"]["cost_fields"]
    for i, name in enumerate(fields):
        assert g["prefill_totals"][name] == sum(r[4][i] for r in records)
        assert g["decode_totals"][name] == _sum(g["decode_by_scope"].values(), name)
    assert g["prefill_totals"]["calls"] == len(records)
    f = saved["forward"]
    assert f["totals"]["macs"] == sum(r[4][fields.index("macs")] for r in f["profile"]["records"]) > 0
    generation_from_dict(g, "g.json")                      # and it is read back


@pytest.mark.parametrize("kind, edit, message", [
    ("generation", lambda d: d["prefill_totals"].__setitem__("macs", d["prefill_totals"]["macs"] + 1),
     r"field prefill_totals.macs = (\d+) but the prefill records sum to (\d+)"),
    ("generation", lambda d: d["prefill_totals"].__setitem__("calls", 0),
     r"field prefill_totals.calls = 0 but the prefill records sum to (\d+)"),
    ("generation", lambda d: d["decode_totals"].__setitem__("bytes_read", d["decode_totals"]["bytes_read"] * 2),
     r"field decode_totals.bytes_read = (\d+) but the decode_by_scope rows sum to (\d+)"),
    ("generation", lambda d: d["decode_by_scope"].popitem(),
     r"field decode_totals.add = (\d+) but the decode_by_scope rows sum to (\d+)"),
    ("forward", lambda d: d["totals"].__setitem__("mult", 0),
     r"field totals.mult = 0 but the profile's records sum to (\d+)"),
    ("forward", lambda d: d["totals"].__setitem__("mult", "x"), r"field totals.mult must be a number, got 'x'"),
])
def test_report_refuses_totals_that_disagree_with_their_records(capsys, tmp_path, saved, kind, edit, message):
    data = json.loads(json.dumps(saved[kind]))
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["report", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    found = re.match(rf"dispatchprof: error: {path}: {message}", err)
    assert found, err
    assert len(set(found.groups())) == len(found.groups())     # the two values shown differ


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.__setitem__("model", {"a": 1}), r"field model must be a string, got \{'a': 1\}"),
    (lambda d: d["devices"]["L4"].__setitem__("name", 7), r"field devices\['L4'\].name must be a string, got 7"),
    (lambda d: d["devices"]["L4"].__setitem__("tp", 0), r"field devices\['L4'\].tp must be a whole number >= 1, got 0"),
])
def test_the_text_fields_of_a_saved_generation_are_checked(capsys, tmp_path, saved, edit, message):
    """Found by the fuzz campaign: a mapping as the model's name was an internal error when printed."""
    data = json.loads(json.dumps(saved["generation"]))
    edit(data)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["report", str(path)]) == 2
    assert re.fullmatch(rf"dispatchprof: error: {path}: {message}\n", capsys.readouterr().err)
