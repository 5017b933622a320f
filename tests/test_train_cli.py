"""``dispatchprof train``: the report, JSON, and bad input in one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
import yaml

from tests.test_cli_inputs import TINY, good_device


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def test_table_and_json(capsys, tiny):
    code, out, err = run_cli(capsys, "train", tiny, "--device", "H100-SXM", "--devices", "8", "--fsdp",
                             "--micro-batch", "2", "--seq-len", "64", "--global-batch", "32")
    assert code == 0, err
    for word in ("step time", "tokens/s per GPU", "MFU (6N + 12 L h s)", "dp comm exposed", "optimizer",
                 "activations", "memory: fits"):
        assert word in out
    code, out, err = run_cli(capsys, "train", tiny, "--device", "H100-SXM", "--devices", "8", "--tp", "2",
                             "--pp", "2", "--micro-batch", "1", "--seq-len", "64", "--global-batch", "8", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["schema"] == "dispatchprof.train"
    assert d["layout"]["dp"] == 2 and d["layout"]["grad_accum"] == 4
    assert d["bubble_fraction"] == pytest.approx(1 / 5)                # (pp-1)/(m+pp-1) = 1/5
    assert d["step_s"] == pytest.approx(sum(d["breakdown_s"].values()))
    assert d["tokens_per_s_per_gpu"] == pytest.approx(8 * 64 / d["step_s"] / 8)


@pytest.mark.parametrize("args, message", [
    (["--devices", "8", "--tp", "3"], "tp x pp x cp = 3 x 1 x 1 = 3 does not divide the 8 devices"),
    (["--devices", "8", "--global-batch", "12"],
     "global batch 12 is not divisible by micro-batch x data-parallel size"),
    (["--devices", "4", "--pp", "4", "--global-batch", "4"], "pp x vp = 4 is larger than the model's 2 layers"),
    (["--device", "A100-80GB", "--fp8"], "--fp8 needs a device with fp8"),
    (["--zero", "5"], "argument --zero: invalid choice"),
    (["--scale-out", "0"], "--scale-out must be > 0 GB/s, got 0.0"),
])
def test_bad_input_is_one_line_exit_2(capsys, tiny, args, message):
    argv = ["train", tiny, "--device", "H100-SXM", "--seq-len", "64", *args]
    if args.count("--device") and "--device" in args[:1]:
        argv = ["train", tiny, "--seq-len", "64", *args]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_over_memory_prints_the_result_then_one_line(capsys, tiny, tmp_path):
    small = good_device()
    small["devices"]["tiny-gpu"]["memory_capacity_gb"] = 1e-3          # 1 MB: less than the activations
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small))
    code, out, err = run_cli(capsys, "train", tiny, "--device", str(tmp_path / "small.yaml"), "--seq-len", "64")
    assert code == 2
    assert "step time" in out
    assert len(err.strip().splitlines()) == 1
    # 106,816 parameters (embedding and head 2 x 256 x 64, 2 layers of 36,992, a norm of 64) x 12 bytes of AdamW state
    assert "does not fit:" in err and "1.00 MB on tiny-gpu" in err and "largest: optimizer 1.28 MB" in err


def test_trace_slices_end_at_the_step_time(capsys, tiny, tmp_path):
    trace = tmp_path / "step.json"
    code, out, err = run_cli(capsys, "train", tiny, "--device", "H100-SXM", "--devices", "4", "--pp", "2", "--tp", "2",
                             "--seq-len", "64", "--global-batch", "4", "--json", "--trace", str(trace))
    assert code == 0, err
    step_us = json.loads(out)["step_s"] * 1e6
    slices = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(step_us)
    assert sum(e["dur"] for e in slices) == pytest.approx(step_us)      # the parts laid end to end
    names = {e["name"] for e in slices}
    assert {"warm-up", "forward 0", "backward 3", "cool-down", "optimizer"} <= names     # m = 4 micro-batches


def test_scale_out_sets_the_links_across_nodes(capsys, tiny):
    """pp 2 over 2 nodes of one GPU: the pipeline sends cross nodes at --scale-out; one micro-batch
    sends 2 x 64 x hidden x 2 bytes each way, at 0.8 of the bandwidth, plus 10 us each."""
    sends = {}
    for gb_per_s in ("25", "50"):
        code, out, err = run_cli(capsys, "train", tiny, "--device", "H100-SXM", "--devices", "2", "--nodes", "2",
                                 "--pp", "2", "--micro-batch", "2", "--seq-len", "64", "--global-batch", "2",
                                 "--scale-out", gb_per_s, "--json")
        assert code == 0, err
        sends[gb_per_s] = json.loads(out)["breakdown_s"]["pp p2p"]
    act = 2 * 64 * TINY["hidden_size"] * 2
    for gb_per_s, seconds in sends.items():
        assert seconds == pytest.approx(2 * (act / (float(gb_per_s) * 1e9 * 0.8) + 10e-6))
