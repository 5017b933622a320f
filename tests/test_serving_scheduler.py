"""The scheduler's rules and the event loop, worked by hand on tiny traces.

Every engine test uses a flat step cost of 10 ms (and 1 J), so times count steps."""

import dataclasses
import math

import pytest

from dispatchprof.serving.engine import route, run_engine, Replica
from dispatchprof.serving.metrics import percentile, request_results
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import (SchedulerConfig, SeqView, blocks_for, plan_step, prefill_chunk,
                                            queue_blocked)

STEP = 0.01


def flat(prefill, decoding, images):
    return STEP, 1.0


def serve(requests, **config):
    cfg = SchedulerConfig(**{"num_blocks": 100, "block_size": 4, "max_batched_tokens": 64, **config})
    seqs, reps = run_engine(requests, cfg, flat)
    return request_results(seqs), reps


def test_blocks_and_chunks():
    assert blocks_for(8, 4) == 2 and blocks_for(9, 4) == 3 and blocks_for(0, 4) == 0
    assert prefill_chunk(20, 8, True) == 8           # chunked: min(20, 8)
    assert prefill_chunk(5, 8, True) == 5
    assert prefill_chunk(20, 8, False) == 0          # not chunked: all or nothing
    assert prefill_chunk(8, 8, False) == 8


def test_two_requests_arriving_together_share_the_first_step():
    cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64)
    plan = plan_step([], [SeqView(0, 8, 0, 0), SeqView(1, 6, 0, 0)], 100, cfg)
    # 8 tokens -> 2 blocks, 6 tokens -> ceil(6/4) = 2 blocks; 14 tokens <= 64
    assert plan.scheduled == ((0, 8, 2), (1, 6, 2)) and plan.admitted == (0, 1) and plan.preempted == ()
    results, reps = serve([Request(0.0, 8, 3), Request(0.0, 6, 3)])
    # step 1 [0, 10 ms): both prefills -> first tokens at 10 ms; steps 2, 3 decode -> tokens 2, 3
    for r in results:
        assert r.ttft_s == pytest.approx(0.01)
        assert r.e2e_s == pytest.approx(0.03)
        assert r.tpot_s == pytest.approx((0.03 - 0.01) / 2)
    assert reps[0].steps == 3 and reps[0].energy_j == pytest.approx(3.0)


def test_a_request_waits_for_kv_memory():
    # 3 blocks of 4 tokens. r0: 8-token prompt (2 blocks), 2 outputs; r1: 8-token prompt, 1 output.
    cfg = SchedulerConfig(num_blocks=3, block_size=4, max_batched_tokens=64)
    plan = plan_step([], [SeqView(0, 8, 0, 0), SeqView(1, 8, 0, 0)], 3, cfg)
    assert plan.scheduled == ((0, 8, 2),)            # r1 needs 2 blocks, 1 is free: it waits
    results, _ = serve([Request(0.0, 8, 2), Request(0.0, 8, 1)], num_blocks=3)
    # step 1: r0 prefill (first token 10 ms); step 2: r0 decodes its 9th token into a 3rd block
    # (0 free: r1 still waits), r0 finishes at 20 ms and frees 3 blocks; step 3: r1 prefill -> 30 ms
    assert results[0].ttft_s == pytest.approx(0.01) and results[0].e2e_s == pytest.approx(0.02)
    assert results[1].ttft_s == pytest.approx(0.03) and results[1].e2e_s == pytest.approx(0.03)


def test_preemption_frees_the_newest_sequence():
    cfg = SchedulerConfig(num_blocks=3, block_size=4, max_batched_tokens=64)
    # s0 decodes token 9 (needs blocks_for(8 + 1) = 3, holds 2); s1 holds 1; nothing free
    running = [SeqView(0, 9, 8, 2, True), SeqView(1, 5, 4, 1, True)]
    plan = plan_step(running, [SeqView(2, 4, 0, 0)], 0, cfg)
    assert plan.preempted == (1,)                    # s1 (newest) gives its block to s0
    assert plan.scheduled == ((0, 1, 1),)
    assert plan.admitted == ()                       # no admission in a step that preempted


