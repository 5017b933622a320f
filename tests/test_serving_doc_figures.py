"""docs/serving.md's figures agree with the outputs they quote (scripts/data/, each file's first line
the command that wrote the rest) and with arithmetic done here:

- the per-sequence host figure (scripts/serving_sequence_host.py -> serving_sequence_host.txt);
- the T5-small serve (serve_t5_small.txt) and the config it ran (t5_small/config.json);
- the bench_serving.py block, verbatim, and its own sums (bench_serving_2core.txt)."""

from __future__ import annotations

import json
import re
import statistics

import pytest
import serving_sequence_host as ssh

from dispatchprof.llm.catalog import load_config
from dispatchprof.serving.engines import engine_preset, load_engines
from dispatchprof.serving.requests import read_trace
from dispatchprof.serving.serve import GENERIC_ENGINE
from dispatchprof.sim.catalog import catalog as device_catalog
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.parallel import check_tp
from tests.accuracy_docs import DATA, ROOT, cells, doc_section, read_rows, signed_error, table_line

DOC = "docs/serving.md"


def _text() -> str:
    return (ROOT / DOC).read_text()


def _output(name: str) -> tuple[str, str]:
    """(command, output) of scripts/data/NAME."""
    command, output = (DATA / name).read_text().split("\n", 1)
    assert command.startswith("$ "), f"{name}'s first line is its command"
    return command[2:], output


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_sequence_host_tpot_is_the_scripts():
    _, out = _output("serving_sequence_host.txt")
    rows = {float(us): ms for us, _, ms in re.findall(r"^\s*([\d.]+)\s+([\d.]+)ms\s+([\d.]+)ms$", out, re.M)}
    assert set(rows) == set(ssh.SEQUENCE_HOST_US) == {0.0, 40.0}
    quoted = (f"graph launch set to 300 µs, Llama-3.1-8B at 50 req/s (256 + 256 tokens, 500 requests) has TPOT p50 "
              f"{rows[0.0]} ms at 0 µs and {rows[40.0]} ms at 40 µs per sequence")
    assert quoted in _flat(_text())
    # the script's traffic is the one quoted
    assert "50 req/s, 256 + 256 tokens" in out and "500 requests" in out and "graph_launch_us 300" in out


def _serve_table(out: str, column: str) -> dict[str, str]:
    """The first run's cells of the serve table whose header has ``column``: header -> "value unit"."""
    lines = out.splitlines()
    (i,) = [i for i, l in enumerate(lines) if l.startswith("run") and column in l]
    header = re.split(r"\s{2,}", lines[i].strip())
    values = re.split(r"\s{2,}", lines[i + 2].strip())
    return dict(zip(header, values))


def _us(cell: str) -> float:
    value, unit = cell.split()
    return float(value) * {"us": 1.0, "ms": 1e3}[unit]


def test_t5_small_figures_are_the_serves():
    command, out = _output("serve_t5_small.txt")
    row = _serve_table(out, "TTFT p50")
    assert row["run"] == "20 req/s"
    ttft_p50, tpot_p50 = _us(row["TTFT p50"]), _us(row["TPOT p50"])
    wall, user, system = map(float, re.search(r"wall ([\d.]+) s, user ([\d.]+) s, system ([\d.]+) s", out).groups())
    text = _flat(doc_section(DOC, "Encoder-decoder models (dispatchprof/serving/seq2seq.py)"))
    assert f"(`{command}`)" in text
    assert (f"takes {wall:.1f} s of wall time ({user:.1f} s user + {system:.1f} s system, this project's loaded "
            f"2-core machine): TTFT p50 {ttft_p50:.0f} us, TPOT p50 {tpot_p50:.0f} us") in text
    cfg = json.loads((DATA / "t5_small" / "config.json").read_text())
    # "6 + 6 layers, d_model 512": T5-small's shape
    assert (cfg["num_layers"], cfg["num_decoder_layers"], cfg["d_model"], cfg["model_type"]) == (6, 6, 512, "t5")


