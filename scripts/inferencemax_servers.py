"""What InferenceMAX's scripts set for the silicon-sample rows InferenceMAX measured: its client's
figures, the layout its config gave, and per model, engine, system and day, the server's KV cache
dtype and engine figures, each quoted from the script (scripts/serving_rows.py builds the rows).

The silicon sample's rows whose silicon_data_source names ``source_file=2026-04-06.csv``
(`INFERENCEMAX_SOURCE`) have InferenceMAX's grid: ISL/OSL 1024/1024, 1024/8192 or 8192/1024 at 4 to 512
clients, its models and GPUs, measured from 2025-10-29 to 2026-04-06. InferenceMAX's scripts
(github.com/SemiAnalysisAI/InferenceX, formerly InferenceMAX; benchmarks/) run vLLM's benchmark_serving.py:
"--dataset-name random --random-input-len $ISL --random-output-len $OSL --random-range-ratio
$RANDOM_RANGE_RATIO --num-prompts $(( $CONC * 10 )) --max-concurrency $CONC --request-rate inf
--ignore-eos", with "random-range-ratio: 0.8" (.github/workflows/full-sweep-tmpl.yml; DeepSeek-R1 FP8 on
B200 sent more until 2026-01-21: `LONG_CLIENTS`). That script draws every length uniform over [int(0.8 L), L]
with numpy after np.random.seed(0) (its sample_random_requests: "input_lens = np.random.randint(int(input_len *
range_ratio), input_len + 1, size=num_prompts)", then the output lengths), sends the requests in order
to C clients and reports the mean over all of them (no warm-up round until 2026-01-21; the
``--num-warmups $((2 * max_concurrency))`` added then runs apart before the measured requests, on the
engine it leaves drained). Varied lengths matter: identical requests lock C clients into one schedule
where every prompt queues behind the others. A row is simulated so (``range_ratio`` 0.8,
`prompts_per_client` x C requests, every one measured: ``rounds`` 0) where the server its script started
that day is transcribed (`INFERENCEMAX_SERVERS`), with the layout its config gave (`inferencemax_layout`);
rows run with speculative decoding are not predicted (`speculative_run`); the other rows from that file
run as AIConfigurator's template (serving_rows).
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: The silicon_data_source of the rows InferenceMAX measured (module docstring).
INFERENCEMAX_SOURCE = "source_file=2026-04-06.csv"
#: InferenceMAX's client: requests per client ("--num-prompts $(( $CONC * 10 )) --max-concurrency $CONC") and
#: the shortest length drawn as a share of the longest ("--random-range-ratio", RANDOM_RANGE_RATIO 0.8).
PROMPTS_PER_CLIENT = 10
RANGE_RATIO = 0.8
#: The B200 runners (runners/launch_b200-nvd.sh, launch_b200-dgxc.sh) until d053ae24e (2026-01-21, which
#: moved every script to "--num-prompts $(( $CONC * 10 ))"): 'if [[ "$MODEL" == "nvidia/DeepSeek-R1-0528-FP4"
#: || "$MODEL" == "deepseek-ai/DeepSeek-R1-0528" ]]; then if [[ "$OSL" == "8192" ]]; then export
#: NUM_PROMPTS=$(( CONC * 20 )) else export NUM_PROMPTS=$(( CONC * 50 ))'; the NVFP4 configs served
#: "nvidia/DeepSeek-R1-0528-FP4-V2", which the test misses: 10 per client. (model_path, gemm_quant_mode,
#: system) -> (last day before the change, requests per client at 8,192 output tokens, otherwise).
LONG_CLIENTS = {("deepseek-ai/DeepSeek-R1", "fp8", "b200_sxm"): ("2026-01-20", 20, 50)}
#: (model_path, backend, system) -> the servers InferenceMAX's script for it started, oldest first
#: (`Server`): a row measured on or after a server's first day (``measured=`` in its silicon_data_source)
#: ran the last one begun by then. Each figure is quoted from the script (github.com/SemiAnalysisAI/InferenceX,
#: benchmarks/).
#:
#: Llama-3.1-70B (c198b20) under vLLM (70b_fp8_h100_slurm.sh, 70b_fp8_h200_slurm.sh,
#: 70b_fp8_b200_docker.sh, 70b_fp4_b200_docker.sh): "kv-cache-dtype: fp8", "no-enable-prefix-caching:
#: true", "max-num-batched-tokens: 8192" (chunked prefill, vLLM V1's default), "--max-num-seqs=$CONC"
#: (B200: 512; no more than C run under C clients either way), on B200 '"cudagraph_mode":
#: "FULL_DECODE_ONLY"' (a step that carries a prompt runs without a CUDA graph); under TensorRT-LLM
#: (70b_fp8_h200_trt_slurm.sh, 70b_fp8_b200_trt_docker.sh, 70b_fp4_b200_trt_docker.sh): "kv_cache_config:
#: dtype: fp8 enable_block_reuse: false", "--max_num_tokens 16384", and at ISL = OSL = 1024 below TP 8
#: ('if [[ "$ISL" == "1024" && "$OSL" == "1024" && ${TP} -lt 8 ]]') "batch_wait_max_tokens_ratio: 0.9,
#: batch_wait_timeout_iters: 20" (`_BATCH_WAIT`, `batch_waits`; dispatchprof.serving.scheduler, rule 4).
#:
#: gpt-oss-120b under vLLM (gptoss_fp4_h100_slurm.sh, gptoss_fp4_h200_slurm.sh, gptoss_fp4_b200_docker.sh
#: from 2582bce of 2025-10-29, then single_node/gptoss_fp4_{h100,h200,b200}.sh): "no-enable-prefix-caching:
#: true", "max-num-batched-tokens: 8192", "--max-num-seqs=$CONC" (B200: 512), "async-scheduling: true"
#: until vLLM 0.15.1 made it the default (#789, 2026-02-25: "Remove deprecated async-scheduling flag (now
#: enabled by default since v0.14.0)"), so the host work overlaps the GPU's in every row; "cuda-graph-sizes:
#: 2048" (vLLM 0.10.2 and 0.11.0 capture "[1, 2, 4] + [i for i in range(8, cuda_graph_sizes + 1, 8)]"),
#: from vLLM 0.11.2 (25506e87c, 2025-12-05, "Upgrade vLLM to v0.11.2 (#273)") "max-cudagraph-capture-size:
#: 2048" ([1, 2, 4] + range(8, 256, 8) + range(256, 2049, 16), vllm/config/vllm.py) with, on B200,
#: "kv-cache-dtype: fp8" (the KV cache is the model's bf16 before and on H100 / H200 throughout);
#: "cudagraph_mode" PIECEWISE or FULL_AND_PIECEWISE: every step of up to 2,048 tokens runs a graph.
#: Under TensorRT-LLM (gptoss_fp4_h200_trt_slurm.sh, gptoss_fp4_b200_trt_slurm.sh, then
#: single_node/gptoss_fp4_{h200,b200}_trt.sh, unchanged in these figures from 2025-10-29 to 2026-04-06):
#: "--max_num_tokens 20000" ("MAX_NUM_TOKENS=20000"), "enable_block_reuse: false",
#: "free_gpu_memory_fraction: 0.85", "dtype: auto" on H200 (the model's bf16) and "dtype: fp8" on B200;
#: on H200 "--ep_size=$TP" until 17d5e204f (2025-11-03, "feat: candidate search space"), "--ep_size=$EP_SIZE" after.
#:
#: MiniMax-M2.5 under vLLM (single_node/minimaxm2.5_fp8_{h100,h200,b200}.sh, added 2026-03-02, 2026-03-01 and
#: 2026-03-11): H100 "--gpu-memory-utilization 0.90" (vLLM's default), "--max-num-seqs 256", '"cudagraph_mode":
#: "PIECEWISE"' (every step of up to the largest captured size still runs graphs: as vLLM's default);
#: H200 "--gpu-memory-utilization 0.95", from 5e2c705d3 (2026-03-13, "H200 MINIMAX vLLM extend configs")
#: 'if [ "$EP_SIZE" -ge 1 ]; then EP=" --enable-expert-parallel"', true of every run: the experts
#: expert-parallel over all TP GPUs; B200 "--gpu-memory-utilization 0.95", "--block-size=32", then from
#: bddbf4031 (2026-04-03, "B200 Minimax FP8 vllm upgrade") "--gpu-memory-utilization 0.90 ... --block-size=32
#: --kv-cache-dtype fp8 --max-cudagraph-capture-size 2048 --max-num-batched-tokens "$((ISL * 2 ))""; the KV
#: cache otherwise the model's bf16 and the step budget vLLM's default; all three "--no-enable-prefix-caching"
#: from 0f78cf4eb (2026-03-27, "Disable prefix minimax").
#:
#: Kimi-K2.5 NVFP4 under vLLM (single_node/kimik2.5_fp4_b200.sh, from a58dedd5a, 2026-03-11):
#: "--tensor-parallel-size=$TP --gpu-memory-utilization 0.90 --max-model-len $MAX_MODEL_LEN --max-num-seqs
#: $CONC", "--no-enable-prefix-caching" from 79a42e20a (2026-03-27, the day its rows were measured; no prompt
#: of a random dataset shares a prefix, so either way the same), and no "--enable-expert-parallel": the
#: config's "ep: 4" reaches the result's name only, the experts stay tensor-parallel over the TP GPUs.
#:
#: GLM-5 under SGLang: H200 FP8 (single_node/glm5_fp8_h200.sh, from ebb48d4bc, 2026-03-18) '--tp-size "$TP"
#: ... --mem-fraction-static 0.85' and SGLang's defaults otherwise (the radix cache on, no prompt shares a
#: prefix); B200 FP8 (glm5_fp8_b200.sh, from 13930ca61, 2026-03-20) "--kv-cache-dtype fp8_e4m3 ...
#: --cuda-graph-max-bs $CONC --max-running-requests $CONC --mem-fraction-static 0.85 --chunked-prefill-size
#: 32768 --max-prefill-tokens 32768 ... --disable-radix-cache"; B200 NVFP4 (glm5_nvfp4_b200.sh from d43805fc3,
#: 2026-03-28, renamed glm5_fp4_b200.sh) "--cuda-graph-max-bs $CONC --max-running-requests $CONC
#: --mem-fraction-static 0.80 --chunked-prefill-size 131072" with SGLang's max_prefill_tokens default,
#: 16384 (server_args.py "max_prefill_tokens: int = 16384"), which bounds a prefill batch's new tokens
#: below the chunk: the step budget is the smaller; the KV cache the model's where no dtype is given. A
#: decode batch never exceeds C, so graphs captured up to C ("--cuda-graph-max-bs $CONC") cover every one, as
#: the preset's do.
#:
#: Qwen3.5-397B-A17B under SGLang: B200 BF16 (single_node/qwen3.5_bf16_b200.sh from 9dc87a68c, 2026-02-19,
#: "Update Qwen3.5 STP recipe on B200") and B200 FP8 (qwen3.5_fp8_b200.sh, from efd49e50b, 2026-03-03):
#: "MEM_FRAC_STATIC=0.82", "CHUNKED_PREFILL_SIZE=32768", "MAX_PREFILL_TOKENS=32768",
#: "CUDA_GRAPH_MAX_BATCH_SIZE=$CONC", "MAX_RUNNING_REQUESTS=128", "--disable-radix-cache", FP8 with
#: "--kv-cache-dtype fp8_e4m3"; H200 FP8 (qwen3.5_fp8_h200.sh, from f65d6b4b1, 2026-03-04) "--max-running-requests
#: 128 --chunked-prefill-size 16384 --mem-fraction-static 0.8 --cuda-graph-max-bs "$CONC" --kv-cache-dtype
#: fp8_e4m3 ... --disable-radix-cache" (max_prefill_tokens 16,384 by default). The radix cache off, SGLang
#: keeps its overlap scheduler for the gated delta-net layers (it turns it off only for the mamba radix
#: cache: engines.yaml, sglang, linear_attention_overlap).
#:
#: DeepSeek-R1 under SGLang: H200 FP8 (dsr1_fp8_h200_slurm.sh, then single_node/dsr1_fp8_h200.sh, the same flags
#: from 2025-10-29 to 2026-04-06) "--chunked-prefill-size 32768 --max-prefill-tokens 32768
#: --mem-fraction-static 0.82 ... --disable-radix-cache" (no KV dtype: the model's bf16; no --ep-size);
#: B200 NVFP4 (dsr1_fp4_b200_docker.sh, then single_node/dsr1_fp4_b200.sh) "--cuda-graph-max-bs 256
#: --max-running-requests 256 --mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size
#: 16384" (max_prefill_tokens 16,384 by default) "--disable-radix-cache", the experts expert-parallel over
#: the TP GPUs throughout: "--enable-ep-moe" until d8fe8f73e (2025-11-10) put "--ep-size $EP_SIZE" with
#: "ep:4 for all tp:4 entries, ep:8 for all tp:8 entries" in its place; B200 FP8 (dsr1_fp8_b200_docker.sh from
#: d8fe8f73e, then single_node/dsr1_fp8_b200.sh) "--mem-fraction-static 0.82 --kv-cache-dtype fp8_e4m3
#: --chunked-prefill-size 32768 --max-prefill-tokens 32768 ... --disable-radix-cache ... --ep-size $EP_SIZE",
#: at TP 4 (from 1d29967c4, 2026-01-13) "CHUNKED_PREFILL_SIZE=8192", "MAX_PREFILL_TOKENS=8192",
#: "MEM_FRAC_STATIC=0.95" (`_at_tp_4`).
_LLAMA_70B_VLLM = {"max_batched_tokens": 8192, "prefix_caching": False}
_LLAMA_70B_TRTLLM = {"max_batched_tokens": 16384, "prefix_caching": False}
_BATCH_WAIT = {"batch_wait_steps": 20, "batch_wait_tokens_ratio": 0.9}
_GPT_OSS_VLLM = {"max_batched_tokens": 8192, "prefix_caching": False, "overlap_host": True}
_GRAPHS_2048_OLD = (1, 2, 4, *range(8, 2049, 8))
_GRAPHS_2048 = (1, 2, 4, *range(8, 256, 8), *range(256, 2049, 16))
_VLLM_0_11_2_DAY = "2025-12-05"
_GPT_OSS_TRTLLM = {"max_batched_tokens": 20000, "prefix_caching": False, "memory_utilization": 0.85}
_MINIMAX_NO_PREFIX_DAY = "2026-03-27"
_QWEN_3_5_B200 = {"max_batched_tokens": 32768, "prefix_caching": False, "memory_utilization": 0.82,
                  "linear_attention_overlap": True}
_GLM_5_B200 = {"max_batched_tokens": 32768, "prefix_caching": False, "memory_utilization": 0.85}


class Server(NamedTuple):
    """One server a script started from its ``since`` day (YYYY-MM-DD; "" from the first run on): its KV
    cache dtype (None: the model's), its engine figures (a callable figure takes the silicon-sample row as
    `inferencemax_layout` gives it),
    and how it spread the experts: as the config's EP said ("config"), expert-parallel over all its TP
    GPUs whatever EP said ("tp"), or tensor-parallel over them whatever EP said ("none")."""

    since: str
    kv_dtype: str | None
    figures: dict
    experts: str = "config"


def _at_tp_4(value, otherwise):
    """A figure a script sets to ``value`` at TP 4 and to ``otherwise`` at any other TP (the row's
    tp_size as `inferencemax_layout` gives it)."""
    return lambda r: value if r["tp_size"] == "4" else otherwise


def _twice_the_prompt(r: dict) -> int:
    """MiniMax-M2.5's B200 step budget: '--max-num-batched-tokens "$((ISL * 2 ))"'."""
    return 2 * int(r["isl"])


