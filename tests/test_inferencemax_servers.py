"""InferenceMAX's rows of the silicon sample as its scripts ran them (scripts/inferencemax_servers.py):
the layout its config gave, read back from the sample's columns; the server of the row's day; and the
speculative-decoding runs the sample does not mark."""

import pytest
from test_serving_rows import row, write

import serving_rows as sr


def imax(day: str, image: str = "", **over) -> dict:
    """A silicon-sample row of InferenceMAX's file measured on ``day``, 16 clients."""
    source = f"source_file=2026-04-06.csv; silicon_concurrency=16; measured={day}T00:00:00.000Z; wip=False"
    if image:
        source += f"; image={image}"
    base = dict(silicon_data_source=source, backend_version="", batch_size="16", isl="1024", osl="1024",
                pp_size="1", attention_dp_size="1")
    return row(**{**base, **over})


def rows_of(tmp_path, *rows):
    expressed, skipped = sr.aic_rows(write(tmp_path, list(rows)))
    return {r.id: r for r in expressed}, {s.id: s.reason for s in skipped}


def test_the_config_layout_is_read_back_from_the_samples_columns(tmp_path):
    """TensorRT-LLM and SGLang rows store moe_tp = TP, moe_ep = EP, tp x attention_dp = TP x EP; vLLM rows
    tp = TP, attention_dp = EP, moe_ep = TP x EP (inferencemax_layout)."""
    gpt_trt = dict(model_path="openai/gpt-oss-120b", backend="trtllm", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4")
    minimax = dict(model_path="MiniMaxAI/MiniMax-M2.5", backend="vllm")
    rows, skipped = rows_of(
        tmp_path,
        # "{ tp: 4, ep: 4 }" on an 8-GPU H200: tp_size 16 in the sample
        imax("2026-01-10", id="h200_tp4_ep4", system="h200_sxm", tp_size="16", moe_tp_size="4", moe_ep_size="4", **gpt_trt),
        # before 2025-11-03 the H200 script passed "--ep_size=$TP" whatever the config's ep
        imax("2025-11-02", id="h200_tp2_old", system="h200_sxm", tp_size="2", moe_tp_size="2", moe_ep_size="1", **gpt_trt),
        imax("2025-12-01", id="h200_tp2", system="h200_sxm", tp_size="2", moe_tp_size="2", moe_ep_size="1", **gpt_trt),
        # "{ tp: 2, ep: 2, dp-attn: true }": tp_size 1, attention_dp_size 4
        imax("2026-02-10", id="b200_dpa", system="b200_sxm", tp_size="1", attention_dp_size="4", moe_tp_size="2",
             moe_ep_size="2", **gpt_trt),
        # "{ tp: 4, ep: 1, dp-attn: true }": experts tensor-parallel beside DP attention, not simulated
        imax("2026-02-10", id="b200_dpa_ep1", system="b200_sxm", tp_size="1", attention_dp_size="4", moe_tp_size="4",
             moe_ep_size="1", **gpt_trt),
        imax("2026-04-05", id="vllm_tp2_ep2", system="b200_sxm", tp_size="2", attention_dp_size="2", moe_tp_size="1",
             moe_ep_size="4", gemm_quant_mode="fp8", **minimax),
        # H200: 'if [ "$EP_SIZE" -ge 1 ]' from 2026-03-13 turns expert parallelism on in every run
        imax("2026-03-05", id="h200_before", system="h200_sxm", tp_size="4", moe_tp_size="4", moe_ep_size="1",
             gemm_quant_mode="fp8", **minimax),
        imax("2026-03-20", id="h200_after", system="h200_sxm", tp_size="4", moe_tp_size="4", moe_ep_size="1",
             gemm_quant_mode="fp8", **minimax),
        # Kimi-K2.5's NVFP4 script never passes --enable-expert-parallel: "ep: 4" is in the name only
        imax("2026-03-27", id="kimi", model_path="moonshotai/Kimi-K2.5", backend="vllm", system="b200_sxm",
             tp_size="4", attention_dp_size="4", moe_tp_size="1", moe_ep_size="16", gemm_quant_mode="nvfp4"))
    layouts = {i: (r.tp, r.ep, r.dp_attention) for i, r in rows.items()}
    assert layouts == {"h200_tp4_ep4": (4, 4, 1), "h200_tp2_old": (2, 2, 1), "h200_tp2": (2, 1, 1),
                       "b200_dpa": (1, 2, 2), "vllm_tp2_ep2": (2, 2, 1), "h200_before": (4, 1, 1),
                       "h200_after": (4, 4, 1), "kimi": (4, 1, 1)}
    assert "beside attention data parallelism" in skipped["b200_dpa_ep1"]
    # each attention-DP rank schedules "--max_num_tokens=$MAX_NUM_TOKENS" (20000) of its own
    assert rows["b200_dpa"].engine_figures["max_batched_tokens"] == 2 * 20000


def test_a_row_runs_the_server_its_script_started_on_the_day_it_was_measured(tmp_path):
    """gpt-oss-120b's vLLM scripts: "cuda-graph-sizes: 2048" before vLLM 0.11.2 (2025-12-05), then
    "max-cudagraph-capture-size: 2048" with "kv-cache-dtype: fp8" on B200; MiniMax-M2.5's B200 script from
    2026-04-03: '--max-num-batched-tokens "$((ISL * 2 ))"', "--kv-cache-dtype fp8"."""
    gpt = dict(model_path="openai/gpt-oss-120b", backend="vllm", system="b200_sxm", gemm_quant_mode="nvfp4",
               tp_size="1", moe_tp_size="1", moe_ep_size="1")
    minimax = dict(model_path="MiniMaxAI/MiniMax-M2.5", backend="vllm", system="b200_sxm", gemm_quant_mode="fp8",
                   tp_size="2", moe_tp_size="2", moe_ep_size="1", isl="8192")
    rows, _ = rows_of(tmp_path, imax("2025-11-20", id="old", **gpt), imax("2026-02-26", id="new", **gpt),
                      imax("2026-03-20", id="mm_march", **minimax), imax("2026-04-05", id="mm_april", **minimax))
    old, new = rows["old"], rows["new"]
    assert old.kv_dtype is None and new.kv_dtype == "fp8"
    # [1, 2, 4] + range(8, 2049, 8): 3 + 256 sizes; [1, 2, 4] + range(8, 256, 8) + range(256, 2049, 16): 3 + 31 + 113
    assert len(old.engine_figures["cuda_graph_sizes"]) == 259 and old.engine_figures["cuda_graph_sizes"][-2:] == (2040, 2048)
    assert len(new.engine_figures["cuda_graph_sizes"]) == 147 and new.engine_figures["cuda_graph_sizes"][33:35] == (248, 256)
    assert old.engine_figures["overlap_host"] is new.engine_figures["overlap_host"] is True   # "async-scheduling: true"
    assert (old.engine_figures["max_batched_tokens"], old.max_seqs, old.num_requests) == (8192, 16, 160)
    march, april = rows["mm_march"], rows["mm_april"]
    assert march.kv_dtype is None and "max_batched_tokens" not in march.engine_figures      # vLLM's default
    assert (april.kv_dtype, april.engine_figures["max_batched_tokens"]) == ("fp8", 2 * 8192)
    assert (march.engine_figures["memory_utilization"], april.engine_figures["memory_utilization"]) == (0.95, 0.90)


@pytest.mark.parametrize("model, backend, image, day, weights, speculative", [
    ("deepseek-ai/DeepSeek-R1", "trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3", "2026-03-10", "fp8", True),
    ("deepseek-ai/DeepSeek-R1", "trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2", "2026-03-10", "fp8", False),
    ("Qwen/Qwen3.5-397B-A17B", "sglang", "lmsysorg/sglang:v0.5.9-cu130", "2026-03-10", "fp8", True),
    ("Qwen/Qwen3.5-397B-A17B", "sglang", "lmsysorg/sglang:v0.5.9-cu130-amd64", "2026-03-10", "fp8", False),
    # DeepSeek-R1 FP8 under SGLang at TP 8 once "dsr1-fp8-b200-sglang-mtp" ran (2026-02-05): its image is the plain one's
    ("deepseek-ai/DeepSeek-R1", "sglang", "lmsysorg/sglang:v0.5.9-cu130", "2026-03-25", "fp8", True),
    ("deepseek-ai/DeepSeek-R1", "sglang", "", "2025-11-18", "fp8", False),
    ("deepseek-ai/DeepSeek-R1", "sglang", "lmsysorg/sglang:v0.5.9-cu130", "2026-03-25", "nvfp4", False)])
def test_runs_inferencemax_made_with_mtp_speculative_decoding_are_not_predicted(tmp_path, model, backend, image, day,
                                                                                weights, speculative):
    r = imax(day, image, id="r", model_path=model, backend=backend, system="b200_sxm", gemm_quant_mode=weights,
             moe_quant_mode=weights, tp_size="8", moe_tp_size="8", moe_ep_size="1")
    rows, skipped = rows_of(tmp_path, r)
    assert ("r" in skipped) is speculative and ("r" in rows) is not speculative
    if speculative:
        assert skipped["r"].startswith("InferenceMAX speculative-decoding (MTP) run")


def test_deepseek_r1_nvfp4_under_sglang_spreads_its_experts_over_every_gpu(tmp_path):
    """dsr1_fp4_b200_docker.sh passed "--enable-ep-moe" before 2025-11-10 whatever the config's ep (the
    sample's ep 1), "--ep-size $EP_SIZE" with ep = tp after; "--chunked-prefill-size 16384"."""
    r = imax("2025-11-02", id="r", model_path="deepseek-ai/DeepSeek-R1", backend="sglang", system="b200_sxm",
             gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", tp_size="4", moe_tp_size="4", moe_ep_size="1")
    (row_,) = rows_of(tmp_path, r)[0].values()
    assert (row_.tp, row_.ep, row_.kv_dtype) == (4, 4, "fp8")
    assert row_.engine_figures == {"max_batched_tokens": 16384, "prefix_caching": False, "memory_utilization": 0.85}


def test_deepseek_r1_fp8_on_b200_sent_50_requests_per_client_until_2026_01_21(tmp_path):
    """launch_b200-nvd.sh before d053ae24e: NUM_PROMPTS=$(( CONC * 50 )), CONC * 20 at OSL 8192, for
    "deepseek-ai/DeepSeek-R1-0528"; not for "nvidia/DeepSeek-R1-0528-FP4-V2" (NVFP4), nor after."""
    dsr1 = dict(model_path="deepseek-ai/DeepSeek-R1", backend="sglang", system="b200_sxm", gemm_quant_mode="fp8",
                moe_quant_mode="fp8_block", tp_size="64", moe_tp_size="8", moe_ep_size="8")
    rows, _ = rows_of(tmp_path, imax("2025-11-18", id="1k", **dsr1), imax("2025-11-18", id="8k_out", **{**dsr1, "osl": "8192"}),
                      imax("2026-03-25", id="march", **{**dsr1, "tp_size": "4", "moe_tp_size": "4", "moe_ep_size": "1"}),
                      imax("2025-11-10", id="fp4", **{**dsr1, "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}))
    assert {i: r.num_requests for i, r in rows.items()} == {"1k": 50 * 16, "8k_out": 20 * 16, "march": 10 * 16,
                                                             "fp4": 10 * 16}
    # "CHUNKED_PREFILL_SIZE=8192", "MEM_FRAC_STATIC=0.95" at TP 4; 32768 and 0.82 at TP 8
    assert (rows["march"].engine_figures["max_batched_tokens"], rows["march"].engine_figures["memory_utilization"]) == (
        8192, 0.95)
    assert (rows["1k"].engine_figures["max_batched_tokens"], rows["1k"].engine_figures["memory_utilization"]) == (
        32768, 0.82)