def test_a_sequence_preempts_itself_when_it_is_the_newest():
    cfg = SchedulerConfig(num_blocks=2, block_size=4, max_batched_tokens=64)
    plan = plan_step([SeqView(0, 9, 8, 2, True)], [], 0, cfg)
    assert plan.preempted == (0,) and plan.scheduled == ()


def test_preempted_request_recomputes_its_tokens():
    # 4 blocks of 4 tokens. r0: prompt 4, 8 outputs (needs blocks_for(4 + 7) = 3 at the end);
    # r1: prompt 4, 8 outputs, same. Both prefill in step 1 (1 block each).
    # Tokens in the cache after step s (s >= 1): 4 + (s - 1) per sequence; a sequence needs a
    # 2nd block to decode with 4 cached (step 2: 4 + 1 = 5 -> 2 blocks each, 4 used);
    # step 6 (8 cached + 1 = 9 -> 3 blocks): r0 needs a 3rd block, none free -> r1 is preempted.
    results, reps = serve([Request(0.0, 4, 8), Request(0.0, 4, 8)], num_blocks=4)
    assert results[0].preemptions == 0 and results[1].preemptions == 1
    assert reps[0].preemptions == 1
    # r0 alone from step 6: it finishes at step 8 (8 tokens: 1 from the prefill + 7 decodes)
    assert results[0].e2e_s == pytest.approx(8 * STEP)
    # r1 had 5 tokens (steps 1..5); at step 9 it recomputes 4 + 5 = 9 tokens (3 blocks) and
    # samples its 6th token, then decodes tokens 7, 8 in steps 10, 11
    assert results[1].ttft_s == pytest.approx(STEP)
    assert results[1].e2e_s == pytest.approx(11 * STEP)


def test_chunked_prefill_splits_a_long_prompt():
    cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=8)
    plan = plan_step([], [SeqView(0, 20, 0, 0)], 100, cfg)
    assert plan.scheduled == ((0, 8, 2),)            # first chunk: 8 of 20 tokens
    # a decoding sequence and a prefilling one share the budget: 1 + 7
    plan = plan_step([SeqView(1, 9, 8, 2, True), SeqView(0, 20, 8, 2)], [], 100, cfg)
    assert plan.scheduled == ((1, 1, 1), (0, 7, 2))   # blocks_for(15) - 2 = 2
    results, _ = serve([Request(0.0, 20, 2)], max_batched_tokens=8)
    # chunks 8, 8, 4: the first token after the 3rd step, the second one step later
    assert results[0].ttft_s == pytest.approx(3 * STEP) and results[0].e2e_s == pytest.approx(4 * STEP)


def test_without_chunking_a_long_prompt_is_refused():
    with pytest.raises(ValueError, match="request 0 has a prompt of 20 tokens, more than max_batched_tokens=8"):
        serve([Request(0.0, 20, 2)], max_batched_tokens=8, chunked_prefill=False)
    with pytest.raises(ValueError, match="request 0 needs 26 KV blocks"):
        serve([Request(0.0, 100, 2)], num_blocks=10)    # ceil(102 / 4) = 26 > 10


def test_max_seqs_and_arrival_during_a_step():
    # max 1 sequence: r1 waits for r0 to finish (2 steps), then runs 2 steps
    results, _ = serve([Request(0.0, 4, 2), Request(0.0, 4, 2)], max_seqs=1)
    assert [r.e2e_s for r in results] == pytest.approx([0.02, 0.04])
    # an arrival during a step joins the next step: r1 at 5 ms starts at 10 ms
    results, _ = serve([Request(0.0, 4, 3), Request(0.005, 4, 1)])
    assert results[1].ttft_s == pytest.approx(0.02 - 0.005)
    assert results[0].e2e_s == pytest.approx(0.03)


def test_speculative_decoding_gains_expected_tokens_per_step():
    # a = 0.8, k = 4: 3.3616 tokens per step. After the prefill's token, 32 more need
    # ceil(32 / 3.3616) = 10 steps (9 steps give 30.25): 11 steps in all
    results, _ = serve([Request(0.0, 64, 33)], decode_q=5, decode_gain=3.3616)
    assert results[0].e2e_s == pytest.approx(11 * STEP)
    assert results[0].tpot_s == pytest.approx(10 * STEP / 32)