def test_bench_serving_block_is_the_output():
    _, out = _output("bench_serving_2core.txt")
    block = re.search(r"```\n(.*?)```", doc_section(DOC, "Speed"), re.S).group(1)
    assert block == out


def test_bench_serving_sums():
    _, out = _output("bench_serving_2core.txt")
    counting = float(re.search(r"counted once in ([\d.]+) s", out).group(1))
    rows = [l.split() for l in out.splitlines() if re.match(r"^\s+\d{4,5}\s+\d+\s+[\d.]+\s+[\d.]+\s", l)]
    assert [int(r[0]) for r in rows] == [1000, 2500, 5000, 10000]
    for n, _, sim, per1000, *_ in rows:
        assert abs(float(per1000) - 1000 * float(sim) / int(n)) <= 0.0051 + 1000 * 0.005 / int(n)
    c, s, total = map(float, re.search(r"counting ([\d.]+) s \+ simulation ([\d.]+) s = ([\d.]+) s", out).groups())
    assert c == counting and abs(s - float(rows[-1][2])) <= 0.05 and abs(total - (c + s)) <= 0.1
    # "about 1 ms per step timed": 10,000 requests' simulation over their KV-timeline rows
    per_step_ms = 1e3 * float(rows[-1][2]) / int(rows[-1][1])
    assert 0.5 <= per_step_ms <= 1.5, per_step_ms
    assert "Open-loop traffic costs about 1 ms per step timed" in _flat(doc_section(DOC, "Speed"))


@pytest.mark.parametrize("model, weights, device, quoted", [
    ("llama-3.1-70b", "fp8", "H100-SXM", "{}% (FP8, H100)"), ("llama-3.1-70b", "fp8", "H200", "{}% (FP8, H200)"),
    ("llama-3.1-70b", "fp8", "B200", "{}% (FP8, B200)"), ("llama-3.1-70b", "fp4", "B200", "{}% (NVFP4, B200)"),
    ("qwen3-32b", "bf16", "H100-SXM", "of Qwen3-32B on H100 {}%"),
])
def test_vllm_ttft_signed_medians(model, weights, device, quoted):
    """Signed median TTFT error of the held-out vLLM rows of a model, weights and device
    (scripts/data/serving_predictions.csv, the file docs/validation.md's serving table is made from)."""
    errors = [signed_error(r) for r in read_rows("serving_predictions.csv")
              if (r["split"], r["engine"], r["metric"], r["model"], r["weights"], r["device"])
              == ("held-out", "vllm", "ttft_mean", model, weights, device)]
    assert len(errors) >= 5
    assert quoted.format(f"{statistics.median(errors):.0f}") in _flat(doc_section(DOC, "Not done"))


@pytest.mark.parametrize("name, file", [("azure-conv", "azure-conv-2023.csv"), ("azure-code", "azure-code-2023.csv"),
                                        ("arxiv-summarization", "arxiv-summarization.csv")])
def test_dataset_sizes(name, file):
    lines = (ROOT / "dispatchprof" / "serving" / "data" / file).read_text().splitlines()
    n = int(re.search(r"^# n=(\d+) ", "\n".join(lines), re.M).group(1))
    quantiles = [l for l in lines if l and not l.startswith("#")][1:]
    assert len(quantiles) == 101 and "from the trace's 101 percentiles" in _flat(_text())
    text = _flat(doc_section(DOC, "Clients and requests"))
    quoted = {"azure-conv": "19,366 and 8,819 requests", "azure-code": "19,366 and 8,819 requests",
              "arxiv-summarization": "(28,257 requests"}[name]
    assert f"{n:,}" in quoted and quoted in text


def _preset(engine: str, device: str, version: str | None = None):
    d = load_device(device)
    return engine_preset(engine, version, memory_bytes=d.memory_capacity_gb * 1e9, device_name=d.name)


