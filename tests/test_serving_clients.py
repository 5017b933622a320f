"""Closed-loop clients, warm-up, the prefix cache and the metrics as benchmarks define them,
worked by hand on tiny traces (a flat step cost of 10 ms, so times count steps)."""

from dataclasses import astuple

import pytest

from dispatchprof.serving import engine
from dispatchprof.serving.engine import cached_tokens, run_engine
from dispatchprof.serving.metrics import Latency, RequestResult, percentile, request_results, summarize
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig

STEP = 0.01


def flat(prefill, decoding, images):
    return STEP, 1.0


def serve(requests, *, step=flat, **engine):
    cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64)
    seqs, reps = run_engine(requests, cfg, step, **engine)
    return seqs, reps


def test_two_clients_by_hand():
    # 2 clients, prompts of 8 tokens, outputs 2, 4, 2, 2.
    # [0, 10): r0, r1 prefill -> first tokens at 10.   [10, 20): both decode; r0 done at 20, its client sends r2
    # at 20, after the engine planned [20, 30) (r1 decodes alone): r2 waits one step.
    # [30, 40): r1 decodes its 4th token (done at 40: r3 sent), r2 prefills (first token 40).
    # [40, 50): r2 decodes (done at 50); r3 waits.  [50, 60): r3 prefills.  [60, 70): r3 decodes (done at 70).
    reqs = [Request(5.0, 8, 2), Request(9.0, 8, 4), Request(0.0, 8, 2), Request(0.0, 8, 2)]
    seqs, reps = serve(reqs, concurrency=2)
    results = request_results(seqs)
    assert [r.arrival_s for r in results] == pytest.approx([0, 0, 0.02, 0.04])         # sent, not arrival_s
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.01, 0.02, 0.02])
    assert [r.e2e_s for r in results] == pytest.approx([0.02, 0.04, 0.03, 0.03])
    assert [r.tpot_s for r in results] == pytest.approx([0.01, 0.01, 0.01, 0.01])     # (e2e - ttft) / (out - 1)
    assert reps[0].steps == 7 and reps[0].energy_j == pytest.approx(7.0)
    s = summarize(results, [g for rep in reps for g in rep.gaps], kv_blocks=100, kv_peak=0.1, preemptions=0,
                  energy_j=7.0, gpus=2)
    assert s.span_s == pytest.approx(0.07) and s.requests_per_s == pytest.approx(4 / 0.07)
    assert s.output_tokens_per_s == pytest.approx(10 / 0.07)                           # 2 + 4 + 2 + 2 tokens
    assert s.output_tokens_per_s_per_gpu == pytest.approx(10 / 0.07 / 2)
    assert s.ttft_s.mean == pytest.approx(0.015) and s.ttft_s.median == pytest.approx(0.015)
    # gaps: r0 one, r1 three, r2 one, r3 one: six gaps of one step
    assert sum(n for _, n in (g for rep in reps for g in rep.gaps)) == 6 and s.itl_s.p99 == pytest.approx(STEP)


def test_warmup_requests_leave_the_statistics():
    reqs = [Request(0.0, 8, 2), Request(0.0, 8, 4), Request(0.0, 8, 2), Request(0.0, 8, 2)]
    seqs, reps = serve(reqs, concurrency=2, warmup=1)
    results = request_results(seqs, warmup=1)
    assert [r.warmup for r in results] == [True, False, False, False]
    s = summarize(results, [g for rep in reps for g in rep.gaps], kv_blocks=100, kv_peak=0.1, preemptions=0,
                  energy_j=7.0, gpus=1)
    # measured: r1 (TTFT 10, sent 0), r2 (20), r3 (20); span from r1's send (0) to r3's finish (70)
    assert s.requests == 3 and s.warmup_requests == 1
    assert s.ttft_s.mean == pytest.approx(0.05 / 3) and s.ttft_s.median == pytest.approx(0.02)
    assert s.span_s == pytest.approx(0.07) and s.output_tokens_per_s == pytest.approx(8 / 0.07)
    assert s.energy_per_token_j == pytest.approx(7.0 / 10)                            # energy of the whole run
    assert sum(n for rep in reps for _, n in rep.gaps) == 5                          # r0's gap left out
    with pytest.raises(ValueError, match=r"warmup must be a whole number of requests in \[0, 3\]"):
        serve(reqs, concurrency=2, warmup=4)


