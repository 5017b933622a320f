"""Measured serving rows for scripts/validate_serving.py, as one shape: what ran (model, device,
tensor parallelism, dtypes, engine, lengths, clients) and what was measured (seconds).

AIConfigurator's silicon sample (`aic_rows`): NVIDIA's measured serving benchmarks shipped in the
aiconfigurator-core wheel (systems/silicon_sample.csv, Apache-2.0): each row is a closed-loop
benchmark of ``silicon_concurrency`` clients (named in its ``silicon_data_source``; where it is
not, its ``batch_size``, which equals it in 3,410 of the 3,619 aggregated rows) with fixed input
and output lengths, and its mean TTFT and TPOT in milliseconds. A row is predicted when
dispatchprof can express it: a model of the catalog (`MODELS`), a device with a bundled profile,
tensor and pipeline parallelism, and for a mixture-of-experts model (`MOE`) its experts either
tensor-parallel over the same GPUs (moe_tp_size = tp_size) or spread whole over them
(moe_ep_size = tp_size: `ServingRow.ep`, `serve --ep`; with attention data parallelism,
moe_ep_size = tp_size x attention_dp_size: layouts, below) and ``tp`` dividing its attention
heads (DeepSeek-R1/V3's 128: not the 12 .. 72 GPUs of some GB200 rows), aggregated or
disaggregated (`Disaggregated`, below) with both sides so laid out; every other row is kept with
the reason it is not (`Skipped`). The engine runs
as AIConfigurator's generator configures a benchmark of a row (`benchmark_figures`, from its rule
files in the wheel, aiconfigurator/generator/rule_plugin/benchmark/{vllm,trtllm}.rule: "agg
max_num_tokens = (max_batch_size or 0) + (SlaConfig.isl or 0) + 1500", rounded up to whole blocks of 32 for
TensorRT-LLM, and "cuda_graph_batch_sizes = range(1, max_batch_size + 1)"): vLLM's step budget
(--max-num-batched-tokens) and capture sizes, TensorRT-LLM's max_num_tokens. SGLang's rule sets no
chunk size (chunked prefill off, max_prefill_tokens = ISL + 1500), which the simulated scheduler
does not express; its rows run under the preset's chunk.

A disaggregated row (mode "disagg": prefill_num_workers prefill workers of prefill_tp_size GPUs,
decode_num_workers decode workers of decode_tp_size GPUs, Dynamo with NIXL moving the KV cache) is
simulated as ``serve --prefill-replicas P --tp Tp --decode-replicas D --decode-tp Td --kv-link L``
with each side's engine as AIConfigurator's generator configures it (`side_figures`, from the same
rule files: "prefill max_batch_size = (max_batch_size if max_batch_size else 1)", vLLM "prefill
max_num_tokens = (SlaConfig.isl or 0) + 1500", "decode max_num_tokens = max_batch_size",
TensorRT-LLM the same rounded up to blocks of 32; CUDA graphs 1..max_batch_size), its clients
``silicon_concurrency`` or, where not named, the rule's "estimated_concurrency = decode_workers x
decode max_batch_size", and the KV cache crossing the link of the row's system (`KV_LINKS`).

Layouts. The sample's tp_size is attention's tensor parallelism inside one attention data-parallel
rank; a replica has tp_size x attention_dp_size x pp_size GPUs and a mixture-of-experts model's
experts spread over moe_tp_size x moe_ep_size = tp_size x attention_dp_size of them (AIConfigurator's
TensorRT-LLM rule: "Enforce TensorRT-LLM MoE parallelism: moe_tp x moe_ep = tp ... tensor_parallel_size
= moe_tensor_parallel_size * moe_expert_parallel_size", "gpus_per_worker = (tensor_parallel_size or 1) *
(pipeline_parallel_size or 1) * (data_parallel_size or 1)", "enable_attention_dp = ((data_parallel_size
or 1) > 1) and ModelConfig.is_moe"). That is how the engines spell it: TensorRT-LLM
``--tensor-parallel-size G --expert-parallel-size G --enable-attention-dp`` runs G attention DP ranks
of attention TP 1 (Dynamo's TensorRT-LLM guide: "TP=2 acts as the 'world size', in effect creating 2
attention DP ranks"), vLLM ``--tensor-parallel-size t --data-parallel-size A --enable-expert-parallel``
A ranks of TP t with EP t x A, SGLang ``--tp G --dp A --enable-dp-attention`` A ranks of G / A. serve
expresses it as ``--tp tp_size --ep tp_size x attention_dp_size --dp-attention attention_dp_size --pp
pp_size`` (`parallel_of`) where the experts are spread whole (moe_tp_size 1); experts tensor-parallel
beside attention data parallelism (moe_tp_size > 1 with attention_dp_size > 1), a moe_tp x moe_ep that
is not the replica's attention GPUs, or attention data parallelism of a dense model are kept with
their reason. batch_size (and a disaggregated side's batch_size) is each rank's engine batch (the
sample's DP rows run silicon_concurrency = attention_dp_size x batch_size clients: 8 x 32 = 256, 4 x
16 = 64, 2 x 128 = 256), and the step budget the rule sets is each rank's: serve's one scheduler of
the replica (`dispatchprof.serving.layout`: A groups' KV blocks) gets A x both, its CUDA graphs
every batch up to A x batch_size. No row of the sample (aiconfigurator-core 0.12.0) has pp_size > 1.

TensorRT-LLM's published offline throughput (`published_rows`: scripts/data/published_serving.csv,
each row with its source): trtllm-bench queues every request at once with fixed lengths and FP8
weights; simulated under the TensorRT-LLM preset with the KV cache in fp8 (ModelOpt FP8
checkpoints carry kv_cache_quant_algo FP8) and 95% of the free memory for it (the page's usual
kv_cache_free_gpu_mem_fraction), at most `OFFLINE_CAP` requests; the metric is output tokens/s.

The sim-to-real vLLM runs (`sim2real_rows`: scripts/data/sim2real.csv, written by
scripts/sim2real_extract.py with each row's source lines quoted): open-loop traffic at a constant
rate per stage (inference-perf), fixed lengths, a system prompt shared by many requests (vLLM's
prefix cache holds its whole blocks: ``prefix_hit`` = system prompt / prompt tokens), vLLM 0.15.1
with the batch, step budget and memory share the run set; each stage is simulated for
`STAGE_SHARE` of its duration (the runs are unsaturated: their statistics settle within seconds),
which keeps the stages' shares of the requests. Metrics: TTFT and E2E mean, P90, P99, mean TPOT.

InferenceMAX's runs. The sample's rows InferenceMAX measured run as its scripts ran them where the
server a script starts is transcribed (scripts/inferencemax_servers.py says which, and how); the other
rows from that file run as the AIConfigurator template above.

The split is fixed by the row's id alone, before any prediction: a row whose SHA-256 of its id
has a first byte divisible by 3 is a fit row, every other row is held out (`split_of`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from checkpoints import stored_weights
from inferencemax_servers import (RANGE_RATIO, inferencemax_layout, prompts_per_client, server_figures, server_of,
                                  speculative_run)

#: silicon-sample model -> catalog model (the -Instruct and FP8/NVFP4 checkpoints share the architecture)
#: (DeepSeek-V3.1 is not mapped: the catalog has no config of it; Kimi-K2.5 and Qwen3.5 are mapped to
#: their text models, whose configs the catalog quotes)
MODELS = {"Qwen/Qwen3-32B": "qwen3-32b", "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
          "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
          "meta-llama/Llama-3.1-70B": "llama-3.1-70b", "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
          "deepseek-ai/DeepSeek-R1": "deepseek-r1", "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",
          "deepseek-ai/DeepSeek-V3": "deepseek-v3", "openai/gpt-oss-120b": "gpt-oss-120b",
          "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5", "Qwen/Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
          "moonshotai/Kimi-K2.5": "kimi-k2.5", "zhipuai/GLM-5": "glm-5"}
#: the mixture-of-experts models of MODELS: their moe_tp_size and moe_ep_size say how the experts spread
MOE = {"Qwen/Qwen3-235B-A22B-FP8", "deepseek-ai/DeepSeek-R1", "nvidia/DeepSeek-R1-NVFP4", "deepseek-ai/DeepSeek-V3",
       "openai/gpt-oss-120b", "MiniMaxAI/MiniMax-M2.5", "Qwen/Qwen3.5-397B-A17B", "moonshotai/Kimi-K2.5",
       "zhipuai/GLM-5"}
#: silicon-sample system -> bundled device profile
DEVICES = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200", "gb200": "GB200", "b300_sxm": "B300",
           "gb300": "GB300"}
#: gemm_quant_mode -> simulated weight dtype (None: the model's bf16)
WEIGHTS = {"": None, "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
#: backend -> the engine presets its rows run under, oldest first: a row runs under the newest preset
#: not newer than its backend_version (vLLM 0.12 and 0.13 under 0.11.2, whose scheduler they keep;
#: 0.14 on, with async scheduling, under 0.14); where the version is not a release number (nightly
#: builds) or not given, under the newest preset released by the row's measurement date
#: (``measured=YYYY-MM-DD`` in its silicon_data_source; `RELEASED`), the oldest if none was, and the
#: newest where no date is given either
ENGINES = {"vllm": ("0.11.2", "0.14"), "sglang": ("0.5",), "trtllm": ("1.0", "1.1")}
#: (backend, preset) -> the day that release reached PyPI (pypi.org/pypi/vllm/json upload_time:
#: vllm 0.11.2 "2025-11-20T08:31:15", 0.14.0 "2026-01-20T10:50:29"), or for TensorRT-LLM 1.1 the day of
#: its 1.1.0rc4 ("TensorRT-LLM Backend v1.1.0rc4 release", triton-inference-server/tensorrtllm_backend#796,
#: 2025-09-10); a preset not listed counts as released before any measurement (TensorRT-LLM 1.0: every row
#: of the sample measured with it says so)
RELEASED = {("vllm", "0.11.2"): "2025-11-20", ("vllm", "0.14"): "2026-01-20", ("trtllm", "1.1"): "2025-09-10"}
#: system -> (GPUs of one NVLink domain, its NVLink, the scale-out NIC of each GPU), as AIConfigurator's
#: system files (aiconfigurator_core/systems/*.yaml, ``node:``) have them: H100 / H200 SXM 8 GPUs per
#: node, "inter_node_bw: 50000000000 # ... CX7 NDR 400Gb/s"; B200 SXM 8 per node, "inter_node_bw:
#: 100000000000 # ... CX8 XDR 800Gb/s"; GB200 "num_gpus_per_rack: 72", "inter_node_bw: 900000000000 #
#: ... NVLink via NVSwitch within rack", "inter_rack_bw: 100000000000 # ... CX8 XDR 800Gb/s"; B300 SXM
#: "num_gpus_per_node: 8", "inter_node_bw: 100000000000 # ... CX8 XDR 800Gb/s"; GB300 "num_gpus_per_rack:
#: 72", "inter_node_bw: 900000000000 # ... NVLink via NVSwitch within rack", "inter_rack_bw: 100000000000
#: # ... CX8 XDR 800Gb/s InfiniBand between racks". A
#: disaggregated deployment within one domain moves its KV cache over NVLink, a larger one over the NICs.
KV_LINKS = {"h100_sxm": (8, "nvlink4", "ib-ndr"), "h200_sxm": (8, "nvlink4", "ib-ndr"),
            "b200_sxm": (8, "nvlink5", "ib-xdr"), "gb200": (72, "nvlink5", "ib-xdr"),
            "b300_sxm": (8, "nvlink5", "ib-xdr"), "gb300": (72, "nvlink5", "ib-xdr")}
#: Requests per client of a silicon-sample benchmark: AIConfigurator's benchmark template
#: (aiconfigurator/generator/config/backend_templates/benchmark/bench_run.sh.j2 in the wheel) runs
#: ``aiperf profile --concurrency C --num-requests $((C*${BENCH_MULTI_ROUND}))`` with
#: BENCH_MULTI_ROUND 20 and ``--warmup-request-count $((C*2))``; aiperf "waits indefinitely for
#: all warmup responses before starting profiling" (its docs, warmup.md), so the measured requests
#: start as a burst of C on a drained engine.
ROUNDS = 20
#: Rounds simulated of a ``ROUNDS``-round closed-loop benchmark: identical requests settle into a
#: periodic schedule within about 8 rounds (per-round mean TTFT of three fit rows at 20 rounds:
#: constant from round 8 or 9 on), so rounds 9 to 19 are counted at round 8's means and the last
#: simulated round stands for the benchmark's last (validate_serving.closed_loop_means).
SIMULATED_ROUNDS = 9
#: At most this many requests of an offline throughput row are simulated.
OFFLINE_CAP = 3000
#: Share of each sim-to-real stage's duration that is simulated.
STAGE_SHARE = 0.2


@dataclass(frozen=True)
class ServingRow:
    """One measured serving benchmark and what dispatchprof simulates it as (seconds)."""

    id: str
    source: str
    split: str
    model: str
    device: str
    tp: int
    engine: str
    engine_version: str
    weight_dtype: Any                  # a WEIGHT_BITS name, a dispatchprof.Quantized, or None (bf16)
    kv_dtype: str | None
    prompt_len: int
    output_len: int
    concurrency: int | None                          # closed-loop clients; None: open loop (``stages``) or all at 0
    max_seqs: int | None                             # None: the preset's
    num_requests: int
    measured: dict                                   # metric -> value ("ttft_mean" s, "tpot_mean" s, "output_tokens_per_s")
    raw: dict = field(repr=False, compare=False)     # the source's own row
    engine_figures: dict = field(default_factory=dict, compare=False)   # figures the benchmark set
    stages: tuple = ()                               # open loop: (requests/s, seconds simulated) per stage
    prefix_hit: float = 0.0                          # share of each prompt found in the prefix cache
    rounds: int = 0                                  # closed loop: the benchmark's requests per client
                                                     # (0: every request simulated and measured)
    range_ratio: float = 1.0                         # lengths uniform over [int(ratio x len), len] (module docstring)
    ep: int = 1                                      # GPUs the routed experts spread over (1: experts tensor-parallel)
    disagg: Disaggregated | None = None              # prefill and decode workers apart (``tp``: the prefill side's)
    dp_attention: int = 1                            # attention data-parallel groups (``tp``: each group's; module docstring, layouts)
    pp: int = 1                                      # pipeline stages

    @property
    def layout(self) -> str:
        """How the replica spreads the model: its experts over ``ep`` GPUs, or everything tensor-parallel;
        or prefill and decode on workers of their own."""
        if self.disagg is not None:
            return "disaggregated prefill/decode"
        out = f"experts over {self.ep} GPUs (EP)" if self.ep > 1 else "tensor-parallel"
        if self.dp_attention > 1:
            out += f", attention data-parallel over {self.dp_attention} groups"
        return out + (f", {self.pp} pipeline stages" if self.pp > 1 else "")

    @property
    def layout_kind(self) -> str:
        """The kind of parallelism beyond tensor and expert parallelism: "pp", "attention-DP", "pp +
        attention-DP" or "tp/ep" (a disaggregated row: its sides' kinds, prefill / decode)."""
        if self.disagg is not None:
            prefill, decode = self.side_rows()
            return "disagg " + (prefill.layout_kind if prefill.layout_kind == decode.layout_kind
                                else f"{prefill.layout_kind} / {decode.layout_kind}")
        kinds = [k for k, on in (("pp", self.pp > 1), ("attention-DP", self.dp_attention > 1)) if on]
        return " + ".join(kinds) or "tp/ep"

    @property
    def setup_key(self) -> tuple:
        """Rows with one key share one counted model (disaggregated rows: one count, planned for each
        side's tp, `side_rows`)."""
        key = self.model, self.device, self.tp, self.weight_dtype, self.kv_dtype
        if self.disagg is not None:
            return key + ("disaggregated",)
        return key + tuple(f"{name}{v}" for name, v in (("ep", self.ep), ("dpa", self.dp_attention), ("pp", self.pp))
                           if v > 1)

    def side_rows(self) -> tuple[ServingRow, ServingRow]:
        """A disaggregated row's prefill and decode sides, each as the aggregated row of its tp
        (whose `setup_key` names the counted model it runs)."""
        return tuple(dataclasses.replace(self, tp=side.tp, max_seqs=side.max_seqs, engine_figures=side.engine_figures,
                                         disagg=None, ep=side.ep, dp_attention=side.dp_attention, pp=side.pp)
                     for side in (self.disagg.prefill, self.disagg.decode))