def test_routers():
    reps = [Replica(i, SchedulerConfig(num_blocks=1)) for i in range(3)]
    assert [route("round_robin", i, reps) for i in range(4)] == [0, 1, 2, 0]
    reps[0].running.extend([1, 2])
    reps[1].waiting.append(3)
    assert route("least_loaded", 0, reps) == 2
    cfg = SchedulerConfig(num_blocks=100, block_size=4)
    seqs, reps = run_engine([Request(0.0, 4, 2)] * 4, cfg, flat, replicas=2)
    assert [s.replica for s in seqs] == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="router must be one of"):
        run_engine([Request(0.0, 4, 2)], cfg, flat, router="random")


def test_decode_runs_equal_step_by_step():
    """Decode runs (many steps at once) give the times of the plain rules: compare with a cost
    that forbids runs (a different cost per call makes no difference to the rules)."""
    reqs = [Request(0.003 * i, 10 + 7 * i % 50, 5 + 13 * i % 40) for i in range(40)]
    cfg = SchedulerConfig(num_blocks=60, block_size=4, max_batched_tokens=32, max_seqs=8)

    def cost(prefill, decoding, images):
        return 0.002 + 1e-5 * (sum(q for q, *_ in prefill) + decoding.n) + 1e-7 * decoding.computed_sum, 0.0

    fast, _ = run_engine(reqs, cfg, cost)
    import dispatchprof.serving.engine as engine
    original = engine.decode_run
    engine.decode_run = lambda *a: None
    try:
        slow, _ = run_engine(reqs, cfg, cost)
    finally:
        engine.decode_run = original
    for a, b in zip(fast, slow):
        assert a.first_token_s == pytest.approx(b.first_token_s, rel=1e-12)
        assert a.finish_s == pytest.approx(b.finish_s, rel=1e-12)
        assert a.preemptions == b.preemptions


def test_a_queue_is_blocked_when_its_head_cannot_join_any_decode_step_by_hand():
    """Two decoding sequences of 8 cached tokens in 2 blocks of 4 each need a third block for
    their next token; the head of the queue, a prompt of 8 tokens, needs 2 (3 when its 2 output
    tokens are reserved)."""
    cfg = SchedulerConfig(num_blocks=10, block_size=4, max_seqs=4, max_batched_tokens=16)
    running = [SeqView(i, 9, 8, 2, prefilled=True, total=12) for i in (0, 1)]
    head = SeqView(2, 8, 0, 0, total=10)
    assert queue_blocked(running, head, 3, cfg)           # 3 - 2 for the decodes = 1 < 2
    assert not queue_blocked(running, head, 4, cfg)       # 4 - 2 = 2: the head is admitted
    assert not queue_blocked(running, head, 1, cfg)       # the second decode preempts: the rules run
    reserve = dataclasses.replace(cfg, reserve_output=True)
    assert queue_blocked(running, head, 4, reserve)       # 2 < ceil(10 / 4) = 3
    first = dataclasses.replace(cfg, policy="prefill_first")
    assert not queue_blocked(running, head, 3, first)     # a step of prompts alone: 3 >= 2
    assert queue_blocked(running, head, 1, first)
    assert queue_blocked(running, head, 100, dataclasses.replace(cfg, max_seqs=2))          # max_seqs run
    assert queue_blocked(running, head, 100, dataclasses.replace(cfg, max_batched_tokens=2))  # no budget left


@pytest.mark.parametrize("policy", [{}, {"reserve_output": True}, {"policy": "prefill_first"},
                                    {"reserve_output": True, "plan_ahead": True},
                                    {"batch_wait_steps": 3, "batch_wait_tokens": 40}],
                         ids=["mixed", "reserve_output", "prefill_first", "plan_ahead", "batch_wait"])
