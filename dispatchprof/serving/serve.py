"""``simulate_serving``: requests served by continuous batching on a simulated device.

``prepare_serving`` does the counting once per model and device (the step cost model, the KV
bytes per token, the memory left for the cache; a draft model's and an image encoder's costs);
``simulate_serving`` runs the scheduler's event loop over a trace with it, so several traces or
request rates reuse one count.

KV cache: ``num_blocks = floor((capacity * memory_utilization - weight bytes) /
(kv_bytes_per_token * block_size))`` per replica, where kv_bytes_per_token is what the model's
cache holds per token (all layers, keys and values) in ``kv_dtype`` (the model's dtype by
default), plus the draft model's under speculative decoding. A model with linear-attention layers
also holds a state per running sequence, placed as the engine places it
(`dispatchprof.serving.state_memory`: in the KV blocks, in a pool of its own that also caps the
running sequences, or reserved for max_seqs sequences).

Speculative decoding (``draft=``, ``spec_tokens=k``, ``acceptance=a``): each step a decoding
sequence runs k draft decode steps and one target step over k + 1 tokens, and gains the
expected accepted tokens (1 - a^(k+1)) / (1 - a) (k + 1 when a = 1) (`expected_tokens`). The
draft's first step also prefills the prompt chunks of the step.

Engines (``engine=``, `dispatchprof.serving.engines`): a preset's host work replaces the
device profile's graph launch and per-sequence host cost (the step is counted without them):
a step of N sequences takes ``step_host_us + N x sequence_host_us`` of host time before its
kernels, or overlapped with the previous step's (``overlap_host``: max(host, device)), and static
power runs through it; a step of T tokens within the captured CUDA-graph sizes computes the
padded size's tokens; the scheduler takes the preset's policy, limits and KV block size. Under
attention data parallelism over A ranks each rank replays its own graph over its share, the
busiest rank's ceil(T / A) tokens deciding the graph and its padded size for all (SGLang's
CudaGraphRunner.can_run: "cuda_graph_bs = max(forward_batch.global_num_tokens_cpu)" against
max_bs; vLLM coordinates one padded size across its data-parallel ranks): a step of 512 decodes
over 32 ranks is graphed at 16 tokens a rank where a limit of 256 would run it eagerly. Each
rank's scheduler (one process per data-parallel rank in SGLang, vLLM and TensorRT-LLM) handles its
own sequences, so a step's per-sequence host time is the busiest rank's ceil(N / A) sequences'.

Layouts (``ep``, ``dp_attention``, ``expert_skew``, ``pp``; `dispatchprof.serving.layout`): a
replica over more GPUs, its step timed by `LayoutCost` from the same counted model; a
mixture-of-experts model is counted on batches that keep every expert busy and always timed so
(its experts' active share). Disaggregated prefill/decode: `dispatchprof.serving.serve_disagg`.

Encoder-decoder models (T5, BART, Whisper; `dispatchprof.serving.seq2seq`): a request's prompt
is its encoder input; each prompt scheduled in a step runs its encoder and first decoder step on
its own (its cost counted once per prompt length), and the decoding sequences run one decoder
step with cross-attention over their prompts. Their prefill is never chunked (an encoder reads
its whole input at once, as vLLM runs these models); speculative decoding and images are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from dispatchprof.llm.gated_delta import SequenceState, sequence_state
from dispatchprof.llm.generation import Progress, model_dtype
from dispatchprof.llm.shape_generic import batch_step
from dispatchprof.serving.checks import check_fixed_prompts, check_vocabulary, check_weights_fit
from dispatchprof.serving.cost import (DESIGN, Composition, StepCost, StepCostModel, fit, fit_design,
                                      kv_scale)
from dispatchprof.serving.encoder import image_cost
from dispatchprof.serving.engine import DecodeBatch, Router, run_engine
from dispatchprof.serving.engines import EnginePreset, engine_preset
from dispatchprof.serving.layout import Layout, LayoutCost, check_model, expert_fraction, layout_of, moe_of
from dispatchprof.serving.metrics import Gaps, RequestResult, ServingSummary, request_results, summarize
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig
from dispatchprof.serving.seq2seq import (
    PromptCost, count_decode_model, count_prompt_model, decode_composition, fixed_prompt,
    is_encoder_decoder,
)
from dispatchprof.serving.state_memory import CacheLayout, StatePool, cache_layout
from dispatchprof.sim.parallel import check_tp
from dispatchprof.sim.placement import Placement, Scenarios, scenarios_of
from dispatchprof.sim.runtime import check_runtime


def expected_tokens(acceptance: float, k: int) -> float:
    """Expected tokens per verification step: (1 - a^(k+1)) / (1 - a); k + 1 when a = 1."""
    if not 0 <= acceptance <= 1:
        raise ValueError(f"acceptance must be a rate in [0, 1], got {acceptance!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"spec_tokens must be a whole number >= 1, got {k!r}")
    if acceptance == 1:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)


#: Step costs a setup remembers (a few tens of MB at most); past that it starts again.
MEMO_STEPS = 1 << 18


@dataclass(frozen=True)
class ServingSetup:
    """What serving needs from counting, for one model on one device (bytes, seconds, joules)."""

    device: str
    cost: StepCostModel
    kv_bytes_per_token: float
    capacity_bytes: float | None
    weights_bytes: int
    price_usd_per_h: float | None = None
    draft: StepCostModel | None = None
    spec_tokens: int = 0
    acceptance: float = 0.0
    image_cost: tuple[float, float] = (0.0, 0.0)     # one image through the encoder: (s, J)
    runtime: str = "serving"
    tp: int = 1                                      # devices per replica (tensor parallelism)
    prompt: PromptCost | None = None                 # an encoder-decoder's prompt cost (seq2seq)
    fixed_prompt: int | None = None                  # Whisper: the prompt length its encoder reads
    engine: EnginePreset | None = None               # the serving engine (host costs, graphs, scheduler)
    layout: LayoutCost | None = None                 # EP / attention-DP / PP (`dispatchprof.serving.layout`)
    state: SequenceState | None = None               # per-sequence linear-attention states (`overlaps`, `cache`)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def gpus(self) -> int:
        """GPUs of one replica (tp, or the layout's)."""
        return self.layout.layout.gpus if self.layout is not None else self.tp

    @property
    def overlaps(self) -> bool:
        """Whether the engine overlaps its host work with the GPU's for this model: its preset's
        ``overlap_host``, off for a model with linear-attention layers under an engine that turns it
        off for them (`EnginePreset.linear_attention_overlap`: SGLang's mamba radix cache)."""
        e = self.engine
        return e is not None and e.overlap_host and (e.linear_attention_overlap or self.state is None)

    @property
    def layout_text(self) -> str | None:
        """The layout in words ("tp 1, ep 8, dp-attention 8, pp 1, skew 1"), None for tp only."""
        if self.layout is None or self.layout.layout.plain:
            return None
        lay = self.layout.layout
        return (f"tp {lay.tp}, ep {lay.ep}, dp-attention {lay.dp_attention}, pp {lay.pp}, "
                f"expert skew {lay.expert_skew:g}")

    def _target(self, c: Composition) -> StepCost:
        """The target model's step cost at ``c``: counted, or on the setup's layout."""
        return self.layout.cost(c) if self.layout is not None else self.cost.cost(c)

    def kv_memory(self, memory_utilization: float, memory_of: str = "total") -> float:
        """Bytes of one replica's cache memory (module docstring; ``memory_of`` "free": the
        utilization is a share of the memory the weights leave, as `dispatchprof.serving.engines`
        says)."""
        if self.capacity_bytes is None:
            raise ValueError(f"device {self.device} publishes no memory capacity; give kv_blocks (--kv-blocks)")
        if memory_of == "free":
            free = (self.capacity_bytes - self.weights_bytes) * memory_utilization
        else:
            free = self.capacity_bytes * memory_utilization - self.weights_bytes
        if free <= 0:
            raise ValueError(f"the weights ({self.weights_bytes / 1e9:.2f} GB) leave no memory for the KV cache on "
                             f"{self.device} ({self.capacity_bytes / 1e9:.2f} GB x {memory_utilization})")
        return free

    def num_blocks(self, block_size: int, memory_utilization: float, memory_of: str = "total") -> int:
        """KV blocks of one replica, linear-attention states left aside (`kv_memory` /
        (kv_bytes_per_token x block_size))."""
        return cache_layout(self.kv_memory(memory_utilization, memory_of), self.kv_bytes_per_token, None, block_size,
                            1, StatePool()).num_blocks

    def cache(self, block_size: int, memory_utilization: float, memory_of: str, max_seqs: int, pool: StatePool,
              blocks: int | None = None) -> CacheLayout:
        """One replica's cache with the model's linear-attention states placed as ``pool`` says
        (`dispatchprof.serving.state_memory`); ``blocks`` given replaces the number of blocks."""
        memory = None
        if blocks is None or (self.state is not None and self.capacity_bytes is not None):
            try:
                memory = self.kv_memory(memory_utilization, memory_of)
            except ValueError:
                if blocks is None:
                    raise
        return cache_layout(memory, self.kv_bytes_per_token, self.state, block_size, max_seqs, pool, blocks)

    def step_cost(self, prefill: Sequence[tuple[int, int, int]], decoding: DecodeBatch,
                  images: int) -> tuple[float, float]:
        """(seconds, joules) of one step (engine.StepCostFn), remembered for the compositions
        that recur (the same lengths served again): `step_cost_of`."""
        key = (tuple(prefill), decoding, images)
        cost = self._memo.get(key)
        if cost is None:
            if len(self._memo) >= MEMO_STEPS:
                self._memo.clear()
            cost = self._memo[key] = self.step_cost_of(prefill, decoding, images)
        return cost

    def step_cost_of(self, prefill: Sequence[tuple[int, int, int]], decoding: DecodeBatch,
                     images: int) -> tuple[float, float]:
        """(seconds, joules) of one step: the target over the prefill chunks
        and the decoding sequences (k + 1 tokens each under speculative decoding), the image
        encoder, and the draft's k steps; for an encoder-decoder, each prompt's encoder and first
        decoder step and one decoder step of the decoding sequences. Joules of the whole
        tensor-parallel group (tp x one device's)."""
        if self.prompt is not None:
            return self._seq2seq_step(prefill, decoding)
        n = decoding.n
        q = self.spec_tokens + 1 if self.draft is not None else 1
        chunks = Composition.of(prefill)
        step = chunks.merge(Composition.decoding(n, decoding.computed_sum, decoding.computed_max, q))
        if self.engine is None:
            c = self._target(step)
            time, energy = c.time_s, c.energy_j
        else:
            tokens = int(step.x[1])
            ranks = self.layout.layout.dp_attention if self.layout is not None else 1
            rank_tokens = -(-tokens // ranks)        # the busiest attention data-parallel rank's share
            graphed = self.engine.graphed(rank_tokens, not prefill)
            padded = ranks * self.engine.padded_tokens(rank_tokens, not prefill) if graphed else tokens
            c = self._target(step.padded(padded))
            eager = 0 if graphed else self.cost.kernels
            rank_sequences = -(-(len(prefill) + n) // ranks)     # each rank schedules its own share
            time = self.engine.step_s(c.time_s, rank_sequences, eager, self.overlaps)
            energy = c.energy_j + self.cost.static_power_w * (time - c.time_s)
        time, energy = time + images * self.image_cost[0], energy + images * self.image_cost[1]
        if self.draft is not None:
            drafting = Composition.decoding(n, decoding.computed_sum, decoding.computed_max, 1)
            first = self.draft.cost(chunks.merge(drafting))
            rest = self.draft.cost(drafting) if n else None
            time += first.time_s + (self.spec_tokens - 1) * (rest.time_s if rest else 0.0)
            energy += first.energy_j + (self.spec_tokens - 1) * (rest.energy_j if rest else 0.0)
        return time, energy * self.tp

    def _seq2seq_step(self, prefill: Sequence[tuple[int, int, int]], decoding: DecodeBatch) -> tuple[float, float]:
        """Prompts one after another (a recomputed one pays its prompt again, not its generated
        tokens), then the decode step."""
        assert self.prompt is not None
        time = energy = 0.0
        for _, _, prompt_tokens in prefill:
            c = self.prompt.cost(prompt_tokens)
            time, energy = time + c.time_s, energy + c.energy_j
        if decoding.n:
            c = self.cost.cost(decode_composition(decoding))
            time, energy = time + c.time_s, energy + c.energy_j
        return time, energy * self.tp


@dataclass(frozen=True)
class ServingResult:
    """Per request (trace order), the summary, and per replica its timeline of steps:
    (start s, KV blocks used, running, waiting, preemptions so far)."""

    device: str
    requests: tuple[RequestResult, ...]
    summary: ServingSummary
    timelines: tuple[tuple[tuple[float, int, int, int, int], ...], ...] = field(repr=False)
    config: SchedulerConfig = field(repr=False)
    replicas: int = 1
    engine: str | None = None                        # "vllm 0.11": the preset it ran under
    layout: str | None = None                        # "ep 8, dp-attention 8": a layout beyond tp
    disaggregated: Any = None                        # a DisaggSummary (`dispatchprof.serving.disagg`)

    def to_dict(self) -> dict:
        """{"device", "replicas", "requests": [{ttft_s, tpot_s, e2e_s, ...}], "summary": {...}}, with
        "layout" and "disaggregated" where the run had them."""
        extra = {} if self.layout is None else {"layout": self.layout}
        if self.disaggregated is not None:
            extra["disaggregated"] = self.disaggregated.to_dict()
        return {**extra, "device": self.device, "replicas": self.replicas, "engine": self.engine,
                "requests": [{"ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "e2e_s": r.e2e_s, "arrival_s": r.arrival_s,
                              "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens,
                              "cached_tokens": r.cached_tokens, "preemptions": r.preemptions, "replica": r.replica,
                              "warmup": r.warmup} for r in self.requests],
                "summary": self.summary.to_dict()}


def _model(spec: Any, dtype: torch.dtype) -> torch.nn.Module:
    if isinstance(spec, torch.nn.Module):
        return spec
    from dispatchprof.llm.models import build_model
    return build_model(spec, dtype=dtype, generator=True)


def prepare_serving(model: Any, device: Any, *, dtype: torch.dtype = torch.bfloat16, weight_dtype: str | None = None,
                    kv_dtype: str | None = None, bound: bool = False, draft: Any = None, spec_tokens: int = 4,
                    acceptance: float = 0.7, price_usd_per_h: float | None = None,
                    image_size: int | None = None, runtime: str = "serving", tp: int | None = None,
                    engine: str | EnginePreset | None = None, engine_version: str | None = None,
                    ep: int = 1, dp_attention: int = 1, pp: int = 1, expert_skew: float = 1.0,
                    counts: CountMemo | None = None, progress: Progress | None = None) -> ServingSetup:
    """Count the step cost model of ``model`` (a module, catalog name or config) on ``device``
    under ``runtime`` ("serving" by default: CUDA-graph steps, fused pointwise kernels, the KV
    cache written in place; "compiled", "eager") with tensor parallelism over ``tp`` devices per
    replica; with ``image_size``, also its image encoder on one image (`dispatchprof.serving.encoder`);
    with ``engine`` ("vllm", "sglang", "trtllm" or a preset), that engine's host costs, graphs and
    scheduler (module docstring); ``ep``, ``dp_attention``, ``pp`` and ``expert_skew`` lay each
    replica out over more GPUs (`dispatchprof.serving.layout`; ``tp`` is then attention's);
    ``counts`` (a `dispatchprof.serving.repeat.CountMemo` of ``model``, a module) reuses the
    counts of earlier layouts: the same setup, counted once. ``progress(done, total, what)`` is
    told of the counting (`dispatchprof.serving.cost.fit_design`; the draft model's chains as
    "draft: ...")."""
    check_runtime(runtime)
    layout = layout_of(tp, ep, dp_attention, pp, expert_skew)
    tp = layout.tp
    scenarios = scenarios_of(device)
    if len(scenarios) != 1:
        raise ValueError(f"serving simulates one device or placement at a time, got {len(scenarios)}")
    name = next(iter(scenarios))
    preset = _engine(engine, engine_version, scenarios[name], runtime)
    if preset is not None:          # the engine's host work replaces the profile's (module docstring)
        scenarios = Scenarios(((name, scenarios[name].replacing(graph_launch_us=0.0, sequence_host_us=0.0)),))
    target = _model(model, dtype)
    if not layout.plain:
        check_model(layout, getattr(target, "config", None))
        if draft is not None or image_size is not None or is_encoder_decoder(target):
            raise ValueError("ep, dp_attention, pp and expert_skew are simulated for decoder-only models without a "
                             "draft model or images")
    if is_encoder_decoder(target):
        if preset is not None:
            raise ValueError(f"{type(target).__name__} is an encoder-decoder model: engine presets are for "
                             f"decoder-only models")
        return _prepare_seq2seq(target, scenarios, name, draft=draft, image_size=image_size, weight_dtype=weight_dtype,
                                kv_dtype=kv_dtype, bound=bound, price_usd_per_h=price_usd_per_h, runtime=runtime, tp=tp)
    heads = getattr(getattr(target, "config", None), "num_attention_heads", None)
    check_tp(tp, [heads] if isinstance(heads, int) else [], scenarios[name].devices)
    check_weights_fit(target, scenarios[name].devices, weight_dtype, layout.gpus)
    scale = kv_scale(kv_dtype, target)
    small = None
    if draft is not None:                                    # checked before any counting
        small = _model(draft, dtype)
        check_vocabulary(target, small)
        expected_tokens(acceptance, spec_tokens)
    moe = moe_of(getattr(target, "config", None))
    step = batch_step(target)           # MoE: every design batch x E / gcd(E, k), every expert busy (layout.py)
    design = DESIGN if step == 1 else tuple((b * step, tokens) for b, tokens in DESIGN)
    steps, models = fit_design(target, scenarios, weight_dtype, bound, design, runtime=runtime, tp=tp,
                               kv_dtype=kv_dtype, memo=counts, progress=progress)
    cost = models[name]
    capacity, weights = steps[0].memory[name]
    kv_token = steps[0].kv_bytes_per_token * scale
    draft_cost = None
    if small is not None:
        drafted = None if progress is None else (lambda done, total, what: progress(done, total, f"draft: {what}"))
        dsteps, dmodels = fit_design(small, scenarios, weight_dtype, bound, runtime=runtime, tp=tp, kv_dtype=kv_dtype,
                                     progress=drafted)
        draft_cost = dmodels[name]
        weights += dsteps[0].memory[name][1]
        kv_token += dsteps[0].kv_bytes_per_token * scale
    price = price_usd_per_h
    if price is None:
        price = scenarios[name].devices[0].price_usd_per_hour
    images = (0.0, 0.0) if image_size is None else \
        image_cost(target, scenarios, image_size, weight_dtype=weight_dtype, bound=bound, runtime=runtime, tp=tp)[name]
    laid = None
    if not layout.plain or moe is not None:
        laid = _layout_cost(cost, layout, target, scenarios[name].devices[0])
        if layout.ep > 1:                          # experts: 1 / dp_attention of the count's share
            weights = round(weights * (1 - expert_fraction(target, weight_dtype) * (1 - 1 / layout.dp_attention)))
        weights, kv_token = round(weights / layout.pp), kv_token / layout.pp
    state = sequence_state(getattr(target, "config", None), model_dtype(target).itemsize, tp)
    if state is not None and layout.pp > 1:                  # one stage's layers
        state = SequenceState(state.layer_bytes, math.ceil(state.layers / layout.pp),
                              math.ceil(state.kv_layers / layout.pp))
    return ServingSetup(name, cost, kv_token, capacity, weights, price, draft_cost,
                        spec_tokens if draft is not None else 0, acceptance, images, runtime, tp, engine=preset,
                        layout=laid, state=state)


def _layout_cost(cost: StepCostModel, layout: Layout, model: torch.nn.Module, device: Any) -> LayoutCost:
    """The LayoutCost of a counted model (its config's layers, experts per token, hidden size)."""
    config = model.config
    moe = moe_of(config)
    element = next(model.parameters()).element_size()
    return LayoutCost(cost, layout, layers=config.num_hidden_layers, experts=moe[0] if moe else 0,
                      top_k=moe[1] if moe else 0, hidden=config.hidden_size, element_bytes=element, device=device)


def _engine(engine: str | EnginePreset | None, version: str | None, placement: Placement,
            runtime: str) -> EnginePreset | None:
    """The engine preset for a run on ``placement`` (None: the device profile's host costs)."""
    if engine is None:
        if version is not None:
            raise ValueError("engine_version needs an engine")
        return None
    if runtime != "serving":
        raise ValueError(f"an engine preset runs the serving runtime (CUDA graphs, fused kernels), not {runtime!r}")
    if isinstance(engine, EnginePreset):
        return engine
    d = placement.devices[0]
    capacity = None if d.memory_capacity_gb is None else d.memory_capacity_gb * 1e9
    return engine_preset(engine, version, memory_bytes=capacity, device_name=d.name)


def _prepare_seq2seq(model: torch.nn.Module, scenarios: Any, name: str, *, draft: Any, image_size: int | None,
                     weight_dtype: str | None, kv_dtype: str | None, bound: bool, price_usd_per_h: float | None,
                     runtime: str, tp: int) -> ServingSetup:
    """The ServingSetup of an encoder-decoder (`dispatchprof.serving.seq2seq`)."""
    kind = type(model).__name__
    if draft is not None:
        raise ValueError(f"{kind} is an encoder-decoder model: speculative decoding is simulated for decoder-only "
                         f"models")
    if image_size is not None:
        raise ValueError(f"{kind} is an encoder-decoder model: images need a vision-language model")
    if not hasattr(model, "get_encoder") or model.get_output_embeddings() is None:
        raise ValueError(f"{kind} has no LM head: serving an encoder-decoder needs its conditional-generation model "
                         f"(such as T5ForConditionalGeneration or WhisperForConditionalGeneration; a config or "
                         f"catalog name is built so)")
    heads = getattr(model.config, "decoder_attention_heads", None) or getattr(model.config, "num_heads", None)
    check_tp(tp, [heads] if isinstance(heads, int) else [], scenarios[name].devices)
    scale = kv_scale(kv_dtype, model)
    options = dict(weight_dtype=weight_dtype, bound=bound, runtime=runtime, tp=tp, kv_dtype=kv_dtype)
    steps, per_token = count_decode_model(model, scenarios, **options)
    prompt = count_prompt_model(model, scenarios, **options)[name]
    capacity, weights = steps[0].memory[name]
    price = price_usd_per_h if price_usd_per_h is not None else scenarios[name].devices[0].price_usd_per_hour
    cost = fit(steps)[name]
    return ServingSetup(name, cost, per_token * scale, capacity, weights, price,
                        runtime=runtime, tp=tp, prompt=prompt, fixed_prompt=fixed_prompt(model))


#: Scheduler figures of a run without an engine preset.
GENERIC_ENGINE = {"max_seqs": 256, "max_batched_tokens": 8192, "chunked_prefill": True, "block_size": 16,
                  "memory_utilization": 0.9}


def simulate_serving(model: Any, requests: Sequence[Request], device: Any = None, *, replicas: int = 1,
                     router: Router = "round_robin", max_seqs: int | None = None,
                     max_batched_tokens: int | None = None, chunked_prefill: bool | None = None,
                     block_size: int | None = None, memory_utilization: float | None = None,
                     kv_blocks: int | None = None, slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
                     concurrency: int | None = None, warmup: int = 0, prefix_hit: float = 0.0,
                     **prepare: Any) -> ServingResult:
    """Serve ``requests`` on ``device`` (see the module docstring). ``model`` is a ServingSetup
    (from `prepare_serving`), or a model / catalog name counted now with ``prepare``'s options.
    ``concurrency`` = C runs C closed-loop clients instead of the requests' arrival times;
    ``warmup`` requests are left out of the summary; ``prefix_hit`` is the share of each prompt
    found in the prefix cache (`dispatchprof.serving.engine`). Scheduler figures left None come
    from the setup's engine preset, or `GENERIC_ENGINE` without one."""
    if isinstance(model, ServingSetup):
        if prepare:
            raise ValueError(f"options {sorted(prepare)} belong to prepare_serving; the setup is already counted")
        setup = model
    else:
        if device is None:
            raise ValueError("simulate_serving needs a device, such as device='H100-SXM'")
        setup = prepare_serving(model, device, **prepare)
    if not requests:
        raise ValueError("no requests to serve")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas must be a whole number >= 1, got {replicas!r}")
    config, engines = scheduler_config(setup, requests, replicas, max_seqs=max_seqs,
                                       max_batched_tokens=max_batched_tokens, chunked_prefill=chunked_prefill,
                                       block_size=block_size, memory_utilization=memory_utilization,
                                       kv_blocks=kv_blocks, prefix_hit=prefix_hit)
    blocks, engine = config.num_blocks, setup.engine
    seqs, reps = run_engine(requests, config, setup.step_cost, replicas=engines, router=router,
                            concurrency=concurrency, warmup=warmup, prefix_hit=prefix_hit)
    results = request_results(seqs, warmup)
    peak = max((used for rep in reps for _, used, *_ in rep.timeline), default=0) / blocks
    summary = summarize(results, Gaps.joined(rep.gaps for rep in reps), kv_blocks=blocks, kv_peak=peak,
                        preemptions=sum(r.preemptions for r in reps), energy_j=sum(r.energy_j for r in reps),
                        gpus=replicas * setup.gpus, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
                        price_usd_per_h=setup.price_usd_per_h)
    return ServingResult(setup.device, tuple(results), summary, tuple(tuple(r.timeline) for r in reps), config,
                         replicas, engine.label if engine else None, setup.layout_text)


def scheduler_config(setup: ServingSetup, requests: Sequence[Request], replicas: int, *, max_seqs: int | None,
                     max_batched_tokens: int | None, chunked_prefill: bool | None, block_size: int | None,
                     memory_utilization: float | None, kv_blocks: int | None,
                     prefix_hit: float) -> tuple[SchedulerConfig, int]:
    """The scheduler of each engine of ``setup`` (figures left None from its engine preset, or
    `GENERIC_ENGINE`) and how many engines ``replicas`` replicas run (P virtual engines each
    under pipeline parallelism, each with 1 / P of the replica's KV blocks)."""
    given = {"max_seqs": max_seqs, "max_batched_tokens": max_batched_tokens, "chunked_prefill": chunked_prefill,
             "block_size": block_size, "memory_utilization": memory_utilization}
    engine = setup.engine
    figures = {k: v if v is not None else (getattr(engine, k) if engine else GENERIC_ENGINE[k])
               for k, v in given.items()}
    max_seqs, max_batched_tokens, chunked_prefill, block_size, memory_utilization = figures.values()
    if not 0 < memory_utilization <= 1:
        raise ValueError(f"memory_utilization must be in (0, 1], got {memory_utilization!r}")
    if prefix_hit and engine is not None and not engine.prefix_caching:
        raise ValueError(f"{engine.label} does not cache prompt prefixes by default: a prefix hit rate needs an "
                         f"engine that does")
    if setup.fixed_prompt is not None:
        check_fixed_prompts(requests, setup.fixed_prompt)
    cache = setup.cache(block_size, memory_utilization, engine.memory_of if engine else "total", max_seqs,
                        engine.states if engine else StatePool(), kv_blocks)
    blocks, block_size, max_seqs = cache.num_blocks, cache.block_size, cache.max_seqs
    engines = replicas
    if setup.layout is not None and kv_blocks is None:      # per scheduler: A groups' caches, P virtual engines
        lay = setup.layout.layout
        blocks, engines = blocks * lay.dp_attention // lay.pp, replicas * lay.pp
    elif setup.layout is not None:
        engines = replicas * setup.layout.layout.pp
    gain = expected_tokens(setup.acceptance, setup.spec_tokens) if setup.draft is not None else 1.0
    config = SchedulerConfig(blocks, block_size, max_seqs, max_batched_tokens, chunked_prefill and setup.prompt is None,
                             setup.spec_tokens + 1 if setup.draft is not None else 1, gain,
                             engine.policy if engine else "mixed", engine.reserve_output if engine else False,
                             setup.overlaps, cache.state_blocks, engine.batch_wait_steps if engine else 0,
                             math.ceil(engine.batch_wait_tokens_ratio * max_batched_tokens) if engine else 0)
    return config, engines


__all__ = ["ServingResult", "ServingSetup", "expected_tokens", "prepare_serving", "simulate_serving"]
