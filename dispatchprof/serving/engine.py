"""The event loop: arrivals and step completions over N engine replicas behind a router.

**Clients.** Open loop (``concurrency`` None): every request arrives at its ``arrival_s``.
Closed loop (``concurrency`` = C, as ``vllm bench serve --max-concurrency``, genai-perf and
aiperf run a concurrency benchmark): C clients send the first C requests (in list order) at 0,
and each sends the next unsent request the moment one of its requests finishes; the request
arrives after the engine has planned the step that follows the finishing one (a client reacts to
a streamed token while the engine goes on), so it joins the step after. The first ``warmup``
requests sent are marked warm-up (`dispatchprof.serving.metrics` leaves them out).

**Prefix cache.** With ``prefix_hit`` = h, a request finds the first
``min(floor(h * prompt / block_size), floor((prompt - 1) / block_size)) * block_size`` tokens
of its prompt in the cache (whole blocks, at least one prompt token computed, as vLLM does): its
prefill computes the rest, attending to all. Its blocks still count in full (a shared prefix is
not deducted: conservative), and a preempted one keeps its cached prefix.

Events are processed in time order. An arrival (all arrivals at the same instant together) is
routed to a replica (`route`): ``round_robin`` (the i-th arrival to replica i mod N) or
``least_loaded`` (the replica with the fewest waiting and running requests, the lowest index on
a tie); an idle replica starts a step at once. When a step completes, its sequences advance (the
rules in `dispatchprof.serving.scheduler`) and the replica plans its next step at that instant,
with every request that arrived meanwhile in its queue. A step's duration and energy come from
``step_cost(prefill, decoding, images)``: (q, k, prompt tokens) per prefilling sequence, the
decoding ones as a `DecodeBatch` (number; sum and maximum of ``computed`` and of the prompts;
maximum generated), and the images of prompts whose first chunk runs in this step (their
encoder runs before the step).

**Decode runs.** When every running sequence of a replica decodes and nothing can join them
(no queue, or a queue whose first request cannot be admitted before one of them finishes:
``max_seqs`` already run, or its tokens or blocks do not fit, `queue_blocked`), its next steps
differ only in their cache lengths. It then runs them in one go (`decode_run`): as many steps as
end before the first sequence finishes, within the free KV blocks and, when the queue is empty,
before the next arrival (behind a blocked queue an arrival only queues); each step is timed from
its own composition and the sequences advance at once. This gives the same times as step by step
(the router sees no change of load in between; in the closed loop a run also ends before another
replica's step does, where a finish could send a request), at a cost per step that does not
depend on the batch size; its step costs are computed at every 32nd step and interpolated
between where the cost is linear there (`RunCosts`).

**Inter-token gaps.** Each token after a request's first records its gap from the one before
(`Replica.gaps`, a `dispatchprof.serving.metrics.Gaps`: each distinct gap with how many tokens had
it; the sequences of a step that had a token in the step before share one, and so do a decode
run's steps after its first).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Literal, NamedTuple, Sequence

import numpy as np

from dispatchprof.serving.metrics import Gaps
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig, StepPlan, plan_step, queue_blocked


class DecodeBatch(NamedTuple):
    """The decoding sequences of a step, as the engine tracks them: how many, their ``computed``
    tokens (sum, maximum), their prompts (sum, maximum) and generated tokens (maximum)."""

    n: int
    computed_sum: float
    computed_max: float
    prompt_sum: float = 0.0
    prompt_max: float = 0.0
    generated_max: float = 0.0

    def advanced(self, tokens: float) -> DecodeBatch:
        """The same sequences ``tokens`` tokens further on (a decode run)."""
        return self._replace(computed_sum=self.computed_sum + self.n * tokens, computed_max=self.computed_max + tokens,
                             generated_max=self.generated_max + tokens)


Router = Literal["round_robin", "least_loaded"]
ROUTERS: tuple[Router, ...] = ("round_robin", "least_loaded")
#: (prefill (q, k, prompt tokens) per prefilling sequence, the decoding ones, images) -> (seconds, joules)
StepCostFn = Callable[[Sequence[tuple[int, int, int]], DecodeBatch, int], tuple[float, float]]


@dataclass(slots=True, eq=False)
class SeqState:
    """A request's progress (see the scheduler's rules for known / computed); equal only to
    itself (a list of them is searched by identity, not by comparing every field)."""

    id: int
    request: Request
    known: float
    computed: float = 0.0
    blocks: int = 0
    prefilled: bool = False
    generated: float = 0.0
    first_token_s: float | None = None
    finish_s: float | None = None
    preemptions: int = 0
    replica: int = 0
    cached: int = 0                     # prompt tokens found in the prefix cache
    sent_s: float = 0.0                 # when its client sent it
    send_order: int = 0                 # 0 for the first request sent
    warmup: bool = False
    last_token_s: float = 0.0

    @property
    def total(self) -> float:
        """Tokens it holds when done: prompt + output (the scheduler reads it as `SeqFields`)."""
        return self.request.prompt_tokens + self.request.output_tokens


@dataclass
class Replica:
    """One engine: its queue, running sequences, free KV blocks and what it has done."""

    index: int
    config: SchedulerConfig
    waiting: deque = field(default_factory=deque)
    inbox: deque = field(default_factory=deque)    # arrived after the next step was planned (plan_ahead)
    running: list = field(default_factory=list)
    free_blocks: int = 0
    plan: StepPlan | None = None
    busy_s: float = 0.0
    energy_j: float = 0.0
    steps: int = 0
    preemptions: int = 0
    batch_waited: int = 0                          # steps its prompts have been held back in a row (scheduler rule 4)
    timeline: list = field(default_factory=list)   # (start s, KV blocks used, running, waiting, preemptions)
    gaps: Gaps = field(default_factory=Gaps)       # inter-token gaps of measured requests: (seconds, how many)

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.inbox) + len(self.running)


def route(router: Router, arrival_index: int, replicas: Sequence[Replica]) -> int:
    """The replica an arrival goes to (module docstring)."""
    if router == "round_robin":
        return arrival_index % len(replicas)
    return min(range(len(replicas)), key=lambda i: (replicas[i].load, i))


def check_fits(requests: Sequence[Request], config: SchedulerConfig) -> None:
    """Every request must be servable alone: its KV cache within all blocks, its prompt within
    one step's budget when prefill is not chunked."""
    for i, r in enumerate(requests):
        need = config.blocks_held(r.prompt_tokens + r.output_tokens)
        if need > config.num_blocks:
            raise ValueError(f"request {i} needs {need} KV blocks ({r.prompt_tokens} + {r.output_tokens} tokens) "
                             f"but a replica has {config.num_blocks}: it can never run")
        if not config.chunked_prefill and r.prompt_tokens > config.max_batched_tokens:
            raise ValueError(f"request {i} has a prompt of {r.prompt_tokens} tokens, more than max_batched_tokens="
                             f"{config.max_batched_tokens}; raise it or enable chunked prefill")


