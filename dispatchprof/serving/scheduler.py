"""The continuous-batching scheduler (in the style of vLLM), as small pure rules.

Every step the engine runs one forward over a batch of sequences. A sequence knows ``known``
tokens (its prompt and the tokens generated so far) and holds the keys and values of
``computed`` of them in its KV-cache blocks (``block_size`` tokens per block). The rules, in the
order `plan_step` applies them:

1. **Running sequences first**, oldest first. A sequence still prefilling asks for
   ``known - computed`` tokens; with chunked prefill it gets ``min(that, budget)``
   (`prefill_chunk`), without it all or nothing. A decoding sequence asks for ``decode_q``
   tokens (1; ``k + 1`` under speculative decoding). The token budget of a step is
   ``max_batched_tokens``.
2. **KV memory**: a sequence scheduled for q tokens needs ``blocks_held(computed + q)`` blocks in
   all (`SchedulerConfig.blocks_held`: ceil(tokens / block_size), plus ``state_blocks`` for a
   model whose linear-attention states share the pool: `dispatchprof.serving.state_memory`).
   When the free blocks are not enough, the newest running sequence is **preempted** (recompute:
   its blocks are freed, it goes back to the front of the queue and later prefills all its known
   tokens again), until the blocks suffice or the sequence itself was the newest.
3. **Admission**: only when nothing was preempted this step, waiting sequences are admitted
   first come first served while fewer than ``max_seqs`` run, budget is left and their first
   chunk's blocks are free; the first one that does not fit stops admission (it waits).
4. **Batch waiting** (TensorRT-LLM's ``batch_wait_timeout_iters`` and ``batch_wait_max_tokens_ratio``,
   off unless set): a step that would carry both decodes and prompt tokens runs the decodes alone
   (the prompts' chunks are held back and admissions undone) while prompts have been held back
   fewer than ``batch_wait_steps`` steps since they last ran and the step's tokens (each scheduled
   prompt's whole length plus one per decode) are fewer than ``batch_wait_tokens``. Steps without
   both kinds leave the count of held steps alone (tensorrt_llm/_torch/pyexecutor/py_executor.py,
   PyExecutor._schedule and _waiting_requests).

After a step, a sequence whose ``computed`` reaches ``known`` samples a token: the first one
after a prefill (its time to first token), ``decode_gain`` tokens after a decode step (1; the
expected accepted tokens under speculative decoding).

Engines differ in two rules (`dispatchprof.serving.engines` names which each follows):

- ``policy``: ``mixed`` (vLLM V1, TensorRT-LLM's in-flight batching) runs decodes and prefill
  chunks in one step as above; ``prefill_first`` (SGLang) runs a step of prefills only whenever
  a running sequence has prompt tokens left or a waiting one can be admitted (rules 1-3 over the
  prefilling sequences alone; the decoding ones wait), and a step of every decode otherwise;
  admission then takes the blocks of a request's whole known tokens, not only its first chunk's,
  and needs them free, as SGLang's PrefillAdder does ("total_tokens >= self.rem_total_tokens"
  refuses a request whose whole input, with part of its output, does not fit): no decode runs
  between the chunks of a prefill to free blocks, so a prompt admitted for one chunk that cannot
  hold the rest would preempt itself at its next chunk and be admitted again, forever.
- ``reserve_output``: admission reserves the blocks of a request's whole prompt and output
  (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler: a running sequence never needs a new
  block, so none is preempted), instead of the blocks of its first chunk.

One rule belongs to the event loop (`dispatchprof.serving.engine`): with ``plan_ahead`` (an engine
whose host schedules step k + 1 while step k runs: TensorRT-LLM's overlap scheduler, SGLang's
overlap schedule, vLLM's async scheduling) a request that arrives while a step runs joins the
step after the next one.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Iterable, Literal, Protocol, Sequence

Policy = Literal["mixed", "prefill_first"]
POLICIES: tuple[Policy, ...] = ("mixed", "prefill_first")


@dataclass(frozen=True)
class SchedulerConfig:
    """Limits of one engine replica: sequences and tokens per step, KV blocks, chunked prefill."""

    num_blocks: int
    block_size: int = 16
    max_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill: bool = True
    decode_q: int = 1                  # tokens a decoding sequence puts through the model per step
    decode_gain: float = 1.0           # tokens it gains per step (expected, speculative decoding)
    policy: Policy = "mixed"
    reserve_output: bool = False       # admission reserves the blocks of prompt + output
    plan_ahead: bool = False           # the next step is planned while this one runs (event loop: arrivals lag)
    state_blocks: int = 0              # blocks a running sequence holds for its linear-attention states
    batch_wait_steps: int = 0          # rule 4: steps prompts may be held back in a row (0: none)
    batch_wait_tokens: int = 0         # rule 4: step tokens that end the wait (0: none)

    def __post_init__(self) -> None:
        for name in ("num_blocks", "block_size", "max_seqs", "max_batched_tokens", "decode_q"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if not self.decode_gain >= 1:
            raise ValueError(f"decode_gain must be >= 1 token per step, got {self.decode_gain!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        for name in ("state_blocks", "batch_wait_steps", "batch_wait_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")

    def blocks_held(self, tokens: float) -> int:
        """Blocks a sequence with ``tokens`` tokens in the cache holds: `blocks_for` them, plus
        ``state_blocks`` once it holds any."""
        return blocks_for(tokens, self.block_size) + (self.state_blocks if tokens > 0 else 0)


class SeqFields(Protocol):
    """What the rules read of a sequence, and never change: id, tokens known, tokens in the KV
    cache, blocks held, whether its prefill is done (it decodes), and the tokens it holds when
    done (prompt + output: what ``reserve_output`` admission reserves). `SeqView` is one; the
    engine passes its own sequence states, read as they stand when a rule is asked."""

    @property
    def id(self) -> int: ...
    @property
    def known(self) -> float: ...
    @property
    def computed(self) -> float: ...
    @property
    def blocks(self) -> int: ...
    @property
    def prefilled(self) -> bool: ...
    @property
    def total(self) -> float: ...


@dataclass(frozen=True, slots=True)
class SeqView:
    """A sequence's `SeqFields` as values."""

    id: int
    known: float
    computed: float
    blocks: int
    prefilled: bool = False
    total: float = 0.0


