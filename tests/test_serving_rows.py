"""The measured serving rows of scripts/validate_serving.py: which rows are expressed and why the
others are not, the fixed split, and the dtypes and engines each row is simulated with."""

import csv
import hashlib

import pytest

import serving_rows as sr

COLUMNS = ["id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision", "mode",
           "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size",
           "moe_tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms"]


def row(**over):
    base = dict(id="r", silicon_data_source="source_file=x.csv; silicon_concurrency=16", backend="trtllm",
                backend_version="1.0.0rc3", model_path="Qwen/Qwen3-32B", system="h100_sxm", precision="fp8",
                mode="agg", isl="1024", osl="128", gemm_quant_mode="fp8", moe_quant_mode="fp8", batch_size="16",
                tp_size="2", pp_size="1", attention_dp_size="", moe_tp_size="1", moe_ep_size="1",
                silicon_ttft_ms="165.1", silicon_tpot_ms="11.866")
    return {**base, **over}


def write(tmp_path, rows):
    path = tmp_path / "silicon_sample.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_a_row_as_simulated(tmp_path):
    rows, skipped = sr.aic_rows(write(tmp_path, [row()]))
    assert skipped == []
    r = rows[0]
    assert (r.model, r.device, r.tp, r.engine, r.engine_version) == ("qwen3-32b", "H100-SXM", 2, "trtllm", "1.1")
    assert (r.weight_dtype, r.kv_dtype, r.prompt_len, r.output_len) == ("fp8", "fp8", 1024, 128)
    # AIConfigurator's benchmark template: 20 requests per client, the first 8 rounds simulated
    assert (r.concurrency, r.max_seqs, r.num_requests, r.rounds) == (16, 16, 16 * 9, 20)
    assert r.measured == {"ttft_mean": 0.1651, "tpot_mean": 0.011866}          # milliseconds -> seconds
    vllm = sr.aic_rows(write(tmp_path, [row(backend="vllm", gemm_quant_mode="")]))[0][0]
    assert (vllm.engine, vllm.weight_dtype, vllm.kv_dtype) == ("vllm", None, None)   # bf16, KV "auto"
    # AIConfigurator's benchmark rule: step budget batch + ISL + 1500 (TensorRT-LLM: in blocks of 32), graphs 1..batch
    assert r.engine_figures == {"max_batched_tokens": 16 + 1024 + 1500 + 20}                   # 2540 -> 2560
    assert vllm.engine_figures == {"max_batched_tokens": 2540, "cuda_graph_sizes": tuple(range(1, 17))}
    sglang = sr.aic_rows(write(tmp_path, [row(backend="sglang")]))[0][0]
    assert sglang.engine_figures == {}
    # the newest preset not newer than the row's version; the newest where none is given
    versions = {v: sr.aic_rows(write(tmp_path, [row(backend="vllm", backend_version=v)]))[0][0].engine_version
                for v in ("0.12.0", "0.13.0", "0.14.0", "0.19.0", "", "nightly-5b8c30d", "0.9.1")}
    assert versions == {"0.12.0": "0.11.2", "0.13.0": "0.11.2", "0.14.0": "0.14", "0.19.0": "0.14", "": "0.14",
                        "nightly-5b8c30d": "0.14", "0.9.1": "0.11.2"}
    no_clients = row(silicon_data_source="source_file=gap.csv", batch_size="64")
    assert sr.aic_rows(write(tmp_path, [no_clients]))[0][0].concurrency == 64   # batch_size stands for it


def test_rows_not_expressed_keep_their_reason(tmp_path):
    rows, skipped = sr.aic_rows(write(tmp_path, [
        row(id="a", mode="disagg"), row(id="b", model_path="deepseek-ai/DeepSeek-R1"), row(id="c", system="b300_sxm"),
        row(id="d", attention_dp_size="8"), row(id="e", gemm_quant_mode="int4_wo")]))
    assert rows == []
    assert [s.reason for s in skipped] == [
        "disaggregated prefill/decode (serve simulates it, not yet validated here)",
        "deepseek-ai/DeepSeek-R1: no catalog model mapped to it here (MODELS)",
        "b300_sxm: no bundled device profile", "pipeline or attention data parallelism (serve simulates them, not yet validated here)",
        "weights int4_wo: no simulated weight dtype"]