INFERENCEMAX_SERVERS = {
    ("meta-llama/Llama-3.1-70B", "vllm", "h100_sxm"): (Server("", "fp8", _LLAMA_70B_VLLM),),
    ("meta-llama/Llama-3.1-70B", "vllm", "h200_sxm"): (Server("", "fp8", _LLAMA_70B_VLLM),),
    ("meta-llama/Llama-3.1-70B", "vllm", "b200_sxm"): (
        Server("", "fp8", {**_LLAMA_70B_VLLM, "cuda_graph_steps": "decode"}),),
    ("meta-llama/Llama-3.1-70B", "trtllm", "h200_sxm"): (Server("", "fp8", _LLAMA_70B_TRTLLM),),
    ("meta-llama/Llama-3.1-70B", "trtllm", "b200_sxm"): (Server("", "fp8", _LLAMA_70B_TRTLLM),),
    **{("openai/gpt-oss-120b", "vllm", system): (
        Server("", None, {**_GPT_OSS_VLLM, "cuda_graph_sizes": _GRAPHS_2048_OLD}),
        Server(_VLLM_0_11_2_DAY, kv_dtype, {**_GPT_OSS_VLLM, "cuda_graph_sizes": _GRAPHS_2048}))
       for system, kv_dtype in (("h100_sxm", None), ("h200_sxm", None), ("b200_sxm", "fp8"))},
    ("openai/gpt-oss-120b", "trtllm", "h200_sxm"): (Server("", None, _GPT_OSS_TRTLLM, "tp"),
                                                    Server("2025-11-03", None, _GPT_OSS_TRTLLM)),
    ("openai/gpt-oss-120b", "trtllm", "b200_sxm"): (Server("", "fp8", _GPT_OSS_TRTLLM),),
    ("MiniMaxAI/MiniMax-M2.5", "vllm", "h100_sxm"): (
        Server("", None, {}), Server(_MINIMAX_NO_PREFIX_DAY, None, {"prefix_caching": False})),
    ("MiniMaxAI/MiniMax-M2.5", "vllm", "h200_sxm"): (
        Server("", None, {"memory_utilization": 0.95}),
        Server("2026-03-13", None, {"memory_utilization": 0.95}, "tp"),
        Server(_MINIMAX_NO_PREFIX_DAY, None, {"memory_utilization": 0.95, "prefix_caching": False}, "tp")),
    ("MiniMaxAI/MiniMax-M2.5", "vllm", "b200_sxm"): (
        Server("", None, {"memory_utilization": 0.95, "block_size": 32}),
        Server(_MINIMAX_NO_PREFIX_DAY, None, {"memory_utilization": 0.95, "block_size": 32, "prefix_caching": False}),
        Server("2026-04-03", "fp8", {"memory_utilization": 0.90, "block_size": 32, "cuda_graph_sizes": _GRAPHS_2048,
                                     "max_batched_tokens": _twice_the_prompt, "prefix_caching": False})),
    ("moonshotai/Kimi-K2.5", "vllm", "b200_sxm"): (Server("", None, {"prefix_caching": False}, "none"),),
    ("Qwen/Qwen3.5-397B-A17B", "sglang", "h200_sxm"): (Server("", "fp8", {
        "max_batched_tokens": 16384, "prefix_caching": False, "memory_utilization": 0.8,
        "linear_attention_overlap": True}),),
    ("Qwen/Qwen3.5-397B-A17B", "sglang", "b200_sxm"): (Server("", "fp8", _QWEN_3_5_B200),),
    ("deepseek-ai/DeepSeek-R1", "sglang", "h200_sxm"): (Server("", None, {
        "max_batched_tokens": 32768, "prefix_caching": False, "memory_utilization": 0.82}),),
    ("deepseek-ai/DeepSeek-R1", "sglang", "b200_sxm"): (Server("", "fp8", {
        "prefix_caching": False, "max_batched_tokens": _at_tp_4(8192, 32768),
        "memory_utilization": _at_tp_4(0.95, 0.82)}),),
    ("zhipuai/GLM-5", "sglang", "h200_sxm"): (Server("", None, {"memory_utilization": 0.85}),),
    ("zhipuai/GLM-5", "sglang", "b200_sxm"): (Server("", "fp8", _GLM_5_B200),),
}
#: The servers of `INFERENCEMAX_SERVERS` that differ by the weights' dtype (gemm_quant_mode, "": bf16): GLM-5's
#: NVFP4 script, Qwen3.5's BF16 one.
QUANTIZED_SERVERS = {
    ("Qwen/Qwen3.5-397B-A17B", "sglang", "b200_sxm", ""): (Server("", None, _QWEN_3_5_B200),),
    ("deepseek-ai/DeepSeek-R1", "sglang", "b200_sxm", "nvfp4"): (Server("", "fp8", {
        "max_batched_tokens": 16384, "prefix_caching": False, "memory_utilization": 0.85}, "tp"),),
    ("zhipuai/GLM-5", "sglang", "b200_sxm", "nvfp4"): (
        Server("", None, {"max_batched_tokens": 16384, "memory_utilization": 0.80}),),
}


