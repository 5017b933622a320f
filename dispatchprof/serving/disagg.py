"""Disaggregated prefill and decode: P prefill replicas and D decode replicas (each side its own
device, layout, engine and KV cache), the KV cache of each request moved between them.

**A request's path** (as vLLM's disaggregated proxy runs it, benchmarks/disagg_benchmarks/
disagg_prefill_proxy_server.py: the prompt goes to a prefill instance with ``max_tokens=1``,
then the original request to a decode instance, whose stream the client reads):
1. it arrives at a prefill replica (`route`) and is served there as a request of one output
   token: queueing, chunked prefill, preemption, all under the prefill side's scheduler;
2. when its prefill step ends, its KV cache moves to a decode replica over the named link
   (`dispatchprof.sim.links.named_link`): ``send_s(prompt x kv_bytes_per_token + states, bw,
   latency)``, where kv_bytes_per_token is one prefill GPU's share (each GPU of the prefill replica
   sends its own share over its own NIC, in parallel) and states a linear-attention model's
   per-sequence states on that GPU (`dispatchprof.llm.gated_delta.SequenceState`);
3. it then queues at its decode replica (`route` over the decode side) for KV blocks of its
   whole prompt (the decode side's own capacity) and arrives *decoding*: its first step there is
   a decode step (one query token against the moved cache, in the decode batch, under the
   engine's decode graphs), which emits the first token the client sees (a preempted one
   recomputes its prompt on the decode side, as vLLM does).
So **TTFT = prefill-side queueing + prefill + transfer + decode-side queueing + the first decode
step**; TPOT and ITL are the decode side's. The prefill side's first token is discarded (the
proxy's max_tokens=1 request).

Each side's queueing is from its arrival (sent; transfer end) to the first step that schedules
the request; its utilisation is its replicas' busy time over the run's span (all replicas).
Closed-loop clients send their next request when one finishes on the decode side.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Callable, Sequence

from dispatchprof.serving.engine import (
    ROUTERS, Replica, Router, SeqState, StepCostFn, cached_tokens, check_fits, finish_step, route, start_step,
)
from dispatchprof.serving.metrics import Latency
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig


@dataclass(frozen=True)
class Side:
    """One side of a disaggregated deployment: its scheduler, step cost and replicas."""

    config: SchedulerConfig
    step_cost: StepCostFn
    replicas: int


@dataclass(frozen=True)
class DisaggSummary:
    """What the two sides add up to (seconds; utilisation a share of the span)."""

    prefill_replicas: int
    decode_replicas: int
    kv_link: str
    transfer_s: Latency
    prefill_queue_s: Latency
    decode_queue_s: Latency
    prefill_utilization: float
    decode_utilization: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Trip:
    """A request's times on the way: sent, prefill scheduled, prefill end, transfer end, decode scheduled."""

    sent: float = 0.0
    prefill_start: float | None = None
    prefill_end: float | None = None
    arrived: float | None = None
    decode_start: float | None = None