@dataclass(frozen=True)
class Side:
    """The workers of one side of a disaggregated row: how many, their tensor parallelism, their
    engine's batch limit and the figures the benchmark set (`side_figures`); a mixture-of-experts
    model's experts spread over ``ep`` GPUs, attention data-parallel over ``dp_attention`` groups
    of ``tp``, ``pp`` pipeline stages (module docstring, layouts)."""

    workers: int
    tp: int
    max_seqs: int
    engine_figures: dict
    ep: int = 1
    dp_attention: int = 1
    pp: int = 1


@dataclass(frozen=True)
class Disaggregated:
    """Prefill and decode workers apart, the KV cache moved over ``kv_link`` (`KV_LINKS`)."""

    prefill: Side
    decode: Side
    kv_link: str


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str


def split_of(row_id: str) -> str:
    """The fixed split rule of the module docstring."""
    return "fit" if hashlib.sha256(row_id.encode()).digest()[0] % 3 == 0 else "held-out"


def preset_version(backend: str, version: str, measured: str | None = None) -> str:
    """The preset a row of ``backend`` at ``version``, measured on the day ``measured``
    (YYYY-MM-DD or None), runs under (`ENGINES`)."""
    presets = ENGINES[backend]
    release = re.match(r"(\d+(?:\.\d+)*)", version or "")
    if not release:
        if measured is None or len(presets) == 1:
            return presets[-1]
        out = [p for p in presets if RELEASED.get((backend, p), "") <= measured]
        return out[-1] if out else presets[0]
    number = _release(release.group(1))
    older = [p for p in presets if _release(p) <= number]
    return older[-1] if older else presets[0]