#: InferenceMAX's speculative-decoding (MTP) runs, which the sample does not mark, as (model_path, backend,
#: system, gemm_quant_mode, container image, first day, TP): a row of that model, engine, system and weights
#: (None: any) in that image (None: any), measured on or after that day, at that TP (None: any). Images
#: only the MTP configs ran (nvidia-master.yaml from 2025-10-25 to 2026-04-06): "dsr1-fp4-b200-trt-mtp" and
#: "dsr1-fp8-b200-trt-mtp" from 2026-02-05/06 "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3" (their
#: plain configs: 1.1.0rc2.post2, then 1.2.0rc6.post2), "qwen3.5-fp8-b200-sglang-mtp"
#: "lmsysorg/sglang:v0.5.9-cu130" (plain: v0.5.9-cu129-amd64, then v0.5.9-cu130-amd64). DeepSeek-R1 FP8 on
#: B200 under SGLang from "dsr1-fp8-b200-sglang-mtp"'s start (2026-02-05, #626): its TP 8 rows are that
#: config's "{ tp: 8, ep: 1, conc 4-512 }" at both lengths (the sample holds 4 to 512 clients at 8,192 /
#: 1,024 tokens, where the plain config ran TP 8 at 4 only).
MTP_RUNS = (
    ("deepseek-ai/DeepSeek-R1", "trtllm", "b200_sxm", None, "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post3", "",
     None),
    ("Qwen/Qwen3.5-397B-A17B", "sglang", "b200_sxm", None, "lmsysorg/sglang:v0.5.9-cu130", "", None),
    ("deepseek-ai/DeepSeek-R1", "sglang", "b200_sxm", "fp8", None, "2026-02-05", "8"))


