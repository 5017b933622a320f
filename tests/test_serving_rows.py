"""The measured serving rows of scripts/validate_serving.py: which rows are expressed and why the
others are not, the fixed split, and the dtypes and engines each row is simulated with."""

import csv
import hashlib

import pytest

import serving_rows as sr

from dispatchprof import Quantized

SIDE = ("batch_size", "num_workers", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
COLUMNS = ["id", "silicon_data_source", "backend", "backend_version", "model_path", "system", "precision", "mode",
           "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size", "attention_dp_size",
           "moe_tp_size", "moe_ep_size"] + [f"{p}_{f}" for p in ("prefill", "decode") for f in SIDE] + [
           "silicon_ttft_ms", "silicon_tpot_ms"]


def row(**over):
    base = dict(id="r", silicon_data_source="source_file=x.csv; silicon_concurrency=16", backend="trtllm",
                backend_version="1.0.0rc3", model_path="Qwen/Qwen3-32B", system="h100_sxm", precision="fp8",
                mode="agg", isl="1024", osl="128", gemm_quant_mode="fp8", moe_quant_mode="fp8", batch_size="16",
                tp_size="2", pp_size="1", attention_dp_size="", moe_tp_size="1", moe_ep_size="1",
                silicon_ttft_ms="165.1", silicon_tpot_ms="11.866")
    return {**{c: "" for c in COLUMNS}, **base, **over}


def disagg(**over):
    """The silicon sample's H100 Qwen3-32B vLLM disaggregated row: 8 prefill workers of TP 1, 2 decode
    workers of TP 4 with max batch 224, its clients not named."""
    sides = dict(prefill_batch_size="1", prefill_num_workers="8", prefill_tp_size="1", prefill_pp_size="1",
                 prefill_attention_dp_size="1", prefill_moe_tp_size="0", prefill_moe_ep_size="0",
                 decode_batch_size="224", decode_num_workers="2", decode_tp_size="4", decode_pp_size="1",
                 decode_attention_dp_size="1", decode_moe_tp_size="0", decode_moe_ep_size="0")
    return row(**{**dict(id="d", silicon_data_source="source_file=qwen3_32b.csv", backend="vllm", backend_version="0.12.0",
                         mode="disagg", isl="4000", osl="1000", batch_size="", tp_size="", pp_size="",
                         moe_tp_size="", moe_ep_size="", silicon_ttft_ms="367.7", silicon_tpot_ms="8.7458"),
                  **sides, **over})


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
    assert (r.model, r.device, r.tp, r.engine, r.engine_version) == ("qwen3-32b", "H100-SXM", 2, "trtllm", "1.0")
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


def test_aggregated_rows_are_expressed_as_before(tmp_path):
    """Every field an aggregated row is simulated with, written out (the disaggregated rows added
    beside them change none): TensorRT-LLM TP2, vLLM bf16, SGLang, and a Qwen3-235B EP4 row."""
    moe = dict(model_path="Qwen/Qwen3-235B-A22B-FP8", tp_size="4", gemm_quant_mode="fp8_block", moe_tp_size="1",
               moe_ep_size="4")
    given = [row(id="t"), row(id="v", backend="vllm", backend_version="0.12.0", gemm_quant_mode="", batch_size="32"),
             row(id="s", backend="sglang", backend_version="0.5.6", silicon_data_source="gap.csv"), row(id="m", **moe)]
    rows, skipped = sr.aic_rows(write(tmp_path, given))
    assert skipped == []
    ms = {"ttft_mean": 0.1651, "tpot_mean": 0.011866}
    expected = [  # model, device, tp, engine, version, weights, kv, isl, osl, clients, max_seqs, requests, figures, ep
        ("qwen3-32b", "H100-SXM", 2, "trtllm", "1.0", "fp8", "fp8", 1024, 128, 16, 16, 144, {"max_batched_tokens": 2560}, 1),
        ("qwen3-32b", "H100-SXM", 2, "vllm", "0.11.2", None, None, 1024, 128, 16, 32, 144,
         {"max_batched_tokens": 32 + 1024 + 1500, "cuda_graph_sizes": tuple(range(1, 33))}, 1),
        ("qwen3-32b", "H100-SXM", 2, "sglang", "0.5", "fp8", None, 1024, 128, 16, 16, 144, {}, 1),
        ("qwen3-235b-a22b", "H100-SXM", 4, "trtllm", "1.0", "fp8", "fp8", 1024, 128, 16, 16, 144,
         {"max_batched_tokens": 2560}, 4)]
    for r, e, g in zip(rows, expected, given):
        assert (r.model, r.device, r.tp, r.engine, r.engine_version, r.weight_dtype, r.kv_dtype, r.prompt_len,
                r.output_len, r.concurrency, r.max_seqs, r.num_requests, r.engine_figures, r.ep) == e
        assert (r.source, r.split, r.measured, r.raw, r.stages, r.prefix_hit, r.rounds, r.disagg) == (
            "aiconfigurator silicon_sample.csv", sr.split_of(r.id), ms, g, (), 0.0, 20, None)
    assert [r.setup_key for r in rows] == [("qwen3-32b", "H100-SXM", 2, "fp8", "fp8"),
                                           ("qwen3-32b", "H100-SXM", 2, None, None),
                                           ("qwen3-32b", "H100-SXM", 2, "fp8", None),
                                           ("qwen3-235b-a22b", "H100-SXM", 4, "fp8", "fp8", "ep4")]


def test_a_disaggregated_row_as_simulated(tmp_path):
    r = sr.aic_rows(write(tmp_path, [disagg()]))[0][0]
    assert (r.model, r.device, r.engine, r.engine_version, r.weight_dtype, r.kv_dtype) == (
        "qwen3-32b", "H100-SXM", "vllm", "0.11.2", "fp8", None)
    # AIConfigurator's rules: prefill max batch 1 and step budget ISL + 1500; decode budget = its max batch; graphs
    # 1..max batch; clients not named: estimated_concurrency = decode workers x decode max batch = 2 x 224
    assert r.disagg.prefill == sr.Side(8, 1, 1, {"max_batched_tokens": 5500, "cuda_graph_sizes": (1,)})
    assert r.disagg.decode == sr.Side(2, 4, 224, {"max_batched_tokens": 224, "cuda_graph_sizes": tuple(range(1, 225))})
    assert (r.concurrency, r.num_requests, r.rounds) == (448, 9 * 448, 20)
    # 8 x 1 + 2 x 4 = 16 GPUs: two 8-GPU nodes, the cache crosses the ConnectX-7 NDR NICs
    assert r.disagg.kv_link == "ib-ndr" and r.layout == "disaggregated prefill/decode"
    assert r.measured == pytest.approx({"ttft_mean": 0.3677, "tpot_mean": 0.0087458})          # ms -> s
    prefill, decode = r.side_rows()
    assert (prefill.tp, prefill.max_seqs, prefill.disagg, decode.tp, decode.max_seqs) == (1, 1, None, 4, 224)
    # each side runs the counted model an aggregated row of its tp runs; disaggregated rows share one count
    assert (prefill.setup_key, decode.setup_key) == (("qwen3-32b", "H100-SXM", 1, "fp8", None),
                                                    ("qwen3-32b", "H100-SXM", 4, "fp8", None))
    assert r.setup_key == ("qwen3-32b", "H100-SXM", 1, "fp8", None, "disaggregated")


def test_disaggregated_rows_on_blackwell(tmp_path):
    """TensorRT-LLM NVFP4 rows at 15000/500: 40 prefill workers of TP 1 and 6 decode workers of TP 4 = 64 GPUs."""
    over = dict(backend="trtllm", backend_version="1.3.0rc5", model_path="nvidia/Qwen3-32B-NVFP4", precision="fp4",
                gemm_quant_mode="nvfp4", isl="15000", osl="500", prefill_num_workers="40", decode_num_workers="6",
                decode_batch_size="80", silicon_data_source="x.csv; silicon_concurrency=480")
    b200, gb200 = sr.aic_rows(write(tmp_path, [disagg(id="b", system="b200_sxm", **over),
                                                disagg(id="g", system="gb200", **over)]))[0]
    # TensorRT-LLM: budgets in blocks of 32: prefill 16500 -> 16512, decode 80 -> 96; KV in fp8 beside fp4 weights
    assert b200.disagg.prefill == sr.Side(40, 1, 1, {"max_batched_tokens": 16512})
    assert b200.disagg.decode == sr.Side(6, 4, 80, {"max_batched_tokens": 96})
    assert (b200.weight_dtype, b200.kv_dtype, b200.concurrency, b200.device) == ("fp4", "fp8", 480, "B200")
    # 64 GPUs: eight 8-GPU B200 nodes (ConnectX-8 XDR NICs); within one 72-GPU GB200 NVL72 rack (NVLink 5)
    assert (b200.disagg.kv_link, gb200.disagg.kv_link) == ("ib-xdr", "nvlink5")
    assert sr.kv_link_of("gb200", 73) == "ib-xdr" and sr.kv_link_of("h200_sxm", 8) == "nvlink4"


def test_rows_not_expressed_keep_their_reason(tmp_path):
    rows, skipped = sr.aic_rows(write(tmp_path, [
        row(id="a", mode="afd"), row(id="b", model_path="MiniMaxAI/MiniMax-M2.7"), row(id="c", system="rtx_pro_6000_server"),
        row(id="d", attention_dp_size="8"), row(id="e", gemm_quant_mode="int4_wo"),
        disagg(id="f", model_path="Qwen/Qwen3-235B-A22B-FP8"), disagg(id="g", decode_attention_dp_size="8"),
        disagg(id="h", prefill_batch_size=""), disagg(id="i", model_path="nvidia/DeepSeek-V3.1-NVFP4")]))
    assert rows == []
    dense_dp = "attention data parallelism of a dense model (serve spreads attention over groups beside EP)"
    assert [s.reason for s in skipped] == [
        "mode afd: neither aggregated nor disaggregated prefill/decode",
        "MiniMaxAI/MiniMax-M2.7: no catalog model mapped to it here (MODELS)",
        "rtx_pro_6000_server: no bundled device profile", dense_dp,
        "weights int4_wo: no simulated weight dtype",
        # the sample's Qwen3-235B disaggregated rows leave moe_tp / moe_ep 0: one GPU's experts beside 4 of attention
        "disaggregated, decode side: experts over moe_tp 1 x moe_ep 1 GPUs, not the tp 4 x attention_dp 1 GPUs that "
        "run attention",
        f"disaggregated, decode side: {dense_dp}",
        "disaggregated, prefill side: no batch size given (its engine's batch limit unknown)",
        "nvidia/DeepSeek-V3.1-NVFP4: no catalog model mapped to it here (MODELS)"]


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


def test_deepseek_and_gpt_oss_rows_tensor_or_expert_parallel_over_the_same_gpus(tmp_path):
    """DeepSeek-R1/V3 (and the R1 NVFP4 checkpoint) and gpt-oss-120b rows whose experts are tensor-
    parallel or expert-parallel over the replica's GPUs are expressed; 72 GPUs on a GB200 rack do not
    divide DeepSeek's 128 attention heads (128 = 2^7); a disaggregated MoE row whose experts do not cover
    its decode side's GPUs keeps its reason."""
    ds = dict(model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm", backend="sglang", backend_version="0.5.6",
              gemm_quant_mode="fp8")
    rows, skipped = sr.aic_rows(write(tmp_path, [
        row(id="r1tp8", tp_size="8", moe_tp_size="8", moe_ep_size="1", **ds),
        row(id="r1ep4", tp_size="4", moe_tp_size="1", moe_ep_size="4", **{**ds, "gemm_quant_mode": "nvfp4"}),
        row(id="nv", model_path="nvidia/DeepSeek-R1-NVFP4", system="b200_sxm", gemm_quant_mode="nvfp4", tp_size="8",
            moe_tp_size="1", moe_ep_size="8"),
        row(id="v3", model_path="deepseek-ai/DeepSeek-V3", system="h200_sxm", tp_size="8", moe_tp_size="8",
            moe_ep_size="1"),
        row(id="oss", model_path="openai/gpt-oss-120b", system="h200_sxm", gemm_quant_mode="nvfp4", tp_size="2",
            moe_tp_size="2", moe_ep_size="1"),
        row(id="rack", tp_size="72", moe_tp_size="72", moe_ep_size="1", **{**ds, "system": "gb200"}),
        row(id="mixed", tp_size="64", moe_tp_size="8", moe_ep_size="8", **ds),
        disagg(id="dis", model_path="deepseek-ai/DeepSeek-R1")]))
    # NVIDIA's NVFP4 DeepSeek checkpoints keep MLA's projections, the router, embeddings and LM head in bf16
    fp4 = Quantized("fp4", ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "mlp.gate", "embed_tokens",
                            "lm_head"))
    # gpt-oss's "nvfp4" rows run OpenAI's MXFP4 checkpoint: its experts only, W4A16
    mxfp4 = Quantized("mxfp4", ("self_attn", "mlp.router", "embed_tokens", "lm_head"))
    assert [(r.id, r.model, r.device, r.tp, r.ep, r.engine, r.weight_dtype, r.kv_dtype) for r in rows] == [
        ("r1tp8", "deepseek-r1", "B200", 8, 1, "sglang", "fp8", None),
        ("r1ep4", "deepseek-r1", "B200", 4, 4, "sglang", fp4, None),
        ("nv", "deepseek-r1", "B200", 8, 8, "trtllm", fp4, "fp8"),
        ("v3", "deepseek-v3", "H200", 8, 1, "trtllm", "fp8", "fp8"),
        ("oss", "gpt-oss-120b", "H200", 2, 1, "trtllm", mxfp4, "fp8")]
    assert [(s.id, s.reason) for s in skipped] == [
        ("rack", "tp 72 does not divide deepseek-r1's 128 attention heads (the engine splits attention another way)"),
        ("mixed", "experts over moe_tp 8 x moe_ep 8 at tp 64: serve spreads them tensor-parallel over tp or "
                  "expert-parallel over tp GPUs"),
        ("dis", "disaggregated, decode side: experts over moe_tp 1 x moe_ep 1 GPUs, not the tp 4 x attention_dp 1 "
                "GPUs that run attention")]


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


