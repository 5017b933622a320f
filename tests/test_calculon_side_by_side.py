"""scripts/calculon_side_by_side.py reads Calculon's own validation output, and its rows are the
megatron-lm rows of the training validation."""

import csv

import calculon_side_by_side as cs
import pytest
import validate_training as vt


def test_end_to_end_block_of_the_stored_output():
    got = cs.end_to_end(cs.STORED.read_text())
    assert len(got) == 8
    # 'megatron-22B,|,1.42,1.40,1.72%,48.15,|,1.1,1.14,-3.33%,52.08,': the error is -Delta
    assert got["megatron-22B", "full"] == pytest.approx((1.42, 1.40, -0.0172))
    assert got["megatron-22B", "seqsel"] == pytest.approx((1.10, 1.14, 0.0333))
    # 'megatron-1T,|,94.42,90.08,4.60%,46.27,|,71.49,66.04,7.62%,59.15,'
    assert got["megatron-1T", "seqsel"] == pytest.approx((71.49, 66.04, -0.0762))


def test_output_without_the_block_is_refused():
    with pytest.raises(ValueError, match="no 'End-to-end' block"):
        cs.end_to_end("Activations,|,none\n")


def test_every_calculon_row_is_a_training_row_with_its_published_time():
    calc = cs.end_to_end(cs.STORED.read_text())
    rows = [r for r in csv.DictReader(vt.DATA.open()) if r["source"] == "megatron-lm"]
    assert len(rows) == 8
    for r in rows:
        published = calc[cs.CALCULON_MODEL[r["id"].split("-")[3]], cs.CALCULON_MODE[r["recompute"]]][0]
        # tokens/s/GPU = global batch x 2048 / published seconds / GPUs, to the CSV's two decimals
        tokens = int(r["global_batch"]) * int(r["seq_len"]) / published / int(r["devices"])
        assert float(r["tokens_per_s_per_gpu"]) == pytest.approx(tokens, abs=0.005)


def test_stored_breakdowns_are_the_runs_the_validation_output_reports():
    """scripts/data/calculon/tab5_breakdown_caa4b11.json (Calculon's stats per Table 5 row) gives
    the same totals as its llm-validation output, and its parts add up to them."""
    import json

    import calculon_breakdown as cb
    stats = json.loads(cb.STORED.read_text())
    calc = cs.end_to_end(cs.STORED.read_text())
    assert len(stats) == len(calc) == 8
    for (model, mode), (_, seconds, _) in calc.items():
        s = stats[f"{model}/{mode}"]
        assert round(s["total_time"], 2) == pytest.approx(seconds)
        assert abs(cb.calculon_parts(s)["other"]) < 1e-9 * s["total_time"]


def test_our_parts_gather_our_breakdown():
    import calculon_breakdown as cb
    parts = cb.our_parts({"compute": 1.0, "recompute": 0.5, "tp comm": 0.25, "cp comm": 0.125, "pp p2p": 0.0625,
                          "bubble": 2.0, "dp comm exposed": 4.0, "optimizer": 8.0, "host": 16.0})
    assert parts == {"compute": 1.0, "recompute": 0.5, "tp comm": 0.25, "pp p2p": 0.0625, "bubble": 2.0,
                     "dp comm": 4.0, "optimizer": 8.0, "other": 16.125}
