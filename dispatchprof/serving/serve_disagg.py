"""``simulate_disaggregated``: requests served by P prefill and D decode replicas, each side a
`ServingSetup` of its own (device, layout, engine), the KV cache moved over a named link
(`dispatchprof.serving.disagg` has the rules, `dispatchprof.sim.links` the link figures).

The summary is `summarize`'s over the decode side's per-request times (TTFT from the send to
the decode side's first token), GPUs = P x the prefill replica's + D x the decode replica's,
energy both sides', cost per token from each side's price per GPU-hour (none when a side has
no price); `DisaggSummary` adds the transfer times, each side's queueing and utilisation.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof.serving.disagg import Side, disagg_summary, run_disaggregated
from dispatchprof.serving.engine import Router
from dispatchprof.serving.metrics import Gaps, request_results, summarize
from dispatchprof.serving.requests import Request
from dispatchprof.serving.serve import ServingResult, ServingSetup, scheduler_config
from dispatchprof.sim.links import named_link, send_s


def kv_transfer_s(prompt_tokens: int, kv_bytes_per_token: float, link: str, state_bytes: float = 0.0) -> float:
    """Seconds to move one request's KV cache and its linear-attention states (``state_bytes``,
    one GPU's share): send_s(prompt x bytes per token + state bytes, the link's bandwidth x
    BUS_EFFICIENCY, its latency)."""
    return send_s(prompt_tokens * kv_bytes_per_token + state_bytes, *named_link(link))


def simulate_disaggregated(prefill: ServingSetup, decode: ServingSetup, requests: Sequence[Request], *,
                           prefill_replicas: int = 1, decode_replicas: int = 1, kv_link: str = "ib-ndr",
                           router: Router = "round_robin", max_seqs: int | None = None,
                           max_batched_tokens: int | None = None, chunked_prefill: bool | None = None,
                           block_size: int | None = None, memory_utilization: float | None = None,
                           slo_ttft_s: float | None = None, slo_tpot_s: float | None = None,
                           concurrency: int | None = None, warmup: int = 0,
                           prefix_hit: float = 0.0) -> ServingResult:
    """Serve ``requests`` disaggregated (module docstring); scheduler figures apply to both sides
    (left None: each side's engine preset, or the generic engine)."""
    if not requests:
        raise ValueError("no requests to serve")
    for name, n in (("prefill_replicas", prefill_replicas), ("decode_replicas", decode_replicas)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {n!r}")
    named_link(kv_link)
    for setup in (prefill, decode):
        if setup.draft is not None or setup.prompt is not None or (setup.layout and setup.layout.layout.pp > 1):
            raise ValueError("disaggregated serving is simulated for decoder-only models without a draft model or "
                             "pipeline parallelism")
    figures = dict(max_seqs=max_seqs, max_batched_tokens=max_batched_tokens, chunked_prefill=chunked_prefill,
                   block_size=block_size, memory_utilization=memory_utilization, kv_blocks=None)
    p_config, _ = scheduler_config(prefill, requests, prefill_replicas, prefix_hit=prefix_hit, **figures)
    d_config, _ = scheduler_config(decode, requests, decode_replicas, prefix_hit=0.0, **figures)
    per_token, states = prefill.kv_bytes_per_token, prefill.state.bytes if prefill.state is not None else 0
    seqs, reps, trips = run_disaggregated(
        requests, Side(p_config, prefill.step_cost, prefill_replicas),
        Side(d_config, decode.step_cost, decode_replicas),
        lambda r: kv_transfer_s(r.prompt_tokens, per_token, kv_link, states), router=router, concurrency=concurrency,
        warmup=warmup, prefix_hit=prefix_hit)
    results = request_results(seqs, warmup)
    decode_reps = reps[prefill_replicas:]
    peak = max((used for rep in decode_reps for _, used, *_ in rep.timeline), default=0) / d_config.num_blocks
    gpus = prefill_replicas * prefill.gpus + decode_replicas * decode.gpus
    summary = summarize(results, Gaps.joined(rep.gaps for rep in decode_reps), kv_blocks=d_config.num_blocks,
                        kv_peak=peak, preemptions=sum(r.preemptions for r in reps),
                        energy_j=sum(r.energy_j for r in reps), gpus=gpus, slo_ttft_s=slo_ttft_s,
                        slo_tpot_s=slo_tpot_s)
    prices = (prefill.price_usd_per_h, decode.price_usd_per_h)
    if None not in prices:
        usd_per_h = prefill_replicas * prefill.gpus * prices[0] + decode_replicas * decode.gpus * prices[1]
        out_tokens = sum(r.output_tokens for r in results if not r.warmup)
        summary = dataclasses.replace(summary, usd_per_million_tokens=usd_per_h * summary.span_s / 3600 /
                                      out_tokens * 1e6)
    side = disagg_summary(trips, reps, prefill_replicas, kv_link, [not r.warmup for r in results], summary.span_s)
    device = prefill.device if prefill.device == decode.device else f"{prefill.device} -> {decode.device}"
    engine = decode.engine.label if decode.engine else None
    return ServingResult(device, tuple(results), summary, tuple(tuple(r.timeline) for r in reps), d_config,
                         prefill_replicas + decode_replicas, engine, decode.layout_text, side)


__all__ = ["kv_transfer_s", "simulate_disaggregated"]