def test_a_disaggregated_row_runs_each_side_under_its_own_figures(tmp_path, monkeypatch):
    """validate_serving.predict_disagg_row hands simulate_disaggregated each side's counted setup
    under the engine preset with that side's batch limit and budget, both sides' replicas, the link
    and the clients: the vLLM row of `disagg` (prefill budget 5500 >= the 4000-token prompt, so
    chunking stays the preset's; the decode budget of 224 tokens chunks a recomputed prompt)."""
    import dataclasses

    import validate_serving
    from dispatchprof.serving.engines import engine_preset

    @dataclasses.dataclass(frozen=True)
    class Setup:                                         # what predict_disagg_row reads of a ServingSetup
        device: str
        capacity_bytes: float
        engine: object = None

    seen = {}

    def fake(prefill, decode, requests, **kwargs):
        seen.update(prefill=prefill, decode=decode, requests=requests, **kwargs)
        raise ValueError("stop here")

    monkeypatch.setattr(validate_serving, "simulate_disaggregated", fake)
    r = sr.aic_rows(write(tmp_path, [disagg()]))[0][0]
    out = validate_serving.predict_disagg_row(r, Setup("H100-SXM", 80e9), Setup("H100-SXM", 320e9))
    assert out == {"error": "stop here"}
    p, d = seen["prefill"].engine, seen["decode"].engine
    base = engine_preset("vllm", "0.11.2", memory_bytes=80e9, device_name="H100-SXM")
    assert base.chunked_prefill                         # vLLM V1 always chunks
    assert (p.max_seqs, p.max_batched_tokens, p.cuda_graph_sizes, p.chunked_prefill) == (1, 5500, (1,), True)
    assert (d.max_seqs, d.max_batched_tokens, d.cuda_graph_sizes, d.chunked_prefill) == (
        224, 224, tuple(range(1, 225)), True)
    assert (p.step_host_us, p.block_size) == (base.step_host_us, base.block_size)    # the rest: the preset's
    assert (seen["prefill_replicas"], seen["decode_replicas"], seen["kv_link"], seen["concurrency"]) == (
        8, 2, "ib-ndr", 448)
    assert len(seen["requests"]) == 9 * 448 and {(q.prompt_tokens, q.output_tokens) for q in seen["requests"]} == {
        (4000, 1000)}
    # TensorRT-LLM chunks nothing by default: a prefill side whose budget holds the prompt stays unchunked
    trt = sr.aic_rows(write(tmp_path, [disagg(backend="trtllm", backend_version="1.1.0")]))[0][0]
    validate_serving.predict_disagg_row(trt, Setup("H100-SXM", 80e9), Setup("H100-SXM", 320e9))
    assert not engine_preset("trtllm", "1.1", memory_bytes=80e9, device_name="H100-SXM").chunked_prefill
    assert (seen["prefill"].engine.max_batched_tokens, seen["prefill"].engine.chunked_prefill) == (5504, False)
    assert (seen["decode"].engine.max_batched_tokens, seen["decode"].engine.chunked_prefill) == (224, True)