def speculative_run(r: dict, measured: str | None) -> str | None:
    """Why an InferenceMAX row measured on the day ``measured`` is not predicted: it ran multi-token-prediction
    speculative decoding (`MTP_RUNS`), whose acceptance on the benchmark's random prompts nobody published;
    else None. ``r`` is the row as `inferencemax_layout` gives it (its tp_size the config's TP)."""
    if INFERENCEMAX_SOURCE not in r["silicon_data_source"]:
        return None
    named = re.search(r"image=([^;]*)", r["silicon_data_source"])
    image = named.group(1).strip() if named else None
    for model, backend, system, weights, mtp_image, since, tp in MTP_RUNS:
        if ((model, backend, system) == (r["model_path"], r["backend"], r["system"])
                and weights in (None, r["gemm_quant_mode"]) and mtp_image in (None, image)
                and (measured or "") >= since and tp in (None, r["tp_size"])):
            return (f"InferenceMAX speculative-decoding (MTP) run ({image or f'measured {measured}'}): its draft "
                    f"acceptance is not known")
    return None


def server_of(r: dict, measured: str | None) -> Server | None:
    """The server InferenceMAX ran an aggregated silicon-sample row measured on the day ``measured``
    (YYYY-MM-DD; None: the newest) on, or None where the row is not InferenceMAX's or its server is not
    transcribed (`INFERENCEMAX_SERVERS`)."""
    if INFERENCEMAX_SOURCE not in r["silicon_data_source"] or r["mode"] != "agg":
        return None
    key = r["model_path"], r["backend"], r["system"]
    servers = QUANTIZED_SERVERS.get((*key, r["gemm_quant_mode"]), INFERENCEMAX_SERVERS.get(key))
    if servers is None:
        return None
    return [s for s in servers if measured is None or s.since <= measured][-1]


