"""The dispatchprof command's faces: --version, --help, the profile subcommand and its short
form, --json on every command, dtype aliases, encoder models, one new token, the module tree's
indentation, the roofline of every device, file modes under the umask, and sweeps (also on a
Dask cluster)."""

from __future__ import annotations

import json
import os
import stat

import pytest
import torch
import yaml

import dispatchprof
from dispatchprof import report
from dispatchprof.cli import COMMANDS, main
from dispatchprof.results.files import write_atomic
from dispatchprof.results.records import Totals
from dispatchprof.results.tree import INDENT_GUARD, Node, walk
from tests.test_cli_inputs import TINY, good_device

SHORT = ["--prompt-len", "8", "--new-tokens", "3", "--top", "0"]
BERT = {"model_type": "bert", "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "max_position_embeddings": 64}
T5 = {"model_type": "t5", "vocab_size": 128, "d_model": 32, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
      "num_heads": 2, "d_kv": 16}


@pytest.fixture
def files(tmp_path):
    for name, data in (("tiny.json", TINY), ("bert.json", BERT), ("t5.json", T5)):
        (tmp_path / name).write_text(json.dumps(data))
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(good_device()))
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_version_and_help_list_every_subcommand(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"dispatchprof {dispatchprof.__version__}\n"
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("profile", "sweep", "devices", "report", "calibrate", "merge"):
        line = next(line for line in out.splitlines() if line.startswith(f"  {name} "))
        assert line.split(None, 1)[1] == COMMANDS[name]            # one line each, from the one table
    assert "dispatchprof MODEL [options]" in out and "--json" in out


def test_short_form_is_the_profile_subcommand(capsys, files):
    # --host fixed: the default measures the model's Python, which differs between two counts
    _, short, _ = run(capsys, files / "tiny.json", *SHORT, "--device", "L4", "--host", "fixed")
    _, long, _ = run(capsys, "profile", files / "tiny.json", *SHORT, "--device", "L4", "--host", "fixed")
    assert short == long and "TTFT" in short


def test_json_on_every_command(capsys, files, tmp_path):
    code, out, _ = run(capsys, files / "tiny.json", *SHORT, "--device", "L4", "--json")
    gen = json.loads(out)
    assert code == 0 and gen["schema"] == "dispatchprof.generation" and gen["dtype"] == "bf16"
    (tmp_path / "gen.json").write_text(out)
    code, out, _ = run(capsys, "report", tmp_path / "gen.json", "--device", "H100-SXM", "--json")
    rep = json.loads(out)
    assert rep["schema"] == "dispatchprof.report" and rep["kind"] == "dispatchprof.generation"
    assert rep["totals"] == gen["prefill_totals"] and set(rep["simulations"]) == {"H100-SXM"}
    code, out, _ = run(capsys, "devices", "--json")
    devices = json.loads(out)["devices"]
    assert {d["name"] for d in devices} >= {"PIM-AI-1chip", "H100-SXM"} and "memory_bandwidth_gb_per_s" in devices[0]
    with dispatchprof.OpCounter() as c:
        torch.nn.Linear(4, 3)(torch.ones(2, 4))
    for rank in (0, 1):
        c.profile.save(tmp_path / f"dispatchprof_{rank}.json", meta={"process_index": rank})
    code, out, _ = run(capsys, "merge", tmp_path, "--device", "L4", "--json")
    merged = json.loads(out)
    # Linear(4, 3) on 2 rows: 2*3*4 = 24 MACs per rank, 48 over both
    assert merged["schema"] == "dispatchprof.merge" and merged["totals"]["macs"] == 48
    assert [r["rank"] for r in merged["ranks"]] == [0, 1] and merged["slowest_rank_time_s"]["L4"] > 0
    code, out, _ = run(capsys, "calibrate", "-o", tmp_path / "cpu.yaml", "--json")
    cal = json.loads(out)
    assert cal["schema"] == "dispatchprof.calibration" and cal["path"] == str(tmp_path / "cpu.yaml")
    assert cal["copy_bytes_per_s"] > 0 and os.path.isfile(cal["path"])
    code, out, _ = run(capsys, "sweep", files / "tiny.json", "--device", "L4", "--batch", "1", "--prompt-len", "8",
                       "--new-tokens", "2", "--json", "--workers", "1")
    sweep = json.loads(out)
    assert sweep["schema"] == "dispatchprof.sweep" and len(sweep["rows"]) == 1


@pytest.mark.parametrize("alias, canonical", [("bfloat16", "bf16"), ("torch.float16", "fp16"), ("float32", "fp32"),
                                              ("FP16", "fp16"), ("half", "fp16")])
def test_dtype_aliases_give_one_canonical_name(capsys, files, alias, canonical):
    _, out, _ = run(capsys, files / "tiny.json", *SHORT, "--dtype", alias, "--json")
    _, same, _ = run(capsys, files / "tiny.json", *SHORT, "--dtype", canonical, "--json")
    data, twin = json.loads(out), json.loads(same)
    assert data["dtype"] == twin["dtype"] == canonical
    for key in ("prefill_totals", "decode_totals", "kv_cache_bytes", "weights_bytes"):
        assert data[key] == twin[key]                           # the alias changes nothing else


def test_bert_is_a_forward_profile_without_generation_metrics(capsys, files):
    code, out, _ = run(capsys, files / "bert.json", "--prompt-len", "8", "--batch", "2", "--device", "L4")
    assert code == 0 and "encoder forward pass, batch 2, 8 tokens (16 tokens processed" in " ".join(out.split())
    assert "TTFT" not in out and "TPOT" not in out and "decode" not in out
    code, out, _ = run(capsys, files / "bert.json", "--prompt-len", "8", "--batch", "2", "--device", "L4", "--json")
    data = json.loads(out)
    dev = data["devices"]["L4"]
    assert data["schema"] == "dispatchprof.forward" and data["kind"] == "encoder" and data["tokens"] == 16
    assert dev["tokens_per_s"] == pytest.approx(16 / dev["time_s"])            # processed tokens / time
    assert "ttft_s" not in json.dumps(data)


def test_bundled_bert_base_and_an_encoder_decoder(capsys, files):
    code, out, _ = run(capsys, "bert-base", "--prompt-len", "4", "--device", "L4", "--top", "0", "--depth", "0")
    assert code == 0 and "bert-base: encoder forward pass" in out and "TTFT" not in out
    code, out, _ = run(capsys, files / "t5.json", "--prompt-len", "6", "--new-tokens", "2", "--json")
    data = json.loads(out)
    assert data["kind"] == "encoder-decoder" and data["tokens"] == 1 * (6 + 2)


def test_one_new_token_shows_tpot_as_a_dash(capsys, files):
    code, out, _ = run(capsys, files / "tiny.json", "--prompt-len", "8", "--new-tokens", "1", "--device", "L4")
    row = next(line for line in out.splitlines() if line.startswith("L4 "))
    cells = row.split()
    assert code == 0 and "1 new token (the prefill only: no decode step)" in " ".join(out.split())
    assert cells[3] == "-" and "0 s" not in row                  # TTFT (2 cells), then TPOT "-"


def node(label, *children):
    return Node(label, label, "M", 1, Totals(), 0, 0, 0, 0, 0, 0.0, None, tuple(children))


def test_tree_keeps_indentation_below_the_roots_last_child():
    tree = node("(root)", node("a", node("a1")), node("b", node("b1", node("b11")), node("b2")))
    labels = [label for label, _, _ in walk(tree)]
    assert labels == ["(root)", "├─ a", "│  └─ a1", "└─ b", f"{INDENT_GUARD}  ├─ b1", f"{INDENT_GUARD}  │  └─ b11",
                      f"{INDENT_GUARD}  └─ b2"]
    assert not INDENT_GUARD.isspace()                            # survives tabulate's strip of cells


def test_rendered_tree_is_indented_below_the_last_child(capsys, files):
    # BertModel's last child is the pooler, whose own children must stay indented
    _, out, _ = run(capsys, files / "bert.json", "--prompt-len", "4", "--depth", "-1", "--top", "0")
    rows = out.split("Forward by module")[1].splitlines()
    pooler = next(i for i, line in enumerate(rows) if "└─ pooler" in line)
    dense = rows[pooler + 1]
    assert dense.startswith(f"{INDENT_GUARD}  ├─ dense") and rows[pooler].startswith("└─ pooler")


def test_roofline_draws_a_panel_per_device_bundled_and_yaml(capsys, files):
    import matplotlib.image

    one, two = files / "one.png", files / "two.png"
    assert run(capsys, files / "tiny.json", *SHORT, "--device", files / "gpu.yaml", "--roofline", one)[0] == 0
    assert run(capsys, files / "tiny.json", *SHORT, "--device", files / "gpu.yaml", "--device", "PIM-AI-1chip",
               "--roofline", two)[0] == 0
    w1, w2 = matplotlib.image.imread(one).shape[1], matplotlib.image.imread(two).shape[1]
    assert 1.8 < w2 / w1 < 2.2                                   # two panels side by side


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_honour_the_umask(capsys, files, mask, mode):
    old = os.umask(mask)
    try:
        path = write_atomic(files / "x.txt", "x")
        assert stat.S_IMODE(os.stat(path).st_mode) == mode        # 0666 & ~umask
        code, _, _ = run(capsys, files / "tiny.json", *SHORT, "-o", files / "r.txt")
        assert code == 0 and stat.S_IMODE(os.stat(files / "r.txt").st_mode) == mode
    finally:
        os.umask(old)


def test_a_failed_write_names_the_callers_path_and_leaves_nothing(tmp_path):
    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "missing" / "out.txt", "x")
    assert info.value.filename == str(tmp_path / "missing" / "out.txt")
    assert os.listdir(tmp_path) == []


