"""Engine presets (data with sources), their scheduler rules, CUDA-graph padding and host time,
and the request-length datasets."""

import dataclasses
import math
import random

import pytest

from dispatchprof.serving.datasets import DATASETS, QuantileLength, dataset_lengths
from dispatchprof.serving.engines import EngineError, engine_names, engine_preset, load_engines
from dispatchprof.serving.requests import Length, parse_length, random_length
from dispatchprof.serving.scheduler import SchedulerConfig, SeqView, plan_step

H100, A100, B200, L40S = 80e9, 80e9, 180e9, 48e9


def test_vllm_defaults_follow_its_gpu_rule():
    # vllm/engine/arg_utils.py: 1024 sequences and 8192 tokens on >= 70 GiB GPUs other than the A100
    h100 = engine_preset("vllm", "0.11", memory_bytes=H100, device_name="H100-SXM")
    assert (h100.version, h100.policy, h100.max_seqs, h100.max_batched_tokens) == ("0.11", "mixed", 1024, 8192)
    assert (h100.block_size, h100.memory_utilization, h100.memory_of) == (16, 0.9, "total")
    assert h100.chunked_prefill and h100.prefix_caching and not h100.overlap_host and not h100.reserve_output
    a100 = engine_preset("vllm", memory_bytes=A100, device_name="A100-80GB")
    l40s = engine_preset("vllm", memory_bytes=L40S, device_name="L40S")
    assert (a100.max_seqs, a100.max_batched_tokens) == (l40s.max_seqs, l40s.max_batched_tokens) == (256, 2048)
    # capture sizes [1, 2, 4] + range(8, 513, 8) (0.11.0) and + range(256, 513, 16) above 256 (0.11.2)
    assert h100.cuda_graph_sizes == (1, 2, 4, *range(8, 513, 8))
    new = engine_preset("vllm", "0.11.2", memory_bytes=H100, device_name="H100-SXM")
    assert new.cuda_graph_sizes == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
    # 0.14 on: async scheduling is on by default (the scheduler overlaps the GPU); the default preset
    newest = engine_preset("vllm", memory_bytes=H100, device_name="H100-SXM")
    assert (newest.version, newest.overlap_host, newest.max_seqs, newest.max_batched_tokens) == ("0.14", True, 1024, 8192)
    assert newest.cuda_graph_sizes == new.cuda_graph_sizes and not new.overlap_host


def test_sglang_and_trtllm_defaults():
    sgl = engine_preset("sglang", memory_bytes=H100, device_name="H100-SXM")
    assert (sgl.version, sgl.policy, sgl.block_size, sgl.max_batched_tokens) == ("0.5", "prefill_first", 1, 8192)
    assert sgl.memory_utilization == 0.835 and sgl.overlap_host and sgl.cuda_graph_steps == "decode"
    assert engine_preset("sglang", memory_bytes=B200, device_name="B200").max_batched_tokens == 16384
    trt = engine_preset("trtllm", memory_bytes=H100, device_name="H100-SXM")
    assert (trt.policy, trt.block_size, trt.memory_of, trt.chunked_prefill) == ("mixed", 32, "free", False)
    assert trt.reserve_output and trt.overlap_host and trt.cuda_graph_sizes == ()
    # SGLang turns its overlap scheduler off beside the mamba radix cache of linear-attention models
    assert not sgl.linear_attention_overlap and trt.linear_attention_overlap
    assert engine_preset("vllm", memory_bytes=H100, device_name="H100-SXM").linear_attention_overlap


def test_eager_issue_figures_are_the_fitted_ones():
    # docs/validation.md, "Fitted figures": vLLM 20 us (258 fit rows, dense and MoE), SGLang 60,
    # TensorRT-LLM 1.0 60 and 1.1 on 30
    assert engine_preset("vllm", memory_bytes=H100, device_name="H100-SXM").eager_kernel_host_us == 20
    assert engine_preset("vllm", "0.11.2", memory_bytes=H100, device_name="H100-SXM").eager_kernel_host_us == 20
    assert engine_preset("sglang", memory_bytes=H100, device_name="H100-SXM").eager_kernel_host_us == 60
    assert engine_preset("trtllm", "1.0", memory_bytes=H100, device_name="H100-SXM").eager_kernel_host_us == 60
    assert engine_preset("trtllm", "1.1", memory_bytes=H100, device_name="H100-SXM").eager_kernel_host_us == 30