def test_a_row_without_a_version_runs_under_the_preset_released_by_its_measurement_day():
    # vLLM 0.14 reached PyPI on 2026-01-20 (RELEASED): a row measured before runs under 0.11.2
    assert sr.preset_version("vllm", "", "2025-10-29") == "0.11.2"
    assert sr.preset_version("vllm", "", "2026-01-19") == "0.11.2"
    assert sr.preset_version("vllm", "", "2026-01-20") == "0.14"
    assert sr.preset_version("vllm", "", None) == "0.14"                  # no day either: the newest
    assert sr.preset_version("vllm", "0.12.0", "2026-04-02") == "0.11.2"   # a version decides over a day
    # TensorRT-LLM 1.1.0rc4 on 2025-09-10; 1.0 has no day (every 1.0 row names its version)
    assert sr.preset_version("trtllm", "", "2025-01-01") == "1.0"
    assert sr.preset_version("trtllm", "", "2025-10-29") == sr.preset_version("trtllm", "", None) == "1.1"
    assert sr.preset_version("trtllm", "1.0.0rc3") == "1.0" and sr.preset_version("trtllm", "1.2.0rc6.post2") == "1.1"
    assert sr.preset_version("sglang", "", "2025-01-01") == "0.5"         # one preset: no date needed
    assert sr.measured_day("source_file=2026-04-06.csv; model=X; silicon_concurrency=8; "
                           "measured=2025-10-29T00:00:00.000Z; wip=False") == "2025-10-29"
    assert sr.measured_day("source_file=x.csv; silicon_concurrency=8") is None


