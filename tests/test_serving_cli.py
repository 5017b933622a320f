"""``dispatchprof serve``, request traces and generators: outputs, and one-line errors (exit 2)."""

import json

import pytest

from conftest import run_cli as run
from dispatchprof.serving import generate_requests, parse_duration, read_trace
from dispatchprof.serving.requests import Length, parse_length

TINY = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 4096}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    (d / "config.json").write_text(json.dumps(TINY))
    return str(d)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_trace_json_output_in_trace_order(capsys, tiny_dir, tmp_path):
    trace = write(tmp_path, "t.jsonl", "\n".join(json.dumps(r) for r in (
        {"arrival_s": 0.5, "prompt_tokens": 32, "output_tokens": 4},
        {"arrival_s": 0.0, "prompt_tokens": 16, "output_tokens": 8})) + "\n")
    code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--requests", trace, "--json",
                         "--slo-ttft", "200ms", "--slo-tpot", "50ms")
    assert code == 0, err
    data = json.loads(out)
    assert [r["prompt_tokens"] for r in data["requests"]] == [32, 16]       # trace order, not arrival order
    for r in data["requests"]:
        assert r["ttft_s"] > 0 and r["e2e_s"] >= r["ttft_s"] and r["tpot_s"] > 0
        # e2e = ttft + tpot x (output - 1)
        assert r["e2e_s"] == pytest.approx(r["ttft_s"] + r["tpot_s"] * (r["output_tokens"] - 1))
    s = data["summary"]
    assert s["requests"] == 2 and set(s["ttft_s"]) == {"mean", "median", "p90", "p99"}
    assert s["slo_attainment"] == 1.0 and s["goodput_requests_per_s"] == pytest.approx(s["requests_per_s"])


def test_rates_table_csv_and_price(capsys, tiny_dir, tmp_path):
    code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--rate", "5,20", "--num-requests", "30",
                         "--prompt-len", "uniform:8:64", "--output-len", "8", "--price", "H100-SXM=3.6",
                         "--format", "csv")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("run,requests,warmup_requests,span_s") and len(lines) == 3
    header = lines[0].split(",")
    row = dict(zip(header, lines[1].split(",")))
    # $/Mtok = 3.6 $/h x span / 3600 s/h / (30 requests x 8 output tokens) x 1e6
    span = float(row["span_s"])
    assert float(row["usd_per_million_tokens"]) == pytest.approx(3.6 * span / 3600 / 240 * 1e6)
    code, out, _ = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--rate", "5", "--num-requests", "10")
    assert code == 0 and "TTFT p50" in out and "5 req/s" in out


