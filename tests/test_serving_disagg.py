"""Disaggregated prefill/decode (dispatchprof.serving.disagg): a KV transfer's time and a toy
run's TTFT, queueing and utilisation, worked by hand."""

import pytest

from dispatchprof.serving.disagg import Side, disagg_summary, run_disaggregated
from dispatchprof.serving.metrics import request_results
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig
from dispatchprof.serving.serve_disagg import kv_transfer_s


def test_kv_transfer_by_hand():
    """Llama-3.1-8B's cache: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B = 131072 B per token;
    4096 tokens = 536,870,912 B over ib-ndr (50 GB/s x 0.8 = 40e9 B/s) = 13.4217728 ms, + 5 us."""
    assert kv_transfer_s(4096, 2 * 32 * 8 * 128 * 2, "ib-ndr") == pytest.approx(13.4267728e-3, rel=1e-12)
    # the same over 100 GbE (12.5 GB/s x 0.8 = 10e9 B/s) + 20 us: 53.6870912 ms + 0.02 ms
    assert kv_transfer_s(4096, 131072, "eth-100g") == pytest.approx(53.7070912e-3, rel=1e-12)
    with pytest.raises(ValueError, match="unknown link 'nvlink'; known links: nvlink4"):
        kv_transfer_s(1, 1, "nvlink")
    # Qwen3.5-397B on one of 8 GPUs: 1024 tokens x 15,360 B + 45 layers' states x 533,504 B
    # = 15,728,640 + 24,007,680 = 39,736,320 B over ib-ndr: 0.993408 ms + 5 us
    assert kv_transfer_s(1024, 15360, "ib-ndr", 45 * 533504) == pytest.approx(0.998408e-3, rel=1e-12)


def prefill_cost(prefill, decoding, images):
    """10 us per prompt token of the step."""
    return 1e-5 * sum(q for q, _, _ in prefill), 0.0


def decode_cost(prefill, decoding, images):
    """2 ms per step, whatever it runs."""
    return 2e-3, 0.0


def run(requests, transfer=3e-3):
    config = SchedulerConfig(num_blocks=64, block_size=16)
    return run_disaggregated(requests, Side(config, prefill_cost, 1), Side(config, decode_cost, 1),
                             lambda r: transfer)


def test_one_prefill_one_decode_ttft_by_hand():
    """One request of 100 prompt tokens and 4 output tokens sent at 0: prefill 100 x 10 us = 1 ms,
    transfer 3 ms, the decode side's first step 2 ms: TTFT = 6 ms; three more steps: E2E 12 ms,
    TPOT (12 - 6) / 3 = 2 ms."""
    seqs, reps, trips = run([Request(0.0, 100, 4)])
    r = request_results(seqs)[0]
    assert r.ttft_s == pytest.approx(6e-3) and r.e2e_s == pytest.approx(12e-3) and r.tpot_s == pytest.approx(2e-3)
    t = trips[0]
    assert (t.prefill_start, t.prefill_end, t.arrived, t.decode_start) == pytest.approx((0, 1e-3, 4e-3, 4e-3))
    assert reps[0].busy_s == pytest.approx(1e-3) and reps[1].busy_s == pytest.approx(8e-3)


def test_prefill_side_queues_and_decode_side_joins_the_batch():
    """Two requests of 100 tokens at 0 and 0.5 ms: the second waits for the first's prefill
    (0 - 1 ms), runs 1 - 2 ms (queued 0.5 ms), moves 2 - 5 ms. The decode side runs the first from
    4 ms in 2 ms steps (4-6, 6-8, ...); the second arrives at 5 ms and joins the step at 6 ms
    (queued 1 ms): its first token at 8 ms, TTFT 7.5 ms. Utilisation over the 14 ms span
    (last finish: the second's 4th token at 14 ms): prefill 2 ms / 14 ms."""
    seqs, reps, trips = run([Request(0.0, 100, 4), Request(0.5e-3, 100, 4)])
    results = request_results(seqs)
    assert [r.ttft_s for r in results] == pytest.approx([6e-3, 7.5e-3])
    assert results[1].e2e_s + 0.5e-3 == pytest.approx(14e-3)
    s = disagg_summary(trips, reps, 1, "ib-ndr", [True, True], 14e-3)
    assert s.prefill_queue_s.mean == pytest.approx(0.25e-3)          # (0 + 0.5) / 2
    assert s.decode_queue_s.mean == pytest.approx(0.5e-3)            # (0 + 1) / 2
    assert s.transfer_s.mean == pytest.approx(3e-3)
    assert s.prefill_utilization == pytest.approx(2 / 14)


def test_decode_side_arrivals_join_as_decode_steps():
    """Requests that arrive at the decode side while others decode join the decode batch: no
    step there carries a prompt chunk (an engine graphing decode steps only would run such a step
    eager), and an arrival's first step there decodes against its whole moved cache (computed =
    prompt - 1). Three requests of 100 prompt tokens and 4 output tokens sent at 0, 0.5, 1 ms:
    prefills 0-1 ms (the first), 1-3 ms (the other two together, 200 x 10 us); arrivals at 4, 6, 6
    ms. Decode steps of 2 ms: 4-6 the first alone (99 tokens of cache), 6-8 all three (100 + 99 +
    99), 8-10 (301), 10-12 (304: the first's 4th token), 12-14 the two left (102 + 102).
    TTFT 6, 8 - 0.5 = 7.5 and 8 - 1 = 7 ms."""
    calls = []

    def recording_decode_cost(prefill, decoding, images):
        calls.append((list(prefill), decoding.n, decoding.computed_sum))
        return 2e-3, 0.0

    config = SchedulerConfig(num_blocks=64, block_size=16)
    requests = [Request(0.0, 100, 4), Request(0.5e-3, 100, 4), Request(1e-3, 100, 4)]
    seqs, _, _ = run_disaggregated(requests, Side(config, prefill_cost, 1), Side(config, recording_decode_cost, 1),
                                   lambda r: 3e-3)
    assert calls == [([], 1, 99.0), ([], 3, 298.0), ([], 3, 301.0), ([], 3, 304.0), ([], 2, 204.0)]
    assert [r.ttft_s for r in request_results(seqs)] == pytest.approx([6e-3, 7.5e-3, 7e-3])
