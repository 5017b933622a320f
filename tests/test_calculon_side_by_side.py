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
