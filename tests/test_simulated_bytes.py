"""Reports show the bytes the simulation moved under its dtypes (dispatchprof.report.simbytes), labelled,
beside the bytes as counted; numbers worked out by hand."""

import json

import torch

from conftest import run_cli as run
from dispatchprof import OpCounter, report
from dispatchprof.report.simbytes import bytes_dict, moved_bytes, simulated_as
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate


def linear_profile():
    """Linear(64 -> 128, no bias) in fp32 on a [4, 64] input: one aten.mm."""
    model, x = torch.nn.Linear(64, 128, bias=False), torch.randn(4, 64)
    with OpCounter(model) as c:
        model(x)
    return c.profile


X, W, OUT = 4 * 64 * 4, 64 * 128 * 4, 4 * 128 * 4      # fp32 input, weight, output bytes


def sim_of(profile, **kw):
    return simulate(profile, scenarios_of("H100-SXM")["H100-SXM"], **kw)


def test_a_linears_weight_moves_in_over_out_over_two_bytes_at_int4():
    p = linear_profile()
    assert p.total().bytes == X + W + OUT                               # as counted: fp32 weight
    assert moved_bytes(sim_of(p)) == X + W + OUT                        # eager, weights as counted
    int4 = sim_of(p, weight_dtype="int4")
    assert moved_bytes(int4) == X + 64 * 128 // 2 + OUT                 # 4 bits per weight element
    assert moved_bytes(sim_of(p, weight_dtype="int8")) == X + 64 * 128 + OUT
    assert simulated_as(int4) == "weights int4, KV cache fp32, runtime eager"
    assert bytes_dict(int4, p.total().bytes) == {
        "bytes": X + 64 * 128 // 2 + OUT, "counted_bytes": X + W + OUT, "weight_dtype": "int4",
        "kv_dtype": "fp32", "runtime": "eager", "tp": 1}


def test_module_tree_and_operator_table_show_the_simulated_bytes_labelled():
    p = linear_profile()
    int4 = sim_of(p, weight_dtype="int4")
    tree = report.module_tree(p, int4, columns=("bytes", "sim_bytes"))
    assert tree.splitlines()[0].split() == ["module", "bytes", "bytes", "(sim)"]
    assert tree.splitlines()[2].split() == ["(root)", "35.84", "KB", "7.17", "KB"]    # 35,840 and 7,168 B
    ops = report.operator_table(p, int4, simulated_bytes=True).splitlines()
    assert "bytes (sim)" in ops[0] and ops[2].split()[:1] == ["aten.mm"] and "7.17 KB" in ops[2]
    assert "bytes (sim)" not in report.operator_table(p, int4) and "35.84 KB" in report.operator_table(p, int4)


SMALL = ["llama-3.2-1b", "--batch", "1", "--prompt-len", "16", "--new-tokens", "3", "--device", "H100-SXM"]


#: llama-3.2-1b's parameters: embedding 128,256 x 2,048 = 262,668,288; per layer q, o 2,048 x 2,048,
#: k, v 512 x 2,048, gate, up, down 8,192 x 2,048, two norms of 2,048 (60,821,504), 16 layers; final norm 2,048.
#: A forward reads each once, except the embedding, which gathers the prompt's 16 rows of 2,048 (not
#: its table); the tied LM head reads the whole table (bf16); the rotary embedding's buffer inv_freq
#: (head dim 64 / 2 = 32 fp32 elements) is read once.
PARAMS_READ = 16 * 2_048 + 16 * 60_821_504 + 2_048 + 262_668_288
INV_FREQ = 32


def test_profile_json_and_table_carry_the_simulated_bytes(capsys):
    moved = {}
    for dtype in ("", "int4"):
        code, out, _ = run(capsys, *SMALL, "--format", "json", *(["--weight-dtype", dtype] if dtype else []))
        assert code == 0
        moved[dtype] = json.loads(out)["simulated_bytes"]["H100-SXM"]["prefill"]
    assert (moved[""]["weight_dtype"], moved["int4"]["weight_dtype"], moved["int4"]["runtime"]) == ("bf16", "int4",
                                                                                                    "eager")
    assert moved[""]["counted_bytes"] == moved["int4"]["counted_bytes"]
    # every parameter (and buffer) element read moves its bits as counted (16, inv_freq 32), 4 at int4
    assert moved[""]["bytes"] - moved["int4"]["bytes"] == PARAMS_READ * (16 - 4) // 8 + INV_FREQ * (32 - 4) // 8
    code, out, _ = run(capsys, *SMALL, "--weight-dtype", "int4", "--top", "3", "--depth", "0")
    text = " ".join(out.split())
    assert "Bytes moved as simulated on H100-SXM (weights int4, KV cache bf16, runtime eager): prefill" in text
    assert "Prefill by module on H100-SXM (weights int4, KV cache bf16, runtime eager):" in text
    assert "Last decode step (token 3 of 3) by operator on H100-SXM (weights int4" in text
    assert max(len(line) for line in out.splitlines()) <= 100


TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 512}


def test_the_last_decode_steps_tables_use_the_kv_dtype(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    moved = {}
    for kv in ("", "int4"):
        code, out, _ = run(capsys, str(tmp_path), "--prompt-len", "8", "--new-tokens", "3", "--device", "H100-SXM",
                           "--format", "json", *(["--kv-dtype", kv] if kv else []))
        assert code == 0
        moved[kv] = json.loads(out)["simulated_bytes"]["H100-SXM"]["last_decode_step"]
    assert (moved[""]["kv_dtype"], moved["int4"]["kv_dtype"]) == ("bf16", "int4")
    assert moved["int4"]["bytes"] < moved[""]["bytes"] and moved["int4"]["counted_bytes"] == moved[""]["counted_bytes"]