def run_disaggregated(requests: Sequence[Request], prefill: Side, decode: Side, transfer_s: Callable[[Request], float],
                      *, router: Router = "round_robin", concurrency: int | None = None, warmup: int = 0,
                      prefix_hit: float = 0.0) -> tuple[list[SeqState], list[Replica], list[Trip]]:
    """Serve ``requests`` on the two sides (module docstring); returns the decode-side states
    (list order, with the original send times: the metrics' input), every replica (prefill
    first) and each request's Trip."""
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {ROUTERS}, got {router!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < len(requests):
        raise ValueError(f"warmup must be a whole number of requests in [0, {len(requests) - 1}], got {warmup!r}")
    firsts = [replace(r, output_tokens=1) for r in requests]
    check_fits(firsts, prefill.config)
    check_fits(requests, decode.config)
    pre = [SeqState(i, r, float(r.prompt_tokens)) for i, r in enumerate(firsts)]
    for s in pre:
        s.cached = cached_tokens(s.request.prompt_tokens, prefix_hit, prefill.config.block_size)
        s.computed = float(s.cached)
    post = [SeqState(i, r, float(r.prompt_tokens), computed=float(r.prompt_tokens - 1), prefilled=True)
            for i, r in enumerate(requests)]            # they arrive decoding (module docstring, step 3)
    reps = [Replica(i, prefill.config, free_blocks=prefill.config.num_blocks) for i in range(prefill.replicas)]
    reps += [Replica(prefill.replicas + i, decode.config, free_blocks=decode.config.num_blocks)
             for i in range(decode.replicas)]
    trips = [Trip() for _ in requests]
    if concurrency is None:
        pending = deque(sorted((r.arrival_s, i) for i, r in enumerate(requests)))
        unsent = len(requests)
    else:
        unsent = min(concurrency, len(requests))
        pending = deque((0.0, i) for i in range(unsent))
    moving: list[tuple[float, int]] = []        # heap of (transfer end, request)
    done: list[tuple[float, int]] = []          # heap of (step end, replica)
    counts = [0, 0]                             # arrivals routed per side

    def side(rep: Replica) -> tuple[list[SeqState], StepCostFn, bool]:
        is_prefill = rep.index < prefill.replicas
        return (pre, prefill.step_cost, True) if is_prefill else (post, decode.step_cost, False)

    def horizon() -> float:                     # the next event of any kind (decode runs stop there)
        return min(pending[0][0] if pending else math.inf, moving[0][0] if moving else math.inf,
                   done[0][0] if done else math.inf)

    def start(rep: Replica, t: float) -> None:
        seqs, cost, is_prefill = side(rep)
        start_step(rep, seqs, t, cost, done, horizon())
        for i, _, _ in (rep.plan.scheduled if rep.plan is not None else ()):
            trip = trips[i]
            if is_prefill and trip.prefill_start is None:
                trip.prefill_start = t
            elif not is_prefill and trip.decode_start is None:
                trip.decode_start = t

    while pending or done or moving:
        t = min(pending[0][0] if pending else math.inf, moving[0][0] if moving else math.inf)
        if done and done[0][0] < t:
            t, k = heapq.heappop(done)
            rep = reps[k]
            seqs, _, is_prefill = side(rep)
            finished = finish_step(rep, seqs, t)
            for s in finished:
                if is_prefill:
                    trips[s.id].prefill_end = t
                    heapq.heappush(moving, (t + transfer_s(requests[s.id]), s.id))
                elif concurrency is not None and unsent < len(requests):
                    pending.append((t, unsent))
                    unsent += 1
            start(rep, t)
            continue
        while pending and pending[0][0] == t:
            i = pending.popleft()[1]
            s = pre[i]
            s.sent_s, s.send_order, s.warmup = t, counts[0], counts[0] < warmup
            post[i].sent_s, post[i].send_order, post[i].warmup = t, s.send_order, s.warmup
            trips[i].sent = t
            s.replica = route(router, counts[0], reps[:prefill.replicas])
            reps[s.replica].waiting.append(s)
            counts[0] += 1
        while moving and moving[0][0] == t:
            i = heapq.heappop(moving)[1]
            trips[i].arrived = t
            s = post[i]
            s.replica = prefill.replicas + route(router, counts[1], reps[prefill.replicas:])
            s.last_token_s = t
            reps[s.replica].waiting.append(s)
            counts[1] += 1
        for rep in reps:
            if rep.plan is None:
                start(rep, t)
    return post, reps, trips


def disagg_summary(trips: Sequence[Trip], reps: Sequence[Replica], prefill_replicas: int, kv_link: str,
                   measured: Sequence[bool], span_s: float) -> DisaggSummary:
    """Transfer times, each side's queueing (of the measured requests) and utilisation."""
    rows = [t for t, m in zip(trips, measured) if m]
    busy_p = sum(r.busy_s for r in reps[:prefill_replicas])
    busy_d = sum(r.busy_s for r in reps[prefill_replicas:])
    decode_replicas = len(reps) - prefill_replicas
    share = (lambda busy, n: busy / (n * span_s)) if span_s > 0 else (lambda busy, n: 0.0)
    return DisaggSummary(prefill_replicas, decode_replicas, kv_link,
                         Latency.of(t.arrived - t.prefill_end for t in rows),
                         Latency.of(t.prefill_start - t.sent for t in rows),
                         Latency.of(t.decode_start - t.arrived for t in rows),
                         share(busy_p, prefill_replicas), share(busy_d, decode_replicas))


__all__ = ["DisaggSummary", "Side", "Trip", "disagg_summary", "run_disaggregated"]