@pytest.mark.parametrize("concurrency", [None, 6])
def test_decode_runs_behind_a_blocked_queue_equal_step_by_step(policy, concurrency):
    """More requests than the KV blocks hold: a queue waits behind running sequences that only
    decode. Runs taken there (fewer timeline rows) give the times, steps and gaps of planning
    every step by the rules (decode runs forbidden)."""
    reqs = [Request(0.002 * i, 12 + 5 * i % 23, 20 + 9 * i % 31) for i in range(30)]
    cfg = SchedulerConfig(num_blocks=40, block_size=4, max_batched_tokens=48, max_seqs=8, **policy)

    def cost(prefill, decoding, images):
        return 0.002 + 1e-5 * (sum(q for q, *_ in prefill) + decoding.n) + 1e-7 * decoding.computed_sum, 1.0

    import dispatchprof.serving.engine as engine
    fast, fast_reps = run_engine(reqs, cfg, cost, concurrency=concurrency)
    original = engine.decode_run
    engine.decode_run = lambda *a: None
    try:
        slow, slow_reps = run_engine(reqs, cfg, cost, concurrency=concurrency)
    finally:
        engine.decode_run = original
    assert fast_reps[0].steps == slow_reps[0].steps
    assert len(fast_reps[0].timeline) < len(slow_reps[0].timeline) - 100
    for a, b in zip(fast, slow):
        assert (a.sent_s, a.first_token_s, a.finish_s) == pytest.approx((b.sent_s, b.first_token_s, b.finish_s),
                                                                         rel=1e-12)
        assert a.preemptions == b.preemptions
    gaps = sorted((round(g, 12), n) for g, n in fast_reps[0].gaps)
    assert sum(n for _, n in gaps) == sum(n for _, n in slow_reps[0].gaps)
    assert percentile([g for g, n in gaps for _ in range(n)], 90) == pytest.approx(
        percentile([g for g, n in slow_reps[0].gaps for _ in range(n)], 90), rel=1e-9)


def test_percentile_interpolates():
    # positions (n-1) p / 100 over 1, 2, 3, 4: p50 -> 1.5 -> 2.5; p90 -> 2.7 -> 3.7
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert math.isclose(percentile([4, 1, 3, 2], 90), 3.7)
    assert percentile([], 50) == 0.0


def test_kv_timeline_records_use_and_preemptions():
    # the preemption trace of test_preempted_request_recomputes_its_tokens: 4 blocks
    _, reps = serve([Request(0.0, 4, 8), Request(0.0, 4, 8)], num_blocks=4)
    timeline = reps[0].timeline            # (start s, blocks used, running, waiting, preemptions so far)
    first = timeline[0]
    assert first[0] == 0.0 and first[1] == 2 and first[2] == 2      # step 1: two prefills, 1 block each
    assert max(row[1] for row in timeline) == 4                      # all 4 blocks in use at the peak
    assert timeline[-1][4] == 1                                      # one preemption by the end
    assert [row[4] for row in timeline] == sorted(row[4] for row in timeline)


def test_decode_run_costs_catch_kinks_and_steps():
    """RunCosts interpolates only where the cost is linear: a cost with a kink (memory- to
    compute-bound at 3,000 cached tokens) and a staircase (a tile of 128 keys) gives, step by
    step, what computing every step gives."""
    from dispatchprof.serving.engine import DecodeBatch, RunCosts

    calls = []

    def cost(prefill, decoding, images):
        calls.append(decoding.computed_max)
        k = decoding.computed_max
        return max(0.004, 1e-6 * decoding.computed_sum) + 1e-5 * math.ceil(k / 128), 2.0 * k

    batch = DecodeBatch(4, 4 * 700.0, 700.0)
    run = RunCosts(cost, batch, 1.0)
    got = [run(m) for m in range(900)]
    want = [cost((), batch.advanced(m), 0) for m in range(900)]
    calls_run = len(calls) - 900
    for g, w in zip(got, want):
        assert g == pytest.approx(w, rel=1e-12)
    # linear stretches (no tile boundary, no kink) cost 2 computed steps per 32, not 32
    assert calls_run < 900 / 2