def test_engines_table_is_the_presets():
    """docs/serving.md's engine table against dispatchprof/serving/engines.yaml, on the devices its
    memory rules name (H100 80 GB, A100 80 GB, L40S 48 GB, H200 141 GB, B200 180 GB)."""
    text = doc_section(DOC, "Engines")
    engines = load_engines()
    header = [c for c in cells(next(l for l in text.splitlines() if l.startswith("| |")))][1:]
    assert header == [f"{e} {' / '.join(engines[e]['versions'])}" for e in ("vllm", "sglang", "trtllm")]
    devices = ("H100-SXM", "A100-80GB", "L40S", "H200", "B200")
    latest = {e: {d: _preset(e, d) for d in devices} for e in ("vllm", "sglang", "trtllm")}
    vllm, sglang, trt = (latest[e]["H100-SXM"] for e in ("vllm", "sglang", "trtllm"))
    policy = {"mixed": "(`mixed`)", "prefill_first": "(`prefill_first`)"}
    row = table_line(text, "step")
    assert row[1].endswith(policy[vllm.policy]) and row[2].endswith(policy[sglang.policy])
    assert row[3] == f"`{trt.policy}`"
    # max sequences and tokens per step: vLLM by memory (>= 70 GiB, not A100), the others fixed
    big, small = latest["vllm"]["H100-SXM"], latest["vllm"]["L40S"]
    assert latest["vllm"]["A100-80GB"].max_seqs == small.max_seqs
    assert table_line(text, "max sequences")[1:] == [
        f"{big.max_seqs} on >= 70 GiB (not A100), else {small.max_seqs}", f"{sglang.max_seqs}", f"{trt.max_seqs}"]
    tokens = table_line(text, "tokens per step")
    assert tokens[1] == f"{big.max_batched_tokens} on >= 70 GiB (not A100), else {small.max_batched_tokens}"
    assert tokens[2].startswith(f"chunk {sglang.max_batched_tokens} ({latest['sglang']['B200'].max_batched_tokens} "
                                f"from 160 GiB; 0.5: {latest['sglang']['L40S'].max_batched_tokens} below 60 GiB)")
    assert tokens[3] == f"{trt.max_batched_tokens}"
    onoff = {True: "on", False: "off"}
    assert table_line(text, "chunked prefill")[1:] == [onoff[p.chunked_prefill] for p in (vllm, sglang, trt)]
    assert table_line(text, "KV block (tokens)")[1:] == [str(p.block_size) for p in (vllm, sglang, trt)]
    memory = table_line(text, "memory for weights + KV")
    shares = [_preset("sglang", d, v).memory_utilization for d in devices for v in engines["sglang"]["versions"]]
    assert memory[1] == f"{vllm.memory_utilization:g} of all" and (vllm.memory_of, trt.memory_of) == ("total", "free")
    assert memory[2] == f"{min(shares):g}-{max(shares):g} of all, by GPU"
    assert memory[3] == f"{trt.memory_utilization:g} of what the weights leave"
    host = table_line(text, "host per step, per sequence")
    assert host[1].startswith(f"{vllm.step_host_us:g} + {vllm.sequence_host_us:g} µs, before the kernels (0.14: "
                              "overlapped")
    assert not _preset("vllm", "H100-SXM", "0.11.2").overlap_host and vllm.overlap_host
    assert host[2] == f"{sglang.step_host_us:g} + {sglang.sequence_host_us:g} µs, overlapped" and sglang.overlap_host
    assert host[3] == f"{trt.step_host_us:g} + {trt.sequence_host_us:g} µs, overlapped" and trt.overlap_host
    graphs = table_line(text, "CUDA graphs (padding)")
    sizes = vllm.cuda_graph_sizes
    assert graphs[1] == f"every step up to {sizes[-1]} tokens, to [{', '.join(map(str, sizes[:5]))}, ...]"
    assert graphs[2] == (f"decode steps up to {_preset('sglang', 'H100-SXM', '0.4').cuda_graph_sizes[-1]} / "
                         f"{sglang.cuda_graph_sizes[-1]}") and sglang.cuda_graph_steps == "decode"
    assert graphs[3] == "none padded" and not trt.cuda_graph_sizes
    assert (vllm.reserve_output, sglang.reserve_output, trt.reserve_output) == (False, False, True)
    assert all(p.prefix_caching for p in (vllm, sglang, trt)) and table_line(text, "prefix caching")[1:] == ["on"] * 3


