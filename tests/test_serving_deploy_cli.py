"""``dispatchprof serve`` with deployment layouts: --ep/--dp-attention/--expert-skew on an MoE
model, --pp, disaggregated --prefill-replicas/--decode-replicas, and their one-line errors."""

import json

import pytest

from conftest import run_cli as run

TINY = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 4096}
MOE = {"model_type": "mixtral", "vocab_size": 512, "hidden_size": 32, "intermediate_size": 64,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 8,
       "num_experts_per_tok": 2, "max_position_embeddings": 4096}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    out = {}
    for name, config in (("tiny", TINY), ("moe", MOE)):
        d = tmp_path_factory.mktemp(name)
        (d / "config.json").write_text(json.dumps(config))
        out[name] = str(d)
    return out


def serve(capsys, model, *extra):
    return run(capsys, "serve", model, "--device", "H100-SXM", "--concurrency", "4", "--num-requests", "8",
               "--prompt-len", "64", "--output-len", "8", *extra)


def test_expert_parallel_run_reports_its_layout_and_gpus(capsys, dirs):
    code, out, err = serve(capsys, dirs["moe"], "--ep", "8", "--dp-attention", "8", "--expert-skew", "1.5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["layout"] == "tp 1, ep 8, dp-attention 8, pp 1, expert skew 1.5"
    assert data["summary"]["gpus"] == 8
    code, plain, err = serve(capsys, dirs["moe"], "--json")
    assert code == 0, err
    assert "layout" not in json.loads(plain) and json.loads(plain)["summary"]["gpus"] == 1


def test_disaggregated_run_reports_transfer_and_both_sides(capsys, dirs):
    code, out, err = serve(capsys, dirs["tiny"], "--prefill-replicas", "2", "--decode-replicas", "1",
                           "--decode-device", "H200", "--kv-link", "eth-100g")
    assert code == 0, err
    words = " ".join(out.split())                    # the setup line is wrapped at 100 columns
    assert "H100-SXM -> H200" in words and "2 prefill + 1 decode replica(s), KV over eth-100g" in words
    assert "KV xfer" in out and "D util" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    code, out, err = serve(capsys, dirs["tiny"], "--prefill-replicas", "1", "--decode-replicas", "1", "--json")
    assert code == 0, err
    d = json.loads(out)["disaggregated"]
    # KV per token of this model: 2 x 2 layers x 2 KV heads x 16 x 2 B = 256 B; 64 tokens over ib-ndr
    # (40e9 B/s) + 5 us
    assert d["transfer_s"]["mean"] == pytest.approx(64 * 256 / 40e9 + 5e-6, rel=1e-12)
    assert json.loads(out)["summary"]["gpus"] == 2


def test_each_side_runs_its_own_tensor_parallelism(capsys, dirs):
    """--tp sets the prefill replicas', --decode-tp the decode replicas'. This model's KV per token,
    256 B, is split over a replica's GPUs by KV head (2 heads): a TP 2 prefill GPU holds and sends
    128 B per token over its own NIC, a TP 1 one all 256 B; 64 tokens over ib-ndr (40e9 B/s) + 5 us.
    GPUs: 2 prefill x 2 + 1 decode x 1 = 5; 2 x 1 + 1 x 2 = 4."""
    results = {}
    for tp, decode_tp in (("2", "1"), ("1", "2")):
        code, out, err = serve(capsys, dirs["tiny"], "--prefill-replicas", "2", "--decode-replicas", "1", "--tp", tp,
                               "--decode-tp", decode_tp, "--json")
        assert code == 0, err
        results[tp] = json.loads(out)
    assert results["2"]["summary"]["gpus"] == 5 and results["1"]["summary"]["gpus"] == 4
    assert results["2"]["disaggregated"]["transfer_s"]["mean"] == pytest.approx(64 * 128 / 40e9 + 5e-6, rel=1e-12)
    assert results["1"]["disaggregated"]["transfer_s"]["mean"] == pytest.approx(64 * 256 / 40e9 + 5e-6, rel=1e-12)


@pytest.mark.parametrize("model, extra, message", [
    ("moe", ["--ep", "3"], "ep=3 does not divide the model's 8 routed experts; allowed: 1, 2, 4, 8"),
    ("tiny", ["--ep", "2"], "ep=2 needs a mixture-of-experts model"),
    ("moe", ["--ep", "8", "--dp-attention", "3"], "dp_attention=3 does not divide the replica's 8 GPUs"),
    ("moe", ["--ep", "8", "--expert-skew", "0.9"], "expert_skew must be >= 1"),
    ("tiny", ["--pp", "3"], "pp=3 does not divide the model's 2 layers; allowed: 1, 2"),
    ("tiny", ["--prefill-replicas", "1"], "needs both --prefill-replicas P and --decode-replicas D"),
    ("tiny", ["--decode-device", "H200"], "--decode-device needs --prefill-replicas and --decode-replicas"),
    ("tiny", ["--prefill-replicas", "1", "--decode-replicas", "1", "--pp", "2"], "--pp does not apply to a "
                                                                                 "disaggregated run"),
])
def test_bad_layouts_exit_2_with_one_line(capsys, dirs, model, extra, message):
    code, out, err = serve(capsys, dirs[model], *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