def row_preset(r: dict) -> str:
    """The preset a silicon-sample row runs under (`preset_version`)."""
    return preset_version(r["backend"], r["backend_version"], measured_day(r["silicon_data_source"]))


def measured_day(source: str) -> str | None:
    """The ``measured=YYYY-MM-DD`` day a silicon_data_source names, or None."""
    day = re.search(r"measured=(\d{4}-\d{2}-\d{2})", source)
    return day.group(1) if day else None


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def benchmark_figures(backend: str, batch_size: int, isl: int, ranks: int = 1) -> dict:
    """The engine figures AIConfigurator's generator sets for a benchmark (module docstring), for
    the one scheduler of ``ranks`` attention data-parallel ranks of ``batch_size`` each (module docstring, layouts)."""
    tokens = batch_size + isl + 1500
    if backend == "vllm":
        return {"max_batched_tokens": ranks * tokens, "cuda_graph_sizes": tuple(range(1, ranks * batch_size + 1))}
    if backend == "trtllm":
        return {"max_batched_tokens": ranks * (-(-tokens // 32) * 32)}
    return {}


def side_figures(backend: str, phase: str, batch_size: int, isl: int, ranks: int = 1) -> dict:
    """The engine figures AIConfigurator's generator sets for a disaggregated benchmark's ``phase``
    ("prefill" or "decode") workers of max batch ``batch_size`` (module docstring), for the one
    scheduler of ``ranks`` attention data-parallel ranks (module docstring, layouts)."""
    tokens = isl + 1500 if phase == "prefill" else batch_size
    if backend == "vllm":
        return {"max_batched_tokens": ranks * tokens, "cuda_graph_sizes": tuple(range(1, ranks * batch_size + 1))}
    if backend == "trtllm":
        return {"max_batched_tokens": ranks * (-(-tokens // 32) * 32)}
    return {}


def kv_link_of(system: str, gpus: int) -> str:
    """The link a disaggregated deployment of ``gpus`` GPUs on ``system`` moves KV caches over (`KV_LINKS`)."""
    domain, nvlink, nic = KV_LINKS[system]
    return nvlink if gpus <= domain else nic


def kv_dtype_of(backend: str, weights: str | None) -> str | None:
    """The KV cache's dtype: TensorRT-LLM stores it in fp8 beside fp8 or fp4 weights (its quantized
    checkpoints carry kv_cache_quant_algo FP8); vLLM and SGLang keep the model's dtype ("auto")."""
    return "fp8" if backend == "trtllm" and weights in ("fp8", "fp4") else None


def aic_rows(path: str) -> tuple[list[ServingRow], list[Skipped]]:
    """The rows of the silicon sample at ``path`` that dispatchprof expresses, and the others."""
    rows, skipped = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            day = measured_day(r["silicon_data_source"])
            server = server_of(r, day)
            layout = inferencemax_layout(r, server)
            reason = _unexpressed(layout) or speculative_run(layout, day)
            if reason:
                skipped.append(Skipped(r["id"], reason))
                continue
            if r["mode"] == "disagg":
                rows.append(_disagg_row(r))
                continue
            tp, ep, dp, pp = parallel_of(layout)
            named = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
            clients = int(named.group(1)) if named else dp * int(r["batch_size"])
            weights = WEIGHTS[r["gemm_quant_mode"]]
            if server is None:                           # AIConfigurator's aiperf template
                kv_dtype, figures = kv_dtype_of(r["backend"], weights), benchmark_figures(
                    r["backend"], int(r["batch_size"]), int(r["isl"]), dp)
                client = dict(max_seqs=max(dp * int(r["batch_size"]), clients),
                              num_requests=SIMULATED_ROUNDS * clients, rounds=ROUNDS)
            else:                                        # InferenceMAX's script (module docstring)
                kv_dtype, figures = server.kv_dtype, server_figures(layout, server)
                if dp > 1:                               # each attention-DP rank schedules its own step budget
                    figures = {**figures, "max_batched_tokens": dp * figures["max_batched_tokens"]}
                client = dict(max_seqs=clients, num_requests=prompts_per_client(r, day) * clients,
                              range_ratio=RANGE_RATIO)
            rows.append(ServingRow(
                r["id"], "aiconfigurator silicon_sample.csv", split_of(r["id"]), MODELS[r["model_path"]],
                DEVICES[r["system"]], tp, r["backend"], row_preset(r), stored_weights(r, weights), kv_dtype,
                int(r["isl"]), int(r["osl"]), clients, measured=_measured(r), raw=r, engine_figures=figures,
                ep=ep, dp_attention=dp, pp=pp, **client))
    return rows, skipped


def _measured(r: dict) -> dict:
    """A silicon-sample row's mean TTFT and TPOT in seconds (the file's milliseconds)."""
    return {"ttft_mean": float(r["silicon_ttft_ms"]) / 1e3, "tpot_mean": float(r["silicon_tpot_ms"]) / 1e3}


def _disagg_row(r: dict) -> ServingRow:
    """A disaggregated silicon-sample row as simulated (module docstring)."""
    isl = int(r["isl"])
    sides = []
    for p in ("prefill", "decode"):
        tp, ep, dp, pp = parallel_of(r, f"{p}_")
        batch = int(r[f"{p}_batch_size"])
        sides.append(Side(int(r[f"{p}_num_workers"]), tp, dp * batch, side_figures(r["backend"], p, batch, isl, dp),
                          ep, dp, pp))
    prefill, decode = sides
    gpus = sum(side.workers * side.tp * side.dp_attention * side.pp for side in sides)
    named = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
    clients = int(named.group(1)) if named else decode.workers * int(r["decode_batch_size"])
    weights = WEIGHTS[r["gemm_quant_mode"]]
    return ServingRow(
        r["id"], "aiconfigurator silicon_sample.csv", split_of(r["id"]), MODELS[r["model_path"]], DEVICES[r["system"]],
        prefill.tp, r["backend"], row_preset(r), stored_weights(r, weights),
        kv_dtype_of(r["backend"], weights), isl, int(r["osl"]), clients, None, SIMULATED_ROUNDS * clients,
        _measured(r), r, rounds=ROUNDS, disagg=Disaggregated(prefill, decode, kv_link_of(r["system"], gpus)))


def published_rows(path: str) -> list[ServingRow]:
    """TensorRT-LLM's offline throughput rows (module docstring)."""
    with open(path, encoding="utf-8", newline="") as f:
        return [ServingRow(f"trtllm-bench-{r['id']}", "TensorRT-LLM perf-overview.md", split_of(f"trtllm-bench-{r['id']}"),
                           r["catalog_model"], r["device"], int(r["tp"]), "trtllm", ENGINES["trtllm"][-1],
                           r["weight_dtype"], "fp8",
                           int(r["prompt_len"]), int(r["output_len"]), None, None,
                           min(int(r["num_requests"]), OFFLINE_CAP), {"output_tokens_per_s": float(r["value"])}, r,
                           {"memory_utilization": 0.95})
                for r in csv.DictReader(f)]


def sim2real_rows(path: str) -> list[ServingRow]:
    """The sim-to-real vLLM runs (module docstring); measured figures in seconds."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            stages = tuple((float(rate), STAGE_SHARE * float(seconds))
                           for rate, seconds in (stage.split("x") for stage in r["stages"].split(";")))
            prompt = int(r["system_prompt_tokens"]) + int(r["question_tokens"])
            measured = {m: float(r[f"{m}_ms"]) / 1e3 for m in ("ttft_mean", "ttft_p90", "ttft_p99", "e2e_mean",
                                                               "e2e_p90", "e2e_p99")}
            measured["tpot_mean"] = float(r["itl_mean_ms"]) / 1e3
            rows.append(ServingRow(
                f"sim2real-{r['id']}", "sim-to-real vLLM runs", split_of(f"sim2real-{r['id']}"), r["model"], r["device"],
                int(r["tp"]), "vllm", preset_version("vllm", "0.15.1"), None, None, prompt, int(r["output_tokens"]), None, 128,
                sum(round(rate * seconds) for rate, seconds in stages), measured, r,
                {"max_batched_tokens": int(r["max_num_batched_tokens"]),
                 "memory_utilization": float(r["gpu_memory_utilization"])},
                stages, int(r["system_prompt_tokens"]) / prompt))
    return rows


def _unexpressed(r: dict) -> str | None:
    """Why a silicon-sample row is not predicted, or None."""
    if r["mode"] not in ("agg", "disagg"):
        return f"mode {r['mode']}: neither aggregated nor disaggregated prefill/decode"
    if r["model_path"] not in MODELS:
        return f"{r['model_path']}: no catalog model mapped to it here (MODELS)"
    if r["system"] not in DEVICES:
        return f"{r['system']}: no bundled device profile"
    if r["gemm_quant_mode"] not in WEIGHTS:
        return f"weights {r['gemm_quant_mode']}: no simulated weight dtype"
    if r["mode"] == "disagg":
        return _disagg_unexpressed(r)
    return _layout_unexpressed(r)


def _figure(r: dict, key: str) -> int:
    """A parallelism column as a number: empty or 0 (the sample's "not set") is 1."""
    return int(r[key] or 0) or 1


def parallel_of(r: dict, prefix: str = "") -> tuple[int, int, int, int]:
    """(tp, ep, dp_attention, pp) of serve for a silicon-sample row (``prefix`` "prefill_" or
    "decode_": that side of a disaggregated row) that `_layout_unexpressed` passes (module docstring, layouts)."""
    tp, dp, pp = (_figure(r, prefix + k) for k in ("tp_size", "attention_dp_size", "pp_size"))
    if r["model_path"] not in MOE:
        return tp, 1, 1, pp
    moe_tp, moe_ep = _figure(r, prefix + "moe_tp_size"), _figure(r, prefix + "moe_ep_size")
    return tp, (moe_ep if moe_tp == 1 and moe_ep > 1 else 1), dp, pp


def _layout_unexpressed(r: dict, prefix: str = "") -> str | None:
    """Why the parallelism of a row (or of one side of a disaggregated row, ``prefix``) is not
    what serve simulates (module docstring, layouts), or None."""
    tp, dp = _figure(r, prefix + "tp_size"), _figure(r, prefix + "attention_dp_size")
    side = f"{prefix[:-1]} side: " if prefix else ""
    if r["model_path"] not in MOE:
        if dp > 1:
            return f"{side}attention data parallelism of a dense model (serve spreads attention over groups beside EP)"
        return None
    moe_tp, ep = _figure(r, prefix + "moe_tp_size"), _figure(r, prefix + "moe_ep_size")
    if moe_tp * ep != tp * dp:
        return (f"{side}experts over moe_tp {moe_tp} x moe_ep {ep} GPUs, not the tp {tp} x attention_dp {dp} "
                f"GPUs that run attention")
    if dp == 1 and (moe_tp, ep) not in ((tp, 1), (1, tp)):
        return (f"{side}experts over moe_tp {moe_tp} x moe_ep {ep} at tp {tp}: serve spreads them tensor-parallel "
                f"over tp or expert-parallel over tp GPUs")
    if dp > 1 and moe_tp > 1:
        return (f"{side}experts tensor-parallel over moe_tp {moe_tp} beside attention data parallelism: serve spreads "
                f"them whole over the replica's tp x attention_dp GPUs (--ep)")
    if _heads(MODELS[r["model_path"]]) % tp:
        return (f"{side}tp {tp} does not divide {MODELS[r['model_path']]}'s {_heads(MODELS[r['model_path']])} "
                f"attention heads (the engine splits attention another way)")
    return None


@functools.cache
def _heads(model: str) -> int:
    """The attention heads of a catalog model."""
    from dispatchprof.llm.catalog import load_config
    return load_config(model).num_attention_heads


def _disagg_unexpressed(r: dict) -> str | None:
    """Why a disaggregated row of a mapped model, device and dtype is not predicted, or None."""
    if r["system"] not in KV_LINKS:
        return f"disaggregated on {r['system']}: no KV link known for it (KV_LINKS)"
    for p in ("prefill", "decode"):
        if not r[f"{p}_batch_size"]:
            return f"disaggregated, {p} side: no batch size given (its engine's batch limit unknown)"
        reason = _layout_unexpressed(r, f"{p}_")
        if reason:
            return f"disaggregated, {reason}"
    return None
