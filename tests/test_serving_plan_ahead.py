"""An engine that plans step k + 1 while step k runs (``plan_ahead``: TensorRT-LLM's overlap
scheduler, SGLang's overlap schedule, vLLM's async scheduling) takes a request that arrives
during a step into the step after the next one; worked by hand with a flat step of 10 ms."""

import pytest

from dispatchprof.serving.engine import run_engine
from dispatchprof.serving.metrics import request_results
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig

STEP = 0.01


def flat(prefill, decoding, images):
    return STEP, 1.0


def serve(requests, plan_ahead, **engine):
    cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64, plan_ahead=plan_ahead)
    seqs, reps = run_engine(requests, cfg, flat, **engine)
    return request_results(seqs), reps


def test_closed_loop_request_waits_one_more_step():
    # 2 clients, prompts of 8 tokens, outputs 2, 4, 2, 2 (tests/test_serving_clients.py works the
    # same trace without plan_ahead: TTFT 10, 10, 20, 20 ms in 7 steps).
    # [0, 10): r0, r1 prefill (an idle engine takes them at once).  [10, 20): both decode; r0 done at
    # 20, r2 sent.  [20, 30) was planned before r2 came: r1 decodes (3rd token).  [30, 40) was planned
    # at 30 without r2 (it came after the plan of [30, 40) had been made, at 20): r1 decodes its 4th
    # token, done at 40, r3 sent.  [40, 50): r2 prefills (first token 50: TTFT 30).  [50, 60): r2
    # decodes (done 60); r3 came at 40, after [50, 60) was planned.  [60, 70): r3 prefills (first
    # token 70: TTFT 30).  [70, 80): r3 decodes (done 80).
    reqs = [Request(0.0, 8, 2), Request(0.0, 8, 4), Request(0.0, 8, 2), Request(0.0, 8, 2)]
    results, reps = serve(reqs, True, concurrency=2)
    assert [r.arrival_s for r in results] == pytest.approx([0, 0, 0.02, 0.04])
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.01, 0.03, 0.03])
    assert [r.e2e_s for r in results] == pytest.approx([0.02, 0.04, 0.04, 0.04])
    assert reps[0].steps == 8
    results, reps = serve(reqs, False, concurrency=2)
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.01, 0.02, 0.02]) and reps[0].steps == 7


def test_open_loop_arrival_during_a_step():
    # r0 (prompt 8, 3 tokens) at 0 starts at once; r1 (prompt 8, 1 token) arrives at 5 ms, during
    # [0, 10), whose successor [10, 20) was planned before it came: r0 decodes alone in [10, 20),
    # r1 prefills beside r0's last decode in [20, 30): TTFT 30 - 5 = 25 ms (15 ms without plan_ahead).
    reqs = [Request(0.0, 8, 3), Request(0.005, 8, 1)]
    results, _ = serve(reqs, True)
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.025])
    assert [r.e2e_s for r in results] == pytest.approx([0.03, 0.025])
    results, _ = serve(reqs, False)
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.015])


def test_decode_runs_stop_for_a_waiting_arrival():
    # one client of 40 tokens after an earlier long request: r0 (prompt 8, 40 tokens) and r1
    # (prompt 8, 2 tokens) at 0; r1 done at 20 sends r2 (prompt 8, 1 token), which must not wait
    # for r0's 40-token decode run: [20, 30) and [30, 40) were planned without it (r0 decodes),
    # [40, 50) prefills it: TTFT 30 ms.
    reqs = [Request(0.0, 8, 40), Request(0.0, 8, 2), Request(0.0, 8, 1)]
    results, _ = serve(reqs, True, concurrency=2)
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.01, 0.03])
    assert results[0].e2e_s == pytest.approx(0.40)


def test_engines_that_overlap_the_host_plan_ahead():
    # docs/serving.md's engine table row against the presets (serve.scheduler_config: plan_ahead = overlap_host)
    from dispatchprof.serving.engines import engine_preset
    from tests.accuracy_docs import ROOT, table_line
    with open(f"{ROOT}/docs/serving.md") as f:
        row = table_line(f.read(), "next step planned")
    old, new = engine_preset("vllm", "0.11.2"), engine_preset("vllm", "0.14")
    sglang, trt = engine_preset("sglang", "0.5"), engine_preset("trtllm", "1.1")
    assert not old.overlap_host and new.overlap_host and sglang.overlap_host and trt.overlap_host
    assert row[1:] == ["after this one (0.14: while this one runs)", "while this one runs", "while this one runs"]