def test_mixture_of_experts_rows_spread_their_experts_as_measured(tmp_path):
    moe = dict(model_path="Qwen/Qwen3-235B-A22B-FP8", tp_size="4", gemm_quant_mode="fp8_block")
    rows, skipped = sr.aic_rows(write(tmp_path, [
        row(id="ep", moe_tp_size="1", moe_ep_size="4", **moe), row(id="tp", moe_tp_size="4", moe_ep_size="1", **moe),
        row(id="mixed", moe_tp_size="2", moe_ep_size="2", **moe)]))
    assert [(r.id, r.model, r.tp, r.ep, r.weight_dtype, r.layout) for r in rows] == [
        ("ep", "qwen3-235b-a22b", 4, 4, "fp8", "experts over 4 GPUs (EP)"),
        ("tp", "qwen3-235b-a22b", 4, 1, "fp8", "tensor-parallel")]
    # expert parallelism is part of what is counted; a TP-only key stays as it was (cached counts keep their names)
    assert rows[0].setup_key == ("qwen3-235b-a22b", "H100-SXM", 4, "fp8", "fp8", "ep4")
    assert rows[1].setup_key == ("qwen3-235b-a22b", "H100-SXM", 4, "fp8", "fp8")
    assert [(s.id, s.reason) for s in skipped] == [
        ("mixed", "experts over moe_tp 2 x moe_ep 2 at tp 4: serve spreads them tensor-parallel over tp or "
                  "expert-parallel over tp GPUs")]
    # a dense model's moe_* columns say nothing (the sample fills them arbitrarily)
    dense = sr.aic_rows(write(tmp_path, [row(moe_tp_size="0", moe_ep_size="0")]))[0][0]
    assert (dense.tp, dense.ep) == (2, 1)


def test_the_split_depends_on_the_id_alone():
    ids = [f"row-{i}" for i in range(300)]
    fit = [i for i in ids if sr.split_of(i) == "fit"]
    assert all((hashlib.sha256(i.encode()).digest()[0] % 3 == 0) == (i in fit) for i in ids)
    assert 70 < len(fit) < 130                                           # about a third


def test_published_offline_rows():
    rows = sr.published_rows(sr.__file__.replace("serving_rows.py", "data/published_serving.csv"))
    assert len(rows) == 14 and all(r.concurrency is None and r.engine == "trtllm" for r in rows)
    first = rows[0]
    assert (first.prompt_len, first.output_len, first.num_requests) == (128, 128, sr.OFFLINE_CAP)
    assert first.measured == {"output_tokens_per_s": 28312.0} and first.engine_figures == {"memory_utilization": 0.95}


def test_sim2real_rows_as_simulated():
    rows = {r.id: r for r in sr.sim2real_rows(sr.__file__.replace("serving_rows.py", "data/sim2real.csv"))}
    assert len(rows) == 20 and all(r.engine == "vllm" and r.concurrency is None and r.max_seqs == 128
                                   for r in rows.values())
    r = rows["sim2real-16-llama-3-1-8b-tp1-general-1"]
    # general: 100 system-prompt tokens + 447 question tokens, 248 out; 8 req/s x 600 s then 20 req/s x 600 s,
    # each simulated for a fifth of its duration: 8 x 120 + 20 x 120 = 3,360 requests
    assert (r.model, r.device, r.tp, r.prompt_len, r.output_len) == ("llama-3.1-8b", "H100-SXM", 1, 547, 248)
    assert r.stages == ((8.0, 120.0), (20.0, 120.0)) and r.num_requests == 3360
    assert r.prefix_hit == 100 / 547
    assert r.engine_figures == {"max_batched_tokens": 2048, "memory_utilization": 0.9}
    assert r.measured["ttft_mean"] == pytest.approx(0.028547) and r.measured["tpot_mean"] == pytest.approx(0.009037)
    assert r.measured["e2e_p99"] == pytest.approx(2.438083)                                 # ms -> s
    assert rows["sim2real-23-llama-3-1-8b-tp1-general-1"].engine_figures["max_batched_tokens"] == 8192
    assert rows["sim2real-54-qwen3-14b-tp1-general-lite-1"].device == "L40S"


def test_sim2real_requests_run_their_stages_one_after_another():
    import dataclasses

    import validate_serving
    r = dataclasses.replace(sr.sim2real_rows(sr.__file__.replace("serving_rows.py", "data/sim2real.csv"))[3],
                            stages=((2.0, 3.0), (4.0, 1.0)))
    reqs = validate_serving.requests_of(r)
    # 2 req/s for 3 s (0.5 s apart) then 4 req/s for 1 s (0.25 s apart), starting at 3 s
    assert [q.arrival_s for q in reqs] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.25, 3.5, 3.75]
    assert {(q.prompt_tokens, q.output_tokens) for q in reqs} == {(r.prompt_len, r.output_len)}


def test_rounds_not_simulated_count_at_the_round_before_the_last():
    from types import SimpleNamespace as Req

    import validate_serving
    # 2 clients, 3 rounds simulated (sent at 0, 0; 1, 1.5; 2, 2.5) of a 10-round benchmark: the third
    # is the benchmark's last round, the second stands for the 7 not simulated:
    # round TTFT means 4, 2, 1 -> (4 + 2 + 1 + 7 * 2) / 10 = 2.1; TPOT means 0.3, 0.2, 0.1 -> (0.6 + 1.4) / 10
    reqs = [Req(arrival_s=a, ttft_s=t, tpot_s=p) for a, t, p in
            ((2.5, 1.5, 0.1), (0.0, 5.0, 0.3), (1.0, 2.0, 0.2), (0.0, 3.0, 0.3), (1.5, 2.0, 0.2), (2.0, 0.5, 0.1))]
    means = validate_serving.closed_loop_means(reqs, 2, 10)
    assert means == pytest.approx({"ttft_mean": 2.1, "tpot_mean": 0.2})