def test_inferencemax_rows_run_as_its_scripts_ran_them(tmp_path):
    """Rows from InferenceMAX's file whose server is transcribed: benchmark_serving.py's client (10
    requests per client, lengths over [int(0.8 L), L], every request measured) and the script's server
    figures; a model whose server is not transcribed, or a row from another file, keeps AIConfigurator's
    template (serving_rows module docstring, InferenceMAX's runs)."""
    source = "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=16; measured=2025-10-29T00:00:00.000Z"
    llama = dict(silicon_data_source=source, backend="vllm", backend_version="", model_path="meta-llama/Llama-3.1-70B",
                 isl="1024", osl="8192", batch_size="16", tp_size="4")
    rows = sr.aic_rows(write(tmp_path, [
        row(id="h100", **llama), row(id="b200", **{**llama, "system": "b200_sxm", "gemm_quant_mode": "nvfp4"}),
        row(id="trt", **{**llama, "backend": "trtllm", "system": "h200_sxm"}),
        row(id="qwen", **{**llama, "model_path": "Qwen/Qwen3-32B"}),
        row(id="aiperf", **{**llama, "silicon_data_source": "source_file=x.csv; silicon_concurrency=16"})]))[0]
    h100, b200, trt, qwen, aiperf = rows
    assert (h100.range_ratio, h100.concurrency, h100.max_seqs, h100.num_requests, h100.rounds) == (0.8, 16, 16, 160, 0)
    assert (h100.weight_dtype, h100.kv_dtype) == ("fp8", "fp8")                  # "kv-cache-dtype: fp8"
    assert h100.engine_figures == {"max_batched_tokens": 8192, "prefix_caching": False}
    assert b200.engine_figures == {"max_batched_tokens": 8192, "prefix_caching": False, "cuda_graph_steps": "decode"}
    assert (b200.weight_dtype, b200.kv_dtype) == ("fp4", "fp8")
    assert trt.engine_figures == {"max_batched_tokens": 16384, "prefix_caching": False} and trt.kv_dtype == "fp8"
    for other in (qwen, aiperf):                                                 # AIConfigurator's template
        assert (other.range_ratio, other.rounds, other.num_requests) == (1.0, 20, 16 * 9)
        assert other.engine_figures["max_batched_tokens"] == 16 + 1024 + 1500