def test_trace_files(tmp_path):
    csv_path = write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,2\n0.25,20,3\n")
    reqs = read_trace(csv_path)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in reqs] == [(0.0, 10, 2), (0.25, 20, 3)]
    bad = write(tmp_path, "bad.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,2\n0.25,-20,3\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 3: prompt_tokens must be >= 1, got '-20'"):
        read_trace(bad)
    bad = write(tmp_path, "bad.jsonl", '{"arrival_s": 0, "prompt_tokens": 4, "output_tokens": 2}\n'
                                       '{"arrival_s": 1, "prompt_tokens": 4}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2: missing 'output_tokens'"):
        read_trace(bad)
    bad = write(tmp_path, "cols.csv", "time,prompt_tokens\n0,1\n")
    with pytest.raises(ValueError, match="line 1: the CSV header needs the columns"):
        read_trace(bad)


def test_generator():
    reqs = generate_requests(4.0, 5, 100, "uniform:10:20", arrivals="fixed", seed=3)
    assert [r.arrival_s for r in reqs] == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])   # 1 / 4 s apart
    assert all(r.prompt_tokens == 100 and 10 <= r.output_tokens <= 20 for r in reqs)
    poisson = generate_requests(100.0, 2000, 8, 8, seed=1)
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(poisson, poisson[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(0.01, rel=0.1)                  # mean gap 1 / rate
    assert generate_requests(100.0, 5, 8, 8, seed=1) == generate_requests(100.0, 5, 8, 8, seed=1)
    assert parse_length("uniform:64:512") == Length(64, 512) and parse_length(7) == Length(7, 7)
    with pytest.raises(ValueError, match="rate must be a number of requests per second > 0"):
        generate_requests(0, 5)
    with pytest.raises(ValueError, match="prompt length must be a whole number >= 1, uniform:LOW:HIGH"):
        generate_requests(1.0, 5, "normal:3:4")


def test_durations():
    assert parse_duration("200ms") == pytest.approx(0.2)
    assert parse_duration("0.5s") == 0.5 and parse_duration("50 us") == pytest.approx(5e-5)
    with pytest.raises(ValueError, match="needs a number with a unit"):
        parse_duration("200")


@pytest.mark.parametrize("args, message", [
    (["--rate", "0"], "--rate must be a finite number > 0 requests per second, got '0'"),
    (["--rate", "-2"], "--rate must be a finite number > 0 requests per second"),
    (["--rate", "1", "--slo-ttft", "200"], "--slo-ttft needs a number with a unit (s, ms, us, ns) such as 200ms"),
    (["--rate", "1", "--kv-dtype", "fp2"], "argument --kv-dtype: invalid choice: 'fp2'"),
    (["--rate", "1", "--price", "B200=3"], "--price names device 'B200', but the run is on 'H100-SXM'"),
    (["--rate", "1", "--prompt-len", "uniform:9:3"], "--prompt-len must be >= 1 (and LOW <= HIGH)"),
    (["--rate", "1", "--tp", "3"], "tp=3 does not divide the model's 4 attention heads; allowed: 1, 2, 4"),
    (["--rate", "1", "--runtime", "jit"], "argument --runtime: invalid choice: 'jit'"),
    (["--concurrency", "0"], "--concurrency must be a whole number of clients from 1 to 65536, got '0'"),
    (["--concurrency", "-4"], "--concurrency must be a whole number of clients from 1 to 65536, got '-4'"),
    (["--concurrency", "eight"], "--concurrency takes a whole number of clients such as 8 or 1,8,64, got 'eight'"),
    (["--concurrency", "8", "--rate", "2"], "give either --rate (open loop) or --concurrency (closed loop), not both"),
    (["--concurrency", "8", "--engine", "tgi"], "argument --engine: invalid choice: 'tgi' (choose from 'vllm', "
                                                "'sglang', 'trtllm')"),
    (["--concurrency", "8", "--engine", "vllm", "--engine-version", "0.3"],
     "vllm has no preset for version '0.3'; known: 0.10, 0.11, 0.11.2, 0.14"),
    (["--concurrency", "8", "--engine-version", "0.11"], "--engine-version needs --engine"),
    (["--concurrency", "8", "--dataset", "sharegpt"], "argument --dataset: invalid choice: 'sharegpt' (choose from "
                                                      "'azure-conv', 'azure-code', 'arxiv-summarization')"),
    (["--concurrency", "8", "--dataset", "azure-conv", "--prompt-len", "5"],
     "give either --dataset or --prompt-len/--output-len, not both"),
    (["--concurrency", "8", "--prefix-hit", "1.5"], "--prefix-hit must be a rate in [0, 1], got 1.5"),
    (["--concurrency", "8", "--random-range-ratio", "1"], "--random-range-ratio must be in [0, 1), got 1.0"),
    (["--concurrency", "8", "--num-requests", "4", "--warmup", "4"],
     "--warmup must be a whole number of requests from 0 to 3 (fewer than the requests), got 4"),
    (["--rate", "1", "--num-requests", "2000000"], "expected at most 1,048,576 (time: 10,000 requests take about "
                                                   "20 s to simulate), got 2,000,000"),
    (["--rate", "1", "--replicas", "5000"], "expected at most 1,024 (time: each replica runs its own steps)"),
    (["--rate", "1", "--output-len", "2000000"], "--output-len must be at most 1,048,576 tokens"),
    (["--rate", "1", "--price", "H100-SXM=nan"], "--price takes DEVICE=USD_PER_H such as H100-SXM=2.5"),
    (["--rate", "1", "-o", "/dev/null"], "-o "),
    (["--concurrency", "8", "--engine", "vllm", "--runtime", "eager"],
     "an engine preset runs the serving runtime (CUDA graphs, fused kernels), not 'eager'"),
    (["--concurrency", "8", "--batch-wait-steps", "20"],
     "--batch-wait-steps and --batch-wait-ratio need --engine (they change its preset)"),
    (["--concurrency", "8", "--engine", "trtllm", "--batch-wait-steps", "-1"],
     "--batch-wait-steps must be a whole number of steps >= 0, got -1"),
    (["--concurrency", "8", "--engine", "trtllm", "--batch-wait-ratio", "1.5"],
     "--batch-wait-ratio must be a share of the step budget in [0, 1], got 1.5"),
])
def test_bad_input_exits_2_with_one_line(capsys, tiny_dir, args, message):
    code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_bad_trace_row_and_draft_vocabulary_exit_2(capsys, tiny_dir, tmp_path):
    trace = write(tmp_path, "t.jsonl", '{"arrival_s": 0, "prompt_tokens": 8, "output_tokens": -1}\n')
    code, _, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--requests", trace)
    assert code == 2 and "t.jsonl: line 1: output_tokens must be >= 1, got -1" in err
    other = tmp_path / "draft"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({**TINY, "vocab_size": 1000, "num_hidden_layers": 1}))
    code, _, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--rate", "1", "--draft", str(other))
    assert code == 2 and err.count("\n") == 1
    assert "the draft model has a vocabulary of 1000 tokens and the target 512" in err


def test_plot_and_timeline_files(capsys, tiny_dir, tmp_path):
    png, kv, per = tmp_path / "serve.png", tmp_path / "kv.csv", tmp_path / "req.csv"
    code, _, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--rate", "5,10", "--num-requests", "12",
                       "--prompt-len", "16", "--output-len", "4", "--plot", str(png), "--timeline", str(kv),
                       "--requests-csv", str(per))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert kv.read_text().startswith("replica,time_s,kv_blocks_used,kv_fraction,running,waiting,preemptions\n")
    rows = per.read_text().strip().splitlines()
    assert rows[0].startswith("ttft_s,tpot_s,e2e_s") and len(rows) == 13              # header + 12 requests