@dataclass(frozen=True)
class StepPlan:
    """One step: (id, q tokens, new blocks) per scheduled sequence in order, the ids preempted
    (newest first), the ids admitted from the queue, and the steps prompts have been held back in
    a row after this one (rule 4)."""

    scheduled: tuple[tuple[int, int, int], ...]
    preempted: tuple[int, ...] = ()
    admitted: tuple[int, ...] = ()
    waited: int = 0


def blocks_for(tokens: float, block_size: int) -> int:
    """KV blocks that hold ``tokens`` tokens: ceil(tokens / block_size)."""
    return math.ceil(tokens / block_size)


def prefill_chunk(remaining: int, budget: int, chunked: bool) -> int:
    """Prefill tokens a sequence gets this step: min(remaining, budget) with chunking, else
    remaining when it fits in the budget and 0 when it does not."""
    if chunked:
        return max(0, min(remaining, budget))
    return remaining if remaining <= budget else 0


def tokens_asked(s: SeqFields, budget: int, config: SchedulerConfig) -> int:
    """Tokens sequence ``s`` is scheduled for within ``budget`` (rule 1)."""
    if s.prefilled:
        return config.decode_q if config.decode_q <= budget else 0
    return prefill_chunk(math.ceil(s.known - s.computed), budget, config.chunked_prefill)


def plan_step(running: Sequence[SeqFields], waiting: Iterable[SeqFields], free_blocks: int,
              config: SchedulerConfig, waited: int = 0) -> StepPlan:
    """The batch of the next step (rules 1-4 of the module docstring, under ``config.policy``);
    ``running`` oldest first, ``waiting`` in queue order (read lazily: admission stops at the
    first that does not fit); ``waited``: the steps prompts have been held back in a row before it."""
    plan, prompts = _plan(running, waiting, free_blocks, config, decodes=config.policy == "mixed")
    if config.policy != "mixed" and not (plan.scheduled or plan.preempted):
        plan, prompts = _plan(running, (), free_blocks, config, decodes=True)
    return _batch_wait(plan, prompts, waited, config)