def test_inferencemax_lengths_are_drawn_as_benchmark_serving_draws_them(tmp_path):
    """np.random.seed(0), every prompt length, then every output length: numpy's legacy global
    generator, as benchmark_serving.py's sample_random_requests calls it."""
    import numpy as np

    import validate_serving
    source = "source_file=2026-04-06.csv; silicon_concurrency=4"
    (r,), _ = sr.aic_rows(write(tmp_path, [row(silicon_data_source=source, backend="vllm", backend_version="",
                                               model_path="meta-llama/Llama-3.1-70B", isl="8192", osl="1024",
                                               batch_size="4", tp_size="4")]))
    prompts, outputs = validate_serving.random_lengths(r)
    np.random.seed(0)
    assert prompts == np.random.randint(6553, 8193, size=40).tolist()        # int(0.8 x 8192) = 6553
    assert outputs == np.random.randint(819, 1025, size=40).tolist()         # int(0.8 x 1024) = 819
    reqs = validate_serving.requests_of(r)
    assert [(q.arrival_s, q.prompt_tokens, q.output_tokens) for q in reqs] == [(0.0, p, o) for p, o in zip(prompts, outputs)]
    assert min(prompts) >= 6553 and max(prompts) <= 8192 and len(set(prompts)) > 30


def test_inferencemax_tensorrt_llm_waits_for_batches_at_1k_1k_below_tp_8(tmp_path):
    """70b_fp8_h200_trt_slurm.sh: 'if [[ "$ISL" == "1024" && "$OSL" == "1024" && ${TP} -lt 8 ]]' sets
    batch_wait_timeout_iters 20 and batch_wait_max_tokens_ratio 0.9."""
    source = "source_file=2026-04-06.csv; silicon_concurrency=8"
    base = dict(silicon_data_source=source, backend="trtllm", backend_version="", system="h200_sxm",
                model_path="meta-llama/Llama-3.1-70B", isl="1024", osl="1024", batch_size="8")
    rows = sr.aic_rows(write(tmp_path, [row(id="tp4", **base, tp_size="4"), row(id="tp8", **base, tp_size="8"),
                                        row(id="8k", **{**base, "isl": "8192"}, tp_size="4"),
                                        row(id="vllm", **{**base, "backend": "vllm"}, tp_size="4")]))[0]
    waits = {r.id: (r.engine_figures.get("batch_wait_steps"), r.engine_figures.get("batch_wait_tokens_ratio"))
             for r in rows}
    assert waits == {"tp4": (20, 0.9), "tp8": (None, None), "8k": (None, None), "vllm": (None, None)}