def test_quoted_messages(tmp_path, monkeypatch):
    """The trace error and the tp refusal the doc quotes, as the code words them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trace.jsonl").write_text('{"arrival_s": 0.0, "prompt_tokens": 128, "output_tokens": 32}\n'
                                          '{"arrival_s": 0.5, "prompt_tokens": 128, "output_tokens": -3}\n')
    with pytest.raises(ValueError) as e:
        read_trace("trace.jsonl")
    assert f"(`{e.value}`)" in _flat(doc_section(DOC, "Clients and requests"))
    heads = load_config("llama-3.1-8b").num_attention_heads       # "a 32-head model"
    with pytest.raises(ValueError) as e:
        check_tp(3, [heads], [load_device("H100-SXM")])
    assert f"(`--tp 3` on a {heads}-head model: exit 2, `{e.value}`)" in _flat(_text())


def test_defaults_without_an_engine():
    g = GENERIC_ENGINE
    assert (f"Without `--engine`, the scheduler is vLLM's with {g['max_seqs']} sequences, {g['max_batched_tokens']} "
            f"tokens, blocks of {g['block_size']} and {g['memory_utilization']:g} of the memory") in _flat(_text())
    assert g["chunked_prefill"]
    # "The bundled profiles have no host cost per sequence (`sequence_host_us: 0`)"
    assert {d.sequence_host_us for d in device_catalog().values()} == {0.0}
    assert "The bundled profiles have no host cost per sequence (`sequence_host_us: 0`)" in _flat(_text())


def test_closed_loops_under_a_second():
    """"1,000 closed-loop requests take under a second after the one-off count"."""
    _, out = _output("bench_serving_2core.txt")
    lines = out[out.index(" clients "):].splitlines()[1:]
    seconds = [float(l.split()[1]) for l in lines if l.strip()]
    assert len(seconds) == 4 and max(seconds) < 1
    assert "so 1,000 closed-loop requests take under a second after the one-off count" in _flat(_text())


def test_sim2real_run_count():
    runs = read_rows("sim2real.csv")
    assert "plus TensorRT-LLM's published offline throughput rows (scripts/data/published_serving.csv) and " \
           f"{len(runs)} vLLM runs under open-loop load" in _flat(doc_section(DOC, "Validation"))


def test_long_rows_behind_a_queue_quote_the_bench():
    """The Speed section's two rows with more clients than the KV cache holds: their simulation's
    CPU seconds as bench_serving_rows.py printed them (one decimal)."""
    _, out = _output("bench_serving_rows_2core.txt")
    seconds = {engine: float(s) for engine, s in re.findall(
        r"llama-3.1-70b H200 tp1 ep1 (trtllm|vllm) 1024x8192 c\d+: simulation\s+([\d.]+)", out)}
    text = _flat(doc_section(DOC, "Speed"))
    assert (f"tokens simulates in {seconds['trtllm']:.1f} s under 128 TensorRT-LLM clients and "
            f"{seconds['vllm']:.1f} s under 64 vLLM clients") in text


def test_one_off_counts_and_fits_quote_the_bench():
    """The Speed section's counting and fitting CPU seconds of the two mixture-of-experts setups,
    as bench_serving_rows.py printed them (one decimal)."""
    _, out = _output("bench_serving_rows_2core.txt")
    counted = dict(re.findall(r"^(\S+) on \S+: counting the chains\s+([\d.]+)", out, re.M))
    fitted = dict(re.findall(r"^(\S+): the exact fit alone\s+([\d.]+)", out, re.M))
    text = _flat(doc_section(DOC, "Speed"))
    assert (f"Qwen3-30B-A3B on H100-SXM counts in {counted['qwen3-30b-a3b']} s and fits in "
            f"{fitted['qwen3-30b-a3b']} s") in text
    assert (f"DeepSeek-V3 on B200, whose decode and multi-token op streams differ and are merged (above), "
            f"counts in {counted['deepseek-v3']} s and fits in {fitted['deepseek-v3']} s") in text