def server_figures(r: dict, server: Server) -> dict:
    """The engine figures ``server`` (`server_of`) ran the row ``r`` (as `inferencemax_layout` gives it) with."""
    figures = {name: v(r) if callable(v) else v for name, v in server.figures.items()}
    return {**figures, **_BATCH_WAIT} if batch_waits(r) else figures


def prompts_per_client(r: dict, measured: str | None) -> int:
    """The requests per client InferenceMAX's client sent for a row measured on the day ``measured``
    (`PROMPTS_PER_CLIENT`, `LONG_CLIENTS`)."""
    long = LONG_CLIENTS.get((r["model_path"], r["gemm_quant_mode"], r["system"]))
    if long is None or measured is None or measured > long[0]:
        return PROMPTS_PER_CLIENT
    return long[1] if r["osl"] == "8192" else long[2]


def batch_waits(r: dict) -> bool:
    """Whether InferenceMAX's TensorRT-LLM script for a Llama-3.1-70B row turns batch waiting on
    (`INFERENCEMAX_SERVERS`): 1,024 / 1,024 tokens below TP 8."""
    return (r["backend"] == "trtllm" and r["model_path"] == "meta-llama/Llama-3.1-70B"
            and r["isl"] == r["osl"] == "1024" and int(r["tp_size"]) < 8)


