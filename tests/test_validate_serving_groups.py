"""scripts/validate_serving.py counts each architecture once: the rows of one counted model
(`ServingRow.setup_key`) form a group, and the groups of one architecture (DeepSeek-R1 and -V3 share
a config) share one CountMemo, whatever their device, tp, dtypes or layout; each row's prediction is
kept as it comes."""

import dataclasses
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import validate_serving  # noqa: E402
from serving_rows import ServingRow  # noqa: E402


def _row(n: int, model: str, device: str, tp: int, ep: int = 1) -> ServingRow:
    return ServingRow(f"row{n}", "test", "fit", model, device, tp, "vllm", "0.14", "fp8", None, 1024, 1024, 4, 4, 36,
                      {"ttft_mean": 0.1, "tpot_mean": 0.01}, {}, ep=ep)


def test_deepseek_r1_and_v3_are_one_architecture():
    r1, v3 = validate_serving.architecture("deepseek-r1"), validate_serving.architecture("deepseek-v3")
    assert r1 == v3 and r1 != validate_serving.architecture("kimi-k2.5")


@pytest.fixture
def counting(monkeypatch):
    """No model built and nothing counted: the models CountMemo was built for, and (row, memo) of
    every counted_setup call, which returns the row's setup key."""
    built, seen = [], []

    class Memo:
        def __init__(self, model):
            built.append(model)

    def setup(r, folder, memo):
        seen.append((r, memo))
        return r.setup_key

    monkeypatch.setattr(validate_serving, "CountMemo", Memo)
    monkeypatch.setattr(validate_serving, "build_model", lambda name, generator: name)
    monkeypatch.setattr(validate_serving, "counted_setup", setup)
    return built, seen


def test_groups_of_one_architecture_share_one_memo(monkeypatch, counting):
    built, counted = counting
    monkeypatch.setattr(validate_serving, "predict_row", lambda r, key: {"tpot_mean": 0.01, "setup": key})
    rows = [_row(1, "deepseek-r1", "B200", 8), _row(2, "deepseek-v3", "H200", 8), _row(3, "deepseek-v3", "H200", 8),
            _row(4, "deepseek-r1", "B200", 4, ep=4), _row(5, "gpt-oss-120b", "B200", 1)]
    cache = {"row5": {"tpot_mean": 0.02}}                 # predicted before: not simulated again
    out = validate_serving.predict_all(rows, cache, None, 1)
    seen = [(r.id, memo) for r, memo in counted]
    assert sorted(first for first, _ in seen) == ["row1", "row2", "row4"]     # one setup per group: row2 serves row3
    assert len({id(memo) for _, memo in seen}) == 1 and built == ["deepseek-v3"]   # the largest group's model
    assert out["row5"] == {"tpot_mean": 0.02}
    assert out["row3"] == {"tpot_mean": 0.01, "setup": ("deepseek-v3", "H200", 8, "fp8", None)}
    assert out["row4"]["setup"] == ("deepseek-r1", "B200", 4, "fp8", None, "ep4")


def test_disaggregated_rows_are_kept_one_at_a_time(monkeypatch, counting):
    """A group of disaggregated rows yields each row's prediction as it comes (a row of thousands
    of clients takes minutes: a stopped run keeps the rows it did), each side counted once for the
    group with the architecture's one memo."""
    from serving_rows import Disaggregated, Side

    built, calls = counting
    monkeypatch.setattr(validate_serving, "predict_disagg_row", lambda r, p, d: {"tpot_mean": 0.01, "sides": (p, d)})
    layout = Disaggregated(Side(2, 1, 1, {}), Side(1, 4, 64, {}), "ib-ndr")
    rows = [dataclasses.replace(_row(n, "qwen3-32b", "B200", 1), disagg=layout, concurrency=c)
            for n, c in ((1, 8), (2, 16), (3, 32))]
    yielded = list(validate_serving._groups_of_architecture(([rows], None)))
    counted = [(r.setup_key, memo) for r, memo in calls]
    assert [(list(out), label) for out, label, _, _ in yielded] == [(["row1"], "row1"), (["row2"], "row2"),
                                                                    (["row3"], "row3")]
    assert [key for key, _ in counted] == [rows[0].side_rows()[0].setup_key, rows[0].side_rows()[1].setup_key]
    assert len({id(memo) for _, memo in counted}) == 1 and built == ["qwen3-32b"]
    assert yielded[2][0]["row3"]["sides"] == tuple(s.setup_key for s in rows[0].side_rows())