def test_report_reads_back_a_forward_profile(capsys, files):
    _, out, _ = run(capsys, files / "bert.json", "--prompt-len", "4", "--json", "-o", files / "f.json")
    code, out, _ = run(capsys, "report", files / "f.json", "--device", "L4", "--json")
    data, saved = json.loads(out), json.loads((files / "f.json").read_text())
    assert code == 0 and data["kind"] == "dispatchprof.forward" and data["totals"] == saved["totals"]


@pytest.mark.parametrize("argv, message", [
    (["zero.json"], "zero.json: field 'num_hidden_layers' must be a whole number from 1 to 16,777,216, got 0"),
    (["tiny.json", "--dtype", "float64x"], "argument --dtype: unknown dtype 'float64x'; allowed: fp32 (float32), "
                                           "bf16 (bfloat16), fp16 (float16)"),
    (["sweep", "tiny.json", "--device", "absurd.yaml", "-o", "s.csv"],
     "absurd.yaml: device 'tiny-gpu': field 'memory_bandwidth_gb_per_s' = 1e-300 is outside the physical range"),
    (["sweep", "tiny.json", "--device", "L4", "--batch", "1,x"], "argument --batch: expected a whole number, got 'x'"),
    (["sweep", "tiny.json", "--device", "L4", "--batch", "1-8,2-64"], "expected a whole number, got '1-8'"),
    (["profile"], "the following arguments are required: model"),
])
def test_more_bad_input_in_process(capsys, files, monkeypatch, argv, message):
    from tests.test_cli_inputs import write_inputs
    write_inputs(files)
    monkeypatch.chdir(files)
    before = set(os.listdir(files))
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err
    assert set(os.listdir(files)) == before