def inferencemax_layout(r: dict, server: Server | None) -> dict:
    """A transcribed InferenceMAX row run on ``server`` (`server_of`; None: the row is not one) with its
    parallelism columns as the rest of the sample writes them, or the row itself.

    InferenceMAX's result files carry its config's ``tp``, ``ep`` and ``dp-attn``
    (.github/configs/nvidia-master.yaml search-space rows, passed to the script as TP, EP_SIZE and
    DP_ATTENTION, which start the server with them: "--tp_size=$TP --ep_size=$EP_SIZE", "enable_attention_dp:
    $DP_ATTENTION", vLLM's "--enable-expert-parallel" when EP_SIZE > 1), and the sample stores them so: for
    TensorRT-LLM and SGLang moe_tp_size = TP, moe_ep_size = EP and tp_size x attention_dp_size = TP x EP
    (attention_dp_size > 1 with DP attention), for vLLM tp_size = TP, attention_dp_size = EP and moe_ep_size
    = TP x EP (gpt-oss-120b's "{ tp: 4, ep: 4 }" on H200 is tp_size 16, moe_tp_size 4, moe_ep_size 4 on one
    8-GPU node). Rewritten as the sample's other rows: TP GPUs, experts tensor-parallel over TP / EP of
    them and expert-parallel over EP; with DP attention, tp_size 1 and attention_dp_size TP; the experts over
    all TP GPUs where the server spread them so (`Server.experts`)."""
    if server is None:
        return r
    tp, dp, moe_tp, moe_ep = (int(r[k] or 0) or 1 for k in ("tp_size", "attention_dp_size", "moe_tp_size",
                                                              "moe_ep_size"))
    if moe_tp * moe_ep != tp * dp:                 # not this encoding (a dense model's columns)
        return r
    if r["backend"] == "vllm":
        gpus, ep, dp_attention = tp, dp, False
    else:
        gpus, ep, dp_attention = moe_tp, moe_ep, dp > 1
    if server.experts != "config":
        ep = gpus if server.experts == "tp" else 1
    return {**r, "tp_size": "1" if dp_attention else str(gpus),
            "attention_dp_size": str(gpus if dp_attention else 1), "moe_tp_size": str(gpus // ep), "moe_ep_size": str(ep)}