def test_every_figure_has_a_source():
    for engine, spec in load_engines().items():
        for version, fields in spec["versions"].items():
            preset = engine_preset(engine, version)
            for name in ("policy", "max_seqs", "max_batched_tokens", "step_host_us", "overlap_host"):
                assert len(preset.sources[name]) > 20, (engine, version, name)
    assert engine_names()[:4] == ["vllm 0.10", "vllm 0.11", "vllm 0.11.2", "vllm 0.14"]


def test_unknown_engine_or_version_lists_the_known_ones():
    with pytest.raises(EngineError, match="unknown engine 'tgi'; known: vllm, sglang, trtllm"):
        engine_preset("tgi")
    with pytest.raises(EngineError, match=r"vllm has no preset for version '0.3'; known: 0.10, 0.11, 0.11.2, 0.14"):
        engine_preset("vllm", "0.3")


def engine_file(tmp_path, engine: str, version: str):
    """A one-engine file "e" version "1" with the bundled ``engine`` ``version``'s fields (lists
    emptied, memory rules dropped) and a source "x" for each."""
    good = load_engines()[engine]["versions"][version]
    fields = "\n".join(f"      {k}: {v!r}".replace("'", "") if not isinstance(v, (list, tuple)) else f"      {k}: []"
                       for k, v in good.items() if k not in ("sources", "memory_rules"))
    sources = "\n".join(f"        {k}: x" for k in good["sources"])
    path = tmp_path / "e.yaml"
    path.write_text(f"engines:\n  e:\n    versions:\n     '1':\n{fields}\n      sources:\n{sources}\n")
    return path


def test_the_loader_is_strict(tmp_path):
    path = engine_file(tmp_path, "trtllm", "1.1")
    assert engine_preset("e", path=str(path)).block_size == 32
    path.write_text(path.read_text().replace("        block_size: x\n", ""))
    with pytest.raises(EngineError, match="engine e 1: no source for block_size"):
        load_engines(str(path))
    path.write_text(path.read_text().replace("      block_size: 32", "      block_size: 0\n      typo: 3"))
    with pytest.raises(EngineError, match="unknown field 'typo'"):
        load_engines(str(path))


def test_graph_padding_and_host_time():
    vllm = engine_preset("vllm", "0.11.2", memory_bytes=H100, device_name="H100-SXM")
    assert vllm.padded_tokens(13, decode_only=True) == 16 and vllm.padded_tokens(13, decode_only=False) == 16
    assert vllm.padded_tokens(505, True) == 512 and vllm.padded_tokens(513, True) == 513     # above: no graph
    sgl = engine_preset("sglang", memory_bytes=H100, device_name="H100-SXM")
    assert sgl.padded_tokens(9, True) == 12 and sgl.padded_tokens(9, False) == 9             # prefill: no graph
    # vLLM 0.11.2: host work before the kernels: 300 + 4 x 40 us = 460 us on top of the device's 1 ms;
    # 0.14 overlaps it (async scheduling) as SGLang does
    assert vllm.step_s(1e-3, 4) == pytest.approx(1.46e-3)
    assert engine_preset("vllm", "0.14").step_s(1e-3, 4) == pytest.approx(1e-3)
    # SGLang overlaps it: max(460 us, 1 ms) = 1 ms, max(460 us, 0.2 ms) = 460 us
    assert sgl.step_s(1e-3, 4) == pytest.approx(1e-3) and sgl.step_s(2e-4, 4) == pytest.approx(4.6e-4)


def test_steps_without_a_graph_pay_the_eager_issue():
    trt = dataclasses.replace(engine_preset("trtllm", memory_bytes=H100, device_name="H100-SXM"), eager_kernel_host_us=50)
    # TensorRT-LLM captures decode steps only, of any size here (no sizes listed): a prompt step is eager
    assert trt.graphed(300, decode_only=True) and not trt.graphed(300, decode_only=False)
    # 400 kernels x 50 us = 20 ms of issue: a 5 ms prompt step takes 20 ms, a 30 ms one 30 ms (the GPU
    # runs each kernel as it is issued); the step's own host work (300 + 4 x 10 us) overlaps both
    assert trt.step_s(5e-3, 4, eager_kernels=400) == pytest.approx(20e-3)
    assert trt.step_s(30e-3, 4, eager_kernels=400) == pytest.approx(30e-3)
    assert trt.step_s(5e-3, 4) == pytest.approx(5e-3)
    vllm = dataclasses.replace(engine_preset("vllm", "0.11.2", memory_bytes=H100, device_name="H100-SXM"),
                               eager_kernel_host_us=50)
    # vLLM graphs any step up to its largest size (512 tokens); without async scheduling its host work adds
    assert vllm.graphed(512, False) and not vllm.graphed(513, True)
    assert vllm.step_s(5e-3, 4, eager_kernels=400) == pytest.approx(20e-3 + 460e-6)