def test_one_client_never_overlaps_requests():
    # each request runs alone: TTFT one step, E2E = output steps; the next is sent when it finishes
    reqs = [Request(0.0, 8, 5)] * 3
    seqs, reps = serve(reqs, concurrency=1)
    results = request_results(seqs)
    assert [r.arrival_s for r in results] == pytest.approx([0, 0.05, 0.10])
    assert all(r.ttft_s == pytest.approx(STEP) and r.e2e_s == pytest.approx(5 * STEP) for r in results)
    with pytest.raises(ValueError, match="concurrency must be a whole number of clients >= 1, got 0"):
        serve(reqs, concurrency=0)


def test_decode_runs_of_a_closed_loop_match_step_by_step(monkeypatch):
    # a cost that grows with the cache makes every step's time differ; decode runs must give the
    # same times, sends and gaps as every step planned by the normal rules
    def growing(prefill, decoding, images):
        return 0.001 + 1e-6 * (decoding.computed_sum + sum(k for _, k, _ in prefill)), 1.0

    reqs = [Request(0.0, 20 + 7 * i, 30 + 11 * i) for i in range(12)]
    fast, fast_reps = serve(reqs, step=growing, concurrency=3)
    monkeypatch.setattr(engine, "decode_run", lambda *args: None)
    slow, slow_reps = serve(reqs, step=growing, concurrency=3)
    assert fast_reps[0].steps == slow_reps[0].steps and len(fast_reps[0].timeline) < len(slow_reps[0].timeline)
    for a, b in zip(request_results(fast), request_results(slow)):
        assert (a.arrival_s, a.ttft_s, a.e2e_s) == pytest.approx((b.arrival_s, b.ttft_s, b.e2e_s), rel=1e-12)
    assert astuple(Latency.of_counts(fast_reps[0].gaps)) == pytest.approx(astuple(Latency.of_counts(slow_reps[0].gaps)),
                                                                         rel=1e-12)
    assert sum(n for _, n in fast_reps[0].gaps) == sum(r.output_tokens - 1 for r in reqs)


def test_prefix_cache_skips_whole_blocks():
    assert cached_tokens(1000, 0.5, 16) == 496            # floor(500 / 16) = 31 blocks
    assert cached_tokens(1000, 1.0, 16) == 992            # at least one prompt token computed: floor(999 / 16)
    assert cached_tokens(8, 1.0, 4) == 4 and cached_tokens(3, 1.0, 4) == 0
    seen = []

    def record(prefill, decoding, images):
        seen.append(tuple(prefill))
        return STEP, 1.0

    seqs, _ = serve([Request(0.0, 8, 2)], step=record, prefix_hit=1.0)
    assert seen[0] == ((4, 8, 8),)                        # 4 new tokens attending to all 8
    assert request_results(seqs)[0].cached_tokens == 4
    with pytest.raises(ValueError, match=r"prefix_hit must be a rate in \[0, 1\], got 1.5"):
        serve([Request(0.0, 8, 2)], prefix_hit=1.5)


def test_latency_statistics_by_hand():
    # gaps 10, 10, 10, 30 ms: mean 15; P90 at position 2.7 -> 10 + 0.7 x 20 = 24; P99 at 2.97 -> 29.4
    lat = Latency.of_counts([(0.03, 1), (0.01, 3)])
    assert (lat.mean, lat.median, lat.p90, lat.p99) == pytest.approx((0.015, 0.01, 0.024, 0.0294))
    values = [0.004, 0.001, 0.009, 0.002, 0.002]
    lat = Latency.of(values)
    assert lat.p90 == pytest.approx(percentile(values, 90)) and lat.median == pytest.approx(0.002)
    assert Latency.of([]) == Latency(0.0, 0.0, 0.0, 0.0)


def test_tpot_leaves_out_single_token_requests():
    results = [RequestResult(0.0, 8, 1, 0.02, 0.0, 0.02, 0, 0), RequestResult(0.0, 8, 3, 0.01, 0.005, 0.02, 0, 0)]
    s = summarize(results, [(0.005, 2)], kv_blocks=10, kv_peak=0.5, preemptions=0, energy_j=1.0, gpus=1,
                  slo_tpot_s=0.004)
    assert s.tpot_s.mean == pytest.approx(0.005) and s.tpot_s.median == pytest.approx(0.005)
    assert s.ttft_s.mean == pytest.approx(0.015) and s.e2e_s.mean == pytest.approx(0.02)
    assert s.slo_attainment == pytest.approx(0.5)          # the 1-token request meets any TPOT (0 s)
    warm = RequestResult(0.0, 8, 1, 0.02, 0.0, 0.02, 0, 0, warmup=True)
    with pytest.raises(ValueError, match="all 2 requests are warm-up: nothing is left to measure"):
        summarize([warm, warm], [], kv_blocks=1, kv_peak=0, preemptions=0, energy_j=0, gpus=1)