def cached_tokens(prompt: int, prefix_hit: float, block_size: int) -> int:
    """Prompt tokens found in the prefix cache (module docstring)."""
    return min(math.floor(prefix_hit * prompt / block_size), (prompt - 1) // block_size) * block_size


def run_engine(requests: Sequence[Request], config: SchedulerConfig, step_cost: StepCostFn, *,
               replicas: int = 1, router: Router = "round_robin", concurrency: int | None = None,
               warmup: int = 0, prefix_hit: float = 0.0) -> tuple[list[SeqState], list[Replica]]:
    """Serve ``requests``; returns their states (list order) and the replicas."""
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {ROUTERS}, got {router!r}")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise ValueError(f"concurrency must be a whole number of clients >= 1, got {concurrency!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < len(requests):
        raise ValueError(f"warmup must be a whole number of requests in [0, {len(requests) - 1}] (fewer than the "
                         f"{len(requests)} requests), got {warmup!r}")
    if not 0 <= prefix_hit <= 1:
        raise ValueError(f"prefix_hit must be a rate in [0, 1], got {prefix_hit!r}")
    check_fits(requests, config)
    seqs = [SeqState(i, r, float(r.prompt_tokens)) for i, r in enumerate(requests)]
    for s in seqs:
        s.cached = cached_tokens(s.request.prompt_tokens, prefix_hit, config.block_size)
        s.computed = float(s.cached)
    reps = [Replica(i, config, free_blocks=config.num_blocks) for i in range(replicas)]
    if concurrency is None:
        pending = deque((requests[i].arrival_s, i) for i in sorted(range(len(seqs)),
                                                                   key=lambda i: (requests[i].arrival_s, i)))
        unsent = len(seqs)
    else:
        unsent = min(concurrency, len(seqs))
        pending = deque((0.0, i) for i in range(unsent))
    done: list[tuple[float, int]] = []          # heap of (step end, replica)
    sent = 0

    def next_arrival() -> float:
        """The earliest time a request may arrive next (a closed loop's come at finishes)."""
        t = pending[0][0] if pending else math.inf
        return min(t, done[0][0]) if concurrency is not None and done and unsent < len(seqs) else t

    while pending or done:
        t_arrival = pending[0][0] if pending else math.inf
        if done and done[0][0] < t_arrival:
            t, i = heapq.heappop(done)
            finished = _finish_step(reps[i], seqs, t)
            sends = min(len(finished), len(seqs) - unsent) if concurrency is not None else 0
            _start_step(reps[i], seqs, t, step_cost, done, t if sends else next_arrival())
            for _ in range(sends):                  # they arrive after that step was planned
                pending.append((t, unsent))
                unsent += 1
            continue
        while pending and pending[0][0] == t_arrival:
            s = seqs[pending.popleft()[1]]
            s.sent_s, s.send_order, s.warmup = t_arrival, sent, sent < warmup
            s.replica = route(router, sent, reps)
            rep = reps[s.replica]
            (rep.inbox if rep.config.plan_ahead and rep.plan is not None else rep.waiting).append(s)
            sent += 1
        for rep in reps:
            if rep.plan is None:
                _start_step(rep, seqs, t_arrival, step_cost, done, next_arrival())
    return seqs, reps


_RUN = StepPlan(())          # the plan of a decode run: its sequences advanced when it started


def _start_step(rep: Replica, seqs: list[SeqState], t: float, step_cost: StepCostFn, done: list,
                t_next_arrival: float) -> None:
    if not rep.waiting and not rep.running:                # an idle engine takes its arrivals at once
        rep.waiting.extend(rep.inbox)
        rep.inbox.clear()
    if not rep.waiting and not rep.running:
        rep.plan = None
        return
    lagged = list(rep.inbox)               # plan_ahead: this step was planned before they came
    rep.inbox.clear()
    if all(s.prefilled for s in rep.running) and (not rep.waiting or queue_blocked(
            rep.running, rep.waiting[0], rep.free_blocks, rep.config)):
        blocked = bool(rep.waiting)
        end = decode_run(rep, t, step_cost, math.inf if blocked else (t if lagged else t_next_arrival))
        if end is not None:
            rep.waiting.extend(lagged)
            rep.plan = _RUN
            heapq.heappush(done, (end, rep.index))
            return
    while True:     # a plan that only preempted (a prefill gave way to older sequences) is planned again
        plan = plan_step(rep.running, rep.waiting, rep.free_blocks,
                         rep.config, rep.batch_waited)
        rep.batch_waited = plan.waited
        for i in plan.preempted:                   # newest first: the oldest ends at the front
            s = seqs[i]
            rep.running.remove(s)
            rep.free_blocks += s.blocks
            s.computed, s.blocks, s.prefilled = float(s.cached), 0, False
            s.preemptions += 1
            rep.preemptions += 1
            rep.waiting.appendleft(s)
        for _ in plan.admitted:
            rep.running.append(rep.waiting.popleft())
        if plan.scheduled or not plan.preempted:
            break
    rep.waiting.extend(lagged)
    if not plan.scheduled:
        raise RuntimeError(f"replica {rep.index} scheduled nothing with {len(rep.waiting)} requests waiting")
    prefill, images, decoding = [], 0, []
    for i, q, new_blocks in plan.scheduled:
        s = seqs[i]
        rep.free_blocks -= new_blocks
        s.blocks += new_blocks
        if s.prefilled:
            decoding.append(s)
        else:
            prefill.append((q, int(s.computed) + q, s.request.prompt_tokens))
            if s.computed == s.cached and s.first_token_s is None:
                images += s.request.images
    seconds, joules = step_cost(prefill, decode_batch(decoding), images)
    _account(rep, t, seconds, joules, 1)
    rep.plan = plan
    heapq.heappush(done, (t + seconds, rep.index))


def decode_batch(decoding: Sequence[SeqState]) -> DecodeBatch:
    """The DecodeBatch of these decoding sequences."""
    if not decoding:
        return DecodeBatch(0, 0.0, 0.0)
    return DecodeBatch(len(decoding), sum(s.computed for s in decoding), max(s.computed for s in decoding),
                       sum(s.request.prompt_tokens for s in decoding), max(s.request.prompt_tokens for s in decoding),
                       max(s.generated for s in decoding))


def _account(rep: Replica, t: float, seconds: float, joules: float, steps: int) -> None:
    rep.timeline.append((t, rep.config.num_blocks - rep.free_blocks, len(rep.running), len(rep.waiting),
                         rep.preemptions))
    rep.busy_s += seconds
    rep.energy_j += joules
    rep.steps += steps


def decode_run(rep: Replica, t: float, step_cost: StepCostFn, t_next_arrival: float) -> float | None:
    """Run the decode steps of the module docstring from time ``t``; their end, or None when
    not even one step qualifies (the normal rules then run it). The running sequences' cache
    lengths and blocks are read into arrays once (a decode side can hold thousands of sequences,
    and its runs are cut at every arrival); the arithmetic is `SchedulerConfig.blocks_held`'s,
    element by element (every sequence holds tokens, so its ``state_blocks`` always count)."""
    cfg, running = rep.config, rep.running
    n, q, gain = len(running), cfg.decode_q, cfg.decode_gain
    if n * q > cfg.max_batched_tokens:
        return None
    computed = np.fromiter((s.computed for s in running), float, n)
    blocks = np.fromiter((s.blocks for s in running), float, n)
    left = np.fromiter((s.request.output_tokens - s.generated for s in running), float, n)
    # steps before the first finish (that step runs through the normal rules)
    limit = int(np.ceil(left / gain).min()) - 1

    def held(m: int) -> np.ndarray:           # blocks each sequence holds once m steps' tokens are cached
        return np.ceil((computed + (m - 1) * gain + q) / cfg.block_size) + cfg.state_blocks

    def blocks_after(m: int) -> int:          # new blocks m steps need
        return int(np.maximum(held(m) - blocks, 0.0).sum())

    if limit < 1 or blocks_after(1) > rep.free_blocks:
        return None
    if blocks_after(limit) > rep.free_blocks:
        lo, hi = 1, limit                      # largest m with blocks_after(m) <= free
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if blocks_after(mid) <= rep.free_blocks else (lo, mid - 1)
        limit = lo
    costs = RunCosts(step_cost, decode_batch(running), gain)
    end, seconds, joules, m = t, 0.0, 0.0, 0
    measured = sum(1 for s in running if not s.warmup)
    while m < limit:
        dt, dj = costs(m)
        if m and end + dt >= t_next_arrival:
            break
        end, seconds, joules, m = end + dt, seconds + dt, joules + dj, m + 1
        if m == 1:
            rep.gaps.extend((end - s.last_token_s, 1) for s in running if not s.warmup)
        elif measured:
            rep.gaps.append((dt, measured))
        if end >= t_next_arrival:
            break
    after = held(m)
    rep.free_blocks -= int(np.maximum(after - blocks, 0.0).sum())
    tokens = m * gain
    for s, b in zip(running, np.maximum(blocks, after).tolist()):
        s.blocks = int(b)
        s.computed += tokens
        s.generated += tokens
        s.known = s.request.prompt_tokens + s.generated
        s.last_token_s = end
    _account(rep, t, seconds, joules, m)
    return end


class RunCosts:
    """The (seconds, joules) of step m of a decode run (the sequences ``m * gain`` tokens on).

    A step's cost is a sum of per-op times that are linear in the cache lengths between a few
    kinks (an op turning from memory- to compute-bound, a tile boundary). The cost is computed
    at every `STRIDE`-th step and at the middle of each stretch between two: where the middle
    lies on the line through the ends to within `REL_TOL` (relative), the stretch is linear and
    its steps are interpolated; otherwise (a kink or a step inside it) every step of the stretch
    is computed. A single kink or step is always caught by the middle (it moves the middle off
    the line), so the times are those of computing every step, to rounding."""

    STRIDE = 32
    REL_TOL = 1e-9

    def __init__(self, step_cost: StepCostFn, batch: DecodeBatch, gain: float) -> None:
        self.step_cost, self.batch, self.gain = step_cost, batch, gain
        self._at: dict[int, tuple[float, float]] = {}
        self._linear: dict[int, bool] = {}

    def exact(self, m: int) -> tuple[float, float]:
        cost = self._at.get(m)
        if cost is None:
            cost = self._at[m] = self.step_cost((), self.batch.advanced(m * self.gain), 0)
        return cost

    def __call__(self, m: int) -> tuple[float, float]:
        a = m - m % self.STRIDE
        if m == a:
            return self.exact(m)
        linear = self._linear.get(a)
        if linear is None:
            lo, hi, mid = self.exact(a), self.exact(a + self.STRIDE), self.exact(a + self.STRIDE // 2)
            linear = self._linear[a] = all(abs(c - (u + v) / 2) <= self.REL_TOL * max(abs(c), 1e-300)
                                           for u, v, c in zip(lo, hi, mid))
        if not linear:
            return self.exact(m)
        lo, hi, f = self._at[a], self._at[a + self.STRIDE], (m - a) / self.STRIDE
        return lo[0] + f * (hi[0] - lo[0]), lo[1] + f * (hi[1] - lo[1])


def _finish_step(rep: Replica, seqs: list[SeqState], t: float) -> list[SeqState]:
    """Advance the sequences of the step that ended at ``t``; returns those that finished."""
    assert rep.plan is not None
    finished = []
    for i, q, _ in rep.plan.scheduled:
        s = seqs[i]
        if s.prefilled:
            s.computed = s.known
            gain = rep.config.decode_gain
            if s.first_token_s is None:             # a disaggregated decode side's arrival: its first token
                s.first_token_s = t
            elif not s.warmup:
                rep.gaps.append((t - s.last_token_s, 1))
        else:
            s.computed += q
            if s.computed < s.known:
                continue                            # a chunk of a longer prefill
            s.prefilled, gain = True, 1.0
            if s.first_token_s is None:
                s.first_token_s = t
            elif not s.warmup:                      # the token after a preempted sequence's recompute
                rep.gaps.append((t - s.last_token_s, 1))
        s.last_token_s = t
        s.generated = min(s.generated + gain, s.request.output_tokens)
        s.known = s.request.prompt_tokens + s.generated
        if s.generated >= s.request.output_tokens:
            s.finish_s = t
            rep.running.remove(s)
            rep.free_blocks += s.blocks
            s.blocks = 0
            finished.append(s)
    rep.plan = None
    return finished


#: Public names of the step rules for other event loops (`dispatchprof.serving.disagg`).
start_step = _start_step
finish_step = _finish_step