def test_prefill_first_runs_prefills_alone():
    cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64, policy="prefill_first")
    decoding = SeqView(0, 9, 8, 3, prefilled=True)
    plan = plan_step([decoding], [SeqView(1, 8, 0, 0)], 50, cfg)
    assert plan.scheduled == ((1, 8, 2),) and plan.admitted == (1,)       # the decode waits
    plan = plan_step([decoding], [], 50, cfg)
    assert plan.scheduled == ((0, 1, 0),)                                  # nothing to prefill: decode
    mixed = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64)
    assert plan_step([decoding], [SeqView(1, 8, 0, 0)], 50, mixed).scheduled == ((0, 1, 0), (1, 8, 2))


def test_reserve_output_admits_only_whole_requests():
    # 8 prompt + 12 output tokens = 20 tokens -> 5 blocks of 4 reserved at admission
    cfg = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64, reserve_output=True)
    assert plan_step([], [SeqView(0, 8, 0, 0, total=20)], 5, cfg).scheduled == ((0, 8, 5),)
    assert plan_step([], [SeqView(0, 8, 0, 0, total=20)], 4, cfg).scheduled == ()    # 2 would do without
    free = SchedulerConfig(num_blocks=100, block_size=4, max_batched_tokens=64)
    assert plan_step([], [SeqView(0, 8, 0, 0, total=20)], 4, free).scheduled == ((0, 8, 2),)


def test_random_lengths_as_vllm_bench_serve():
    # U_int[floor(1024 x 0.75), ceil(1024 x 1.25)] = [768, 1280]
    assert random_length(1024, 0.25) == Length(768, 1280) and parse_length("random:128") == Length(128, 128)
    assert parse_length("random:100", range_ratio=0.5) == Length(50, 150)
    with pytest.raises(ValueError, match=r"the random range ratio must be in \[0, 1\), got 1.0"):
        random_length(10, 1.0)


def test_quantile_lengths():
    # quantiles 0..100 of a table rising by 10 per percent: u = 0.505 -> position 50.5 -> 505
    table = QuantileLength("t", tuple(10.0 * i for i in range(101)))

    class Fixed(random.Random):
        def random(self):
            return 0.505

    assert table.draw(Fixed()) == 505 and QuantileLength("z", (0.0,) * 101).draw(Fixed()) == 1
    prompt, output = dataset_lengths("azure-conv")
    assert (prompt.quantiles[50], output.quantiles[50]) == (1020.0, 129.0)    # the trace's medians
    rng = random.Random(0)
    draws = sorted(prompt.draw(rng) for _ in range(4001))
    assert abs(draws[2000] - 1020) < 60
    assert set(DATASETS) == {"azure-conv", "azure-code", "arxiv-summarization"}
    with pytest.raises(ValueError, match="unknown dataset 'sharegpt'; known: azure-conv, azure-code"):
        dataset_lengths("sharegpt")


def test_a_prefill_that_gives_way_is_planned_again():
    # prefill-first, 6 blocks of 4 tokens: r0 decodes holding 3 blocks (10 tokens computed); r1 is mid-prefill
    # (8 of 16 prompt tokens, 2 blocks) and needs 2 more blocks for its next 8 tokens: only 1 is free, and
    # the decoding r0 is older, so r1 preempts itself; planned again, the step decodes r0.
    from dispatchprof.serving.engine import Replica, SeqState, _start_step
    from dispatchprof.serving.requests import Request

    cfg = SchedulerConfig(num_blocks=6, block_size=4, max_batched_tokens=64, policy="prefill_first")
    r0 = SeqState(0, Request(0.0, 8, 10), known=11.0, computed=10.0, blocks=3, prefilled=True, generated=3.0)
    r1 = SeqState(1, Request(0.0, 16, 4), known=16.0, computed=8.0, blocks=2)
    rep = Replica(0, cfg, running=[r0, r1], free_blocks=1)
    done = []
    _start_step(rep, [r0, r1], 0.0, lambda p, d, i: (0.01, 1.0), done, math.inf)
    assert rep.plan.scheduled == ((0, 1, 0),) and rep.running == [r0] and list(rep.waiting) == [r1]
    assert r1.preemptions == 1 and r1.computed == 0 and rep.free_blocks == 3