def test_profile_command_kv_dtype(capsys, tiny_dir):
    code, out, err = run(capsys, tiny_dir, "--prompt-len", "8", "--new-tokens", "3", "--kv-dtype", "int4",
                         "--device", "H100-SXM", "--format", "json")
    assert code == 0, err
    # 10 cached tokens x 2 layers x (K + V) x 2 KV heads x 16 dims = 1280 elements x 4 bits = 640 bytes
    assert json.loads(out)["kv_cache_bytes"] == 640


def test_concurrency_rows_with_an_engine(capsys, tiny_dir):
    code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--engine", "vllm", "--concurrency",
                         "1,8", "--num-requests", "40", "--prompt-len", "64", "--output-len", "8", "--json")
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["concurrency"] for r in runs] == [1, 8] and [r["rate_req_per_s"] for r in runs] == [None, None]
    one, eight = runs[0]["summary"], runs[1]["summary"]
    for s in (one, eight):
        assert set(s["ttft_s"]) == set(s["itl_s"]) == set(s["e2e_s"]) == {"mean", "median", "p90", "p99"}
        assert s["requests"] == 40 and s["output_tokens_per_s_per_gpu"] == s["output_tokens_per_s"]   # 1 GPU
    # one client: requests one after another, so the span is the sum of their end-to-end latencies
    assert one["span_s"] == pytest.approx(40 * one["e2e_s"]["mean"], rel=1e-9)
    assert eight["output_tokens_per_s"] > 4 * one["output_tokens_per_s"]
    sent = [r["arrival_s"] for r in runs[0]["requests"]]
    assert sent == sorted(sent) and sent[0] == 0
    code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--engine", "vllm", "--concurrency",
                         "1,8", "--num-requests", "40", "--prompt-len", "64", "--output-len", "8")
    assert code == 0, err
    assert out.splitlines()[0].startswith("Serving on H100-SXM x 1 replica(s) under vllm 0.14: max 1024 sequences")
    assert "8 clients" in out and "TTFT mean" in out and "ITL p99" in out and "tok/s/GPU" in out
    assert max(map(len, out.splitlines())) <= 100                  # three tables a terminal shows whole


def test_trace_edge_cases_are_one_line(capsys, tiny_dir, tmp_path):
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffarrival_s,prompt_tokens,output_tokens\n0,8,2\n".encode())
    code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--requests", str(bom), "--json")
    assert code == 0, err
    assert json.loads(out)["summary"]["requests"] == 1                               # a BOM is read
    inf = write(tmp_path, "inf.jsonl", '{"arrival_s": 0, "prompt_tokens": 8, "output_tokens": "inf"}\n')
    code, _, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--requests", inf)
    assert code == 2 and "inf.jsonl: line 1: output_tokens must be a number, got 'inf'" in err
    code, _, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--requests", inf, "-o", inf)
    assert code == 2 and err.count("\n") == 1 and "-o " in err                    # an input is never overwritten


def test_counting_shows_a_progress_bar_on_a_terminal(capsys, monkeypatch, tiny_dir):
    """The step cost model's six chains, counted before any simulation, drawn on stderr when it is
    a terminal and cleared after."""
    import sys

    from conftest import Terminal
    from dispatchprof.cli import serve_command

    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    assert serve_command.run([tiny_dir, "--device", "H100-SXM", "--concurrency", "2", "--num-requests", "4",
                              "--prompt-len", "16", "--output-len", "4"]) == 0
    drawn = tty.getvalue()
    assert [f"counting chains: {k} of 6" in drawn for k in range(7)] == [True] * 7
    assert drawn.endswith("\r" + " " * 90 + "\r")                    # cleared
    assert "2 clients" in capsys.readouterr().out


def test_batch_waiting_holds_prompts_back_only_beside_decodes(capsys, tiny_dir):
    """--batch-wait-steps / --batch-wait-ratio (the scheduler's rule 4, worked by hand in
    tests/test_serving_batch_wait.py): one client never has a decode beside its prompt, so nothing
    waits; eight clients of varied output lengths send prompts while others decode: those wait for a
    fuller step, and their TTFT grows."""
    def summary(clients, *wait):
        code, out, err = run(capsys, "serve", tiny_dir, "--device", "H100-SXM", "--engine", "trtllm",
                             "--concurrency", clients, "--num-requests", "40", "--prompt-len", "64",
                             "--output-len", "uniform:8:24", "--json", *wait)
        assert code == 0, err
        return json.loads(out)["summary"]                 # one run: its report at the top level
    wait = ("--batch-wait-steps", "5", "--batch-wait-ratio", "1")
    assert summary("1", *wait) == summary("1")
    assert summary("8", "--batch-wait-steps", "0") == summary("8")
    held, free = summary("8", *wait), summary("8")
    assert held["ttft_s"]["mean"] > free["ttft_s"]["mean"] and held["requests"] == free["requests"] == 40