def test_prefill_first_admits_a_prompt_only_when_all_of_it_fits():
    """SGLang admits a request only when its whole input fits (PrefillAdder: "total_tokens >=
    self.rem_total_tokens"): a 12-token prompt beside three decoding sequences holding 30 of 40
    blocks (block_size 1) waits, and the decodes run; vLLM's mixed policy admits its first chunk."""
    running = [SeqView(i, 10, 10, 10, True) for i in range(3)]
    prefill_first = SchedulerConfig(num_blocks=40, block_size=1, max_batched_tokens=8, policy="prefill_first")
    plan = plan_step(running, [SeqView(3, 12, 0, 0)], 10, prefill_first)
    assert (plan.scheduled, plan.admitted, plan.preempted) == (((0, 1, 1), (1, 1, 1), (2, 1, 1)), (), ())
    # 12 tokens fit in 12 free blocks: admitted, its first chunk of 8 in a step of prefills only, holding
    # the blocks of all 12 (its next chunk needs none)
    plan = plan_step(running, [SeqView(3, 12, 0, 0)], 12, prefill_first)
    assert (plan.scheduled, plan.admitted) == (((3, 8, 12),), (3,))
    assert plan_step(running + [SeqView(3, 12, 8, 12)], [], 0, prefill_first).scheduled == ((3, 4, 0),)
    mixed = dataclasses.replace(prefill_first, policy="mixed")
    plan = plan_step(running, [SeqView(3, 12, 0, 0)], 10, mixed)      # 3 decodes, then 5 of the prompt's 12
    assert (plan.scheduled, plan.admitted) == (((0, 1, 1), (1, 1, 1), (2, 1, 1), (3, 5, 5)), (3,))


def test_prefill_first_finishes_when_a_prompt_outgrows_the_free_cache():
    """Before the whole-prompt rule, a prompt admitted for one chunk that could not hold its next one
    preempted itself and was admitted again, forever (no decode frees blocks between chunks)."""
    import signal

    def stuck(signum, frame):
        raise AssertionError("the simulation did not end in 30 s")
    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(30)
    try:
        results, reps = serve([Request(0.0, 10, 6)] * 3 + [Request(0.0, 12, 2)], num_blocks=40, block_size=1,
                              max_batched_tokens=8, policy="prefill_first")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert len(results) == 4 and all(math.isfinite(r.e2e_s) for r in results)
    # the 12-token prompt waits until a 16-token sequence finishes: 30 + 3 x 6 = 48 > 40 blocks
    assert results[3].ttft_s > min(r.e2e_s for r in results[:3])


def test_rules_read_the_engines_states_as_their_views():
    """The engine passes its SeqStates to the rules (SeqFields); each plan equals the one of
    SeqViews holding the same values. By hand (blocks of 4): the three decodes need 1, 0 and 1
    new blocks; with 5 free, 3 are left: reserve_output sizes request 3 by its total (6 + 10 =
    16 tokens, 4 blocks) and admits nothing, plain admission needs 2 blocks for it and 1 for
    request 4; with none free the newest decode is preempted; max_seqs 3 blocks the queue."""
    from dispatchprof.serving.engine import SeqState

    def state(i, prompt, output, computed, blocks, prefilled):
        return SeqState(i, Request(0.0, prompt, output), known=prompt, computed=computed, blocks=blocks,
                        prefilled=prefilled)

    def view(s):
        return SeqView(s.id, s.known, s.computed, s.blocks, s.prefilled, s.request.prompt_tokens + s.request.output_tokens)

    def config(**kw):
        return SchedulerConfig(num_blocks=20, block_size=4, max_batched_tokens=64, **kw)

    running = [state(0, 8, 4, 8, 2, True), state(1, 7, 9, 7, 2, True), state(2, 4, 2, 4, 1, True)]
    waiting = [state(3, 6, 10, 0, 0, False), state(4, 3, 1, 0, 0, False)]
    cases = ((config(reserve_output=True), 5, (), ()), (config(), 5, (3, 4), ()), (config(), 0, (), (2,)),
             (config(max_seqs=3), 9, (), ()))
    for cfg, free, admitted, preempted in cases:
        plan = plan_step(running, waiting, free, cfg)
        assert (plan.admitted, plan.preempted) == (admitted, preempted)
        assert plan == plan_step([view(s) for s in running], [view(s) for s in waiting], free, cfg)
        assert queue_blocked(running, waiting[0], free, cfg) == \
            queue_blocked([view(s) for s in running], view(waiting[0]), free, cfg) == (not admitted and not preempted)
