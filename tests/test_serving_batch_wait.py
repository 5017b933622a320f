"""Scheduler rule 4, TensorRT-LLM's batch waiting, worked by hand: a step that would carry decodes
and prompts runs the decodes alone until prompts have been held back ``batch_wait_steps`` steps in
a row or the step's tokens reach ``batch_wait_tokens`` (dispatchprof/serving/scheduler.py)."""

import pytest

from dispatchprof.serving.engine import run_engine
from dispatchprof.serving.engines import ENGINES_FILE, EngineError, engine_preset, load_engines
from dispatchprof.serving.metrics import request_results
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig, SeqView, plan_step

DECODING = SeqView(0, 9, 8, 1, True)           # one decode token; 9 tokens fit its 1 block of 16


def config(**over):
    return SchedulerConfig(**{"num_blocks": 100, "block_size": 16, "max_batched_tokens": 100,
                              "chunked_prefill": False, "batch_wait_steps": 2, "batch_wait_tokens": 90, **over})


def test_prompts_are_held_back_until_the_wait_ends():
    prompt = SeqView(1, 40, 0, 0)              # 40 + 1 decode token = 41 < 90
    held = plan_step([DECODING], [prompt], 100, config(), 0)
    assert held.scheduled == ((0, 1, 0),) and held.admitted == () and held.waited == 1
    assert plan_step([DECODING], [prompt], 100, config(), 1).waited == 2
    runs = plan_step([DECODING], [prompt], 100, config(), 2)            # held 2 steps: the wait is over
    assert runs.scheduled == ((0, 1, 0), (1, 40, 3)) and runs.admitted == (1,) and runs.waited == 0


def test_a_full_enough_step_ends_the_wait():
    prompts = [SeqView(1, 50, 0, 0), SeqView(2, 40, 0, 0)]             # 50 + 40 + 1 = 91 >= 90
    plan = plan_step([DECODING], prompts, 100, config(), 0)
    assert plan.admitted == (1, 2) and plan.waited == 0


def test_steps_without_both_kinds_leave_the_count_alone():
    alone = plan_step([], [SeqView(1, 40, 0, 0)], 100, config(), 1)   # no decode: the prompt runs
    assert alone.admitted == (1,) and alone.waited == 1
    assert plan_step([DECODING], [], 100, config(), 1).waited == 1     # no prompt
    assert plan_step([DECODING], [SeqView(1, 40, 0, 0)], 100, config(batch_wait_steps=0), 0).admitted == (1,)


def test_a_held_prompt_starts_after_the_wait_in_the_event_loop():
    # flat 10 ms steps; r0 prefills in step 1 [0, 10) and decodes on; r1 arrives at 15 ms, in step 2.
    # Steps 3, 4, 5 hold r1 back (3 steps); step 6 [50, 60) prefills it: TTFT 60 - 15 = 45 ms
    # (15 ms without waiting). r0's decodes run every step: its TPOT stays 10 ms.
    requests = [Request(0.0, 8, 10), Request(0.015, 8, 2)]
    for steps, ttft in ((3, 0.045), (0, 0.015)):
        cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64, batch_wait_steps=steps,
                              batch_wait_tokens=60)
        seqs, _ = run_engine(requests, cfg, lambda prefill, decoding, images: (0.01, 1.0))
        first, second = request_results(seqs)
        assert second.ttft_s == pytest.approx(ttft) and first.tpot_s == pytest.approx(0.01)


def test_presets_leave_batch_waiting_off_and_check_it(tmp_path):
    for engine, spec in load_engines().items():
        for version in spec["versions"]:
            preset = engine_preset(engine, version)
            assert (preset.batch_wait_steps, preset.batch_wait_tokens_ratio) == (0, 0)
    bad = tmp_path / "engines.yaml"
    with open(ENGINES_FILE, encoding="utf-8") as f:
        text = f.read()
    bad.write_text(text.replace("      batch_wait_tokens_ratio: 0\n", "      batch_wait_tokens_ratio: 1.5\n", 1))
    with pytest.raises(EngineError, match="batch_wait_tokens_ratio must be in \\[0, 1\\], got 1.5"):
        load_engines(str(bad))
    with pytest.raises(ValueError, match="batch_wait_steps must be a whole number >= 0, got -1"):
        config(batch_wait_steps=-1)
