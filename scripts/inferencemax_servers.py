"""What InferenceMAX's scripts set for the silicon-sample rows InferenceMAX measured: its client's
figures and, per model, engine and system, the server's KV cache dtype and engine figures, each quoted
from the script (scripts/serving_rows.py builds the rows).

The silicon sample's rows whose silicon_data_source names ``source_file=2026-04-06.csv``
(`INFERENCEMAX_SOURCE`) have InferenceMAX's grid: ISL/OSL 1024/1024, 1024/8192 or 8192/1024 at 4 to 128
clients, its models and GPUs. InferenceMAX's scripts (github.com/SemiAnalysisAI/InferenceX, formerly
InferenceMAX, at c198b20 of 2025-10-30, the last commit with its Llama-3.1-70B runs; benchmarks/*.sh) run
vLLM's benchmark_serving.py: "--dataset-name random --random-input-len $ISL --random-output-len $OSL
--random-range-ratio $RANDOM_RANGE_RATIO --num-prompts $(( $CONC * 10 )) --max-concurrency $CONC
--request-rate inf --ignore-eos", with "random-range-ratio: 0.8" (.github/workflows/full-sweep-tmpl.yml;
the B200 runner, runners/launch_b200-nvd.sh, sends CONC x 10 prompts too, but for DeepSeek-R1). That
script draws every length uniform over [int(0.8 L), L] with numpy after np.random.seed(0) (its sample_random_requests: "input_lens = np.random.randint(int(input_len *
range_ratio), input_len + 1, size=num_prompts)", then the output lengths), sends the requests in order
to C clients and reports the mean over all of them (no warm-up round: a later version's
``--num-warmups`` runs apart before the measured requests, on the engine it leaves drained). Varied
lengths matter: identical requests lock C clients into one schedule where every prompt queues behind
the others. A row is simulated so (``range_ratio`` 0.8, ``PROMPTS_PER_CLIENT`` x C requests, every one
measured: ``rounds`` 0) where the server its script starts is transcribed
(`INFERENCEMAX_SERVERS`); the other rows from that file still run as AIConfigurator's template
(serving_rows).
"""

from __future__ import annotations

#: The silicon_data_source of the rows InferenceMAX measured (module docstring).
INFERENCEMAX_SOURCE = "source_file=2026-04-06.csv"
#: InferenceMAX's client: requests per client ("--num-prompts $(( $CONC * 10 )) --max-concurrency $CONC") and
#: the shortest length drawn as a share of the longest ("--random-range-ratio", RANDOM_RANGE_RATIO 0.8).
PROMPTS_PER_CLIENT = 10
RANGE_RATIO = 0.8
#: (model_path, backend, system) -> what the server of InferenceMAX's script for it sets (c198b20,
#: benchmarks/): the KV cache's dtype and the engine figures. Llama-3.1-70B under vLLM
#: (70b_fp8_h100_slurm.sh, 70b_fp8_h200_slurm.sh, 70b_fp8_b200_docker.sh, 70b_fp4_b200_docker.sh):
#: "kv-cache-dtype: fp8", "no-enable-prefix-caching: true", "max-num-batched-tokens: 8192" (chunked
#: prefill, vLLM V1's default), "--max-num-seqs=$CONC" (B200: 512; no more than C run under C clients
#: either way), on B200 '"cudagraph_mode": "FULL_DECODE_ONLY"' (a step that carries a prompt runs
#: without a CUDA graph); under TensorRT-LLM (70b_fp8_h200_trt_slurm.sh, 70b_fp8_b200_trt_docker.sh,
#: 70b_fp4_b200_trt_docker.sh): "kv_cache_config: dtype: fp8 enable_block_reuse: false",
#: "--max_num_tokens 16384", and at ISL = OSL = 1024 below TP 8 ('if [[ "$ISL" == "1024" && "$OSL" ==
#: "1024" && ${TP} -lt 8 ]]') "batch_wait_max_tokens_ratio: 0.9, batch_wait_timeout_iters: 20"
#: (`_BATCH_WAIT`, `batch_waits`; dispatchprof.serving.scheduler, rule 4).
_LLAMA_70B_VLLM = {"max_batched_tokens": 8192, "prefix_caching": False}
_LLAMA_70B_TRTLLM = {"max_batched_tokens": 16384, "prefix_caching": False}
_BATCH_WAIT = {"batch_wait_steps": 20, "batch_wait_tokens_ratio": 0.9}
INFERENCEMAX_SERVERS = {
    ("meta-llama/Llama-3.1-70B", "vllm", "h100_sxm"): ("fp8", _LLAMA_70B_VLLM),
    ("meta-llama/Llama-3.1-70B", "vllm", "h200_sxm"): ("fp8", _LLAMA_70B_VLLM),
    ("meta-llama/Llama-3.1-70B", "vllm", "b200_sxm"): ("fp8", {**_LLAMA_70B_VLLM, "cuda_graph_steps": "decode"}),
    ("meta-llama/Llama-3.1-70B", "trtllm", "h200_sxm"): ("fp8", _LLAMA_70B_TRTLLM),
    ("meta-llama/Llama-3.1-70B", "trtllm", "b200_sxm"): ("fp8", _LLAMA_70B_TRTLLM),
}

def inferencemax_server(r: dict) -> tuple[str | None, dict] | None:
    """The KV cache dtype and engine figures of the server InferenceMAX ran an aggregated silicon-sample
    row on, or None where the row is not InferenceMAX's or its server is not transcribed (`INFERENCEMAX_SERVERS`)."""
    if INFERENCEMAX_SOURCE not in r["silicon_data_source"] or r["mode"] != "agg":
        return None
    server = INFERENCEMAX_SERVERS.get((r["model_path"], r["backend"], r["system"]))
    if server is None or not batch_waits(r):
        return server
    kv_dtype, figures = server
    return kv_dtype, {**figures, **_BATCH_WAIT}


def batch_waits(r: dict) -> bool:
    """Whether InferenceMAX's TensorRT-LLM script for a Llama-3.1-70B row turns batch waiting on
    (`INFERENCEMAX_SERVERS`): 1,024 / 1,024 tokens below TP 8."""
    return (r["backend"] == "trtllm" and r["model_path"] == "meta-llama/Llama-3.1-70B" and r["isl"] == r["osl"] == "1024"
            and int(r["tp_size"]) < 8)