def _batch_wait(plan: StepPlan, prompts: dict[int, float], waited: int, config: SchedulerConfig) -> StepPlan:
    """Rule 4 on a step of rules 1-3 whose prefilling sequences hold ``prompts`` (id -> whole length)."""
    if not (config.batch_wait_steps or config.batch_wait_tokens) or not prompts or len(prompts) == len(plan.scheduled):
        return dataclasses.replace(plan, waited=waited)
    tokens = sum(prompts.values()) + len(plan.scheduled) - len(prompts)
    if waited >= config.batch_wait_steps or tokens >= config.batch_wait_tokens:
        return plan
    decodes = tuple(entry for entry in plan.scheduled if entry[0] not in prompts)
    return StepPlan(decodes, plan.preempted, (), waited + 1)


def _plan(running: Sequence[SeqFields], waiting: Iterable[SeqFields], free_blocks: int, config: SchedulerConfig,
          decodes: bool) -> tuple[StepPlan, dict[int, float]]:
    """Rules 1-3, and the whole length of every sequence it schedules prompt tokens for (id ->
    tokens); with ``decodes`` False, rule 1 passes over decoding sequences (they stay running)."""
    budget, free = config.max_batched_tokens, free_blocks
    run = list(running)
    scheduled: list[tuple[int, int, int]] = []
    preempted: list[int] = []
    prompts: dict[int, float] = {}
    i = 0
    while i < len(run):
        s = run[i]
        q = tokens_asked(s, budget, config) if decodes or not s.prefilled else 0
        if q == 0:
            i += 1
            continue
        need = config.blocks_held(s.computed + q) - s.blocks
        while need > free and run[-1] is not s:
            victim = run.pop()
            free += victim.blocks
            preempted.append(victim.id)
        if need > free:                                   # s is the newest: preempt itself
            run.pop()
            free += s.blocks
            preempted.append(s.id)
            break
        free -= max(need, 0)
        budget -= q
        scheduled.append((s.id, q, max(need, 0)))
        if not s.prefilled:
            prompts[s.id] = s.known
        i += 1
    admitted: list[int] = []
    if not preempted:
        for w in waiting:
            if len(run) + len(admitted) >= config.max_seqs or budget == 0:
                break
            q = tokens_asked(w, budget, config)
            held = max(w.total, w.computed + q) if config.reserve_output else w.computed + q
            if config.policy == "prefill_first":          # the whole known tokens (module docstring)
                held = max(held, w.known)
            need = config.blocks_held(held) - w.blocks
            if q == 0 or need > free:
                break
            free -= need
            budget -= q
            scheduled.append((w.id, q, need))
            admitted.append(w.id)
            prompts[w.id] = w.known
    return StepPlan(tuple(scheduled), tuple(preempted), tuple(admitted)), prompts


def queue_blocked(running: Sequence[SeqFields], head: SeqFields, free_blocks: int, config: SchedulerConfig) -> bool:
    """Whether a step of every running sequence decoding (all prefilled) leaves the queue whose
    first sequence is ``head`` waiting, and so does every such step after it until one finishes:
    no decode is preempted and rule 3 stops at the head (the running sequences fill ``max_seqs``,
    their decodes leave no budget, or the head's tokens or blocks do not fit). While they decode,
    the running sequences, the budget and the head's need stay and the free blocks only shrink,
    so the head stays out (the engine then runs the steps as one decode run). Rules 1-3 decide it
    (`_plan`: under prefill_first over a step of prompts alone, where admission happens)."""
    plan, _ = _plan(running, (head,), free_blocks, config, decodes=config.policy == "mixed")
    return not plan.preempted and not plan.admitted
