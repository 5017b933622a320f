"""dispatchprof.train: the formulas worked by hand, and a tiny counted model split over GPUs."""

from __future__ import annotations

import dataclasses

import pytest
import transformers

from dispatchprof.results.records import HOST
from dispatchprof.sim.placement import placement_of
from dispatchprof.train import TrainLayout, profile_training
from dispatchprof.train.count import count_model, fp8_ratio, layer_of, time_model
from dispatchprof.train.layout import check_layout, stage_layers
from dispatchprof.sim.links import Links, ring_allreduce_s, ring_gather_s
from dispatchprof.train.memory import memory_per_gpu, model_states
from dispatchprof.train.schedule import bubble_fraction, exposed_s, pipeline_s
from dispatchprof.train.step import fsdp_layer_bytes, split_step
from tests.conftest import TINY_LLAMA, tiny_model

H100 = placement_of("H100-SXM").devices[0]
#: links whose scale-up is the rate the simulator times the TP all-reduces at (H100 900 GB/s both
#: ways: 450e9 one way), so that the step keeps them as counted (`tp_link_scale` 1)
RAW = Links(H100.interconnect_gb_per_s / 2 * 1e9, 0.0, 1.0, 0.0)


def test_fsdp_bytes_per_layer_by_hand():
    # 1e6 parameters over 8 ranks: all-gather 7/8 * 1e6 * 2 bytes = 1.75e6; reduce-scatter in fp32 7/8 * 4e6 = 3.5e6
    assert fsdp_layer_bytes(1_000_000, 8) == (1_750_000, 3_500_000)
    assert fsdp_layer_bytes(1_000_000, 1) == (0, 0)


def test_ring_collectives_by_hand():
    # 8e6 bytes over 4 ranks at 1e9 B/s: all-gather 3/4 * 8e6 / 1e9 = 6 ms (+ 1 ms latency); all-reduce twice that
    assert ring_gather_s(8e6, 4, 1e9, 1e-3) == pytest.approx(7e-3)
    assert ring_allreduce_s(8e6, 4, 1e9, 1e-3) == pytest.approx(13e-3)
    assert ring_gather_s(8e6, 1, 1e9, 1e-3) == 0.0


@pytest.mark.parametrize("m, pp, vp, frac", [
    (8, 4, 1, 3 / 11),          # (pp-1)/(m+pp-1) = 3/11
    (1, 4, 1, 3 / 4),
    (8, 4, 2, 1.5 / 9.5),       # interleaved: (pp-1)/vp = 1.5 idle slots of 9.5
    (16, 1, 1, 0.0),
])
def test_1f1b_bubble_fraction(m, pp, vp, frac):
    assert bubble_fraction(m, pp, vp) == pytest.approx(frac)
    # the step is m + (pp-1)/vp micro-batch times; the bubble its share of it
    t = pipeline_s(m, pp, vp, 0.5)
    assert t == pytest.approx((m + (pp - 1) / vp) * 0.5)
    assert (t - m * 0.5) / t == pytest.approx(frac)


def test_exposed_comm_longer_than_compute():
    # 4 layers, 3 s of all-gather each, 1 s of compute each: the first 3 s wait, then 3 x (3 - 1) = 6 s show
    assert exposed_s(3.0, 1.0, 4) == pytest.approx(9.0)
    # shorter than compute: only the first chunk's 1 s shows
    assert exposed_s(1.0, 3.0, 4) == pytest.approx(1.0)
    assert exposed_s(0.0, 3.0, 4) == 0.0


def test_zero3_memory_per_gpu_for_a_known_parameter_count():
    # 1e9 parameters, 16 bytes each (2 weights + 2 gradients + 12 AdamW states), over 8 ranks: 2e9 bytes
    w, g, o = model_states(1e9, 8, 3)
    assert (w, g, o) == (2.5e8, 2.5e8, 1.5e9)
    assert model_states(1e9, 8, 1) == (2e9, 2e9, 1.5e9)          # ZeRO-1: only the optimizer state sharded
    assert model_states(1e9, 8, 2) == (2e9, 2.5e8, 1.5e9)
    assert model_states(1e9, 8, 0) == (2e9, 2e9, 12e9)
    mem = memory_per_gpu(1e9, 1e8, 10, 4e9, dp=8, tp=1, pp=1, cp=1, vp=1, m=1, zero=3, recompute="none",
                         layer_input_bytes=1e6, reduce_bytes=4)
    assert mem.params + mem.grads + mem.optimizer == 2e9
    assert mem.activations == 4e9
    assert mem.comm_buffers == 2 * 1e8 * 2 + 1e8 * 4            # two gathered layers in bf16, one layer of fp32 grads
    assert mem.margin == pytest.approx(0.10 * (2e9 + 4e9 + 8e8))


def test_full_recompute_keeps_layer_inputs():
    # 10 layers over pp 2: a stage of 5 layers holds min(pp, m) = 2 micro-batches of layer inputs (1e6 each)
    # plus one layer's activations (4e9 / 10)
    mem = memory_per_gpu(1e9, 1e8, 10, 4e9, dp=1, tp=1, pp=2, cp=1, vp=1, m=8, zero=0, recompute="full",
                         layer_input_bytes=1e6, reduce_bytes=2)
    assert mem.activations == pytest.approx(5 * 1e6 * 2 + 4e8)
    # the LM head and loss wrote 1e9 > one layer's 4e8: the head's backward holds that instead; split over tp 2
    head = memory_per_gpu(1e9, 1e8, 10, 4e9, dp=1, tp=2, pp=2, cp=1, vp=1, m=8, zero=0, recompute="full",
                          layer_input_bytes=1e6, reduce_bytes=2, head_bytes=1e9)
    assert head.activations == pytest.approx((5 * 1e6 * 2 + 1e9) / 2)


def test_stage_layers_uneven():
    assert stage_layers(126, 8, 8) == 2 * 8                      # ceil(126 / 64) = 2 layers per chunk
    assert stage_layers(80, 4, 5) == 20


def test_layer_scope():
    assert layer_of("model.layers.3.self_attn.q_proj") == "model.layers.3"
    assert layer_of("transformer.h.11") == "transformer.h.11"
    assert layer_of("model.norm") is None
    assert layer_of("lm_head") is None


@pytest.mark.parametrize("fields, match", [
    (dict(devices=8, tp=3), "tp x pp x cp = 3 x 1 x 1 = 3 does not divide the 8 devices"),
    (dict(devices=8, global_batch=12, micro_batch=2),
     r"global batch 12 is not divisible by micro-batch x data-parallel size = 2 x 8 = 16"),
    (dict(devices=8, pp=8, global_batch=8), "pp x vp = 8 is larger than the model's 2 layers"),
    (dict(devices=2, tp=2, global_batch=1), "tp=2 does not divide the model's 3 attention heads; allowed: 1, 3"),
    (dict(devices=8, zero=4, global_batch=8), r"zero must be one of \(0, 1, 2, 3\), got 4"),
    (dict(devices=8, recompute="some", global_batch=8), "recompute must be one of"),
])
def test_bad_layouts(fields, match):
    base = dict(devices=1, micro_batch=1, global_batch=1, seq_len=16)
    with pytest.raises(ValueError, match=match):
        check_layout(TrainLayout(**{**base, **fields}), layers=2, heads=3)


def test_fp8_needs_an_fp8_device():
    a100 = placement_of("A100-80GB").devices[0]
    with pytest.raises(ValueError, match="--fp8 needs a device with fp8"):
        fp8_ratio(a100)
    assert fp8_ratio(H100) == pytest.approx(989.4 / 1978.9)


@pytest.fixture(scope="module")
def counted():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = tiny_model(dtype=__import__("torch").bfloat16)
        return count_model(net, "tiny", 2, 32)


def test_counts_forward_backward_and_optimizer(counted):
    phases = {r.phase for r in counted.profile.records}
    assert {"forward", "backward", "optimizer"} <= phases
    h, i, layers = TINY_LLAMA["hidden_size"], TINY_LLAMA["intermediate_size"], TINY_LLAMA["num_hidden_layers"]
    kv = h // TINY_LLAMA["num_attention_heads"] * TINY_LLAMA["num_key_value_heads"]
    per_layer = h * h * 2 + 2 * h * kv + 3 * h * i + 2 * h       # q, o, k, v, gate/up/down, two norms
    assert counted.layer_params == layers * per_layer
    assert counted.layers == layers


def test_recompute_adds_one_forward_of_the_layers(counted):
    step = time_model(counted, H100)
    lay = TrainLayout(1, 2, 4, 32)                                # 2 micro-batches of 2
    links = Links(1.0, 0.0, 1.0, 0.0)
    none = split_step(step, H100, lay, links)
    full = split_step(step, H100, dataclasses.replace(lay, recompute="full"), links)
    fwd = step.phases["forward"]
    assert full.breakdown["recompute"] == pytest.approx(2 * fwd.layer_s)
    assert full.step_s - none.step_s == pytest.approx(2 * fwd.layer_s)
    sel = split_step(step, H100, dataclasses.replace(lay, recompute="selective"), links)
    assert sel.breakdown["recompute"] == pytest.approx(2 * fwd.attention_s)
    assert 0 < fwd.attention_s < fwd.layer_s


def test_data_parallel_keeps_tokens_per_gpu_and_adds_communication(counted):
    step = time_model(counted, H100)
    one = profile_training("tiny", H100, TrainLayout(1, 2, 2, 32), counted=step)
    eight = profile_training("tiny", H100, TrainLayout(8, 2, 16, 32, zero=3), counted=step)
    assert eight.breakdown["dp comm exposed"] > 0
    assert eight.breakdown["compute"] == pytest.approx(one.breakdown["compute"])
    assert eight.step_s > one.step_s
    assert eight.memory.optimizer == pytest.approx(one.memory.optimizer / 8)


def test_tp_overlap_hides_what_the_layers_compute_covers(counted):
    step = time_model(counted, H100, tp=2)
    lay = TrainLayout(2, 2, 2, 32, tp=2)
    links = RAW
    fwd, bwd = step.phases["forward"], step.phases["backward"]
    exposed = split_step(step, H100, lay, links)
    assert exposed.breakdown["tp comm"] == pytest.approx(fwd.tp_comm_s + bwd.tp_comm_s) and fwd.tp_comm_s > 0
    hidden = split_step(step, H100, dataclasses.replace(lay, tp_overlap=True), links)
    # max(0, T - F_layers - B_layers): the all-reduces show only where they outlast the layers' compute
    assert hidden.breakdown["tp comm"] == pytest.approx(
        max(0.0, fwd.tp_comm_s + bwd.tp_comm_s - fwd.layer_s - bwd.layer_s))


def test_zero_shards_over_data_and_context_parallel_ranks(counted):
    step = time_model(counted, H100)
    one = profile_training("tiny", H100, TrainLayout(1, 2, 2, 32), counted=step)
    # 8 GPUs as dp 4 x cp 2: the optimizer state is split over the 8 ranks that hold the same weights
    lay = TrainLayout(8, 2, 8, 32, cp=2, zero=1)
    assert (lay.dp, lay.replicas) == (4, 8)
    cp = profile_training("tiny", H100, lay, counted=step)
    assert cp.memory.optimizer == pytest.approx(one.memory.optimizer / 8)
    assert cp.breakdown["optimizer"] == pytest.approx(one.breakdown["optimizer"] / 8)


def test_op_table_sums_every_op_once(counted):
    from dispatchprof.train.count import op_seconds, op_table, phase_times, simulate_model
    from dispatchprof.sim.attention import is_attention
    sim = simulate_model(counted, H100)
    table = op_table(sim)
    assert sum(row[-1] for row in table.rows) < len(sim.ops)       # identical ops share a row
    # an independent sum over the ops: FP8 ratio 0.5 on linears, attention at half speed
    want = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    for t in sim.ops:
        r = counted.profile.records[t.record]
        attention = is_attention(r)
        s = op_seconds(t, 0.5, r.cost.macs > 0 and not attention) / (0.5 if attention else 1.0)
        want[r.phase if r.phase in want else "forward"] += s
    got = phase_times(table, 0.5, 0.5)
    for phase, seconds in want.items():
        assert got[phase].layer_s + got[phase].other_s == pytest.approx(seconds, rel=1e-12)
    # op_seconds keeps the simulator's host transfers: the token ids' upload (2 x 32 int64) and
    # AdamW's step counters (foreach AdamW keeps each parameter's ``step`` a 4-byte CPU tensor);
    # nothing in the backward (the attention backward's gradients are its own record's outputs)
    moved = [t for t in sim.ops if t.t_transfer > 0]
    host: dict[str, list[int]] = {}
    for t in moved:
        r = counted.profile.records[t.record]
        host.setdefault(r.phase, []).extend(n for p, n, _ in r.inputs if p == HOST)
    assert sorted(host) == ["forward", "optimizer"]
    assert sum(host["forward"]) == 2 * 32 * 8
    assert set(host["optimizer"]) == {4} and len(host["optimizer"]) >= len(list(tiny_model().parameters()))
    assert all(op_seconds(t, 1.0, False) == pytest.approx(t.time_s - t.t_comm) for t in moved)


def test_full_recompute_runs_the_forward_collectives_again(counted):
    step = time_model(counted, H100, tp=2)
    lay = TrainLayout(2, 2, 2, 32, tp=2)
    links = RAW
    fwd, bwd = step.phases["forward"], step.phases["backward"]
    none = split_step(step, H100, lay, links)
    full = split_step(step, H100, dataclasses.replace(lay, recompute="full"), links)
    # forward + backward all-reduces, then the recomputed forward's once more
    assert none.breakdown["tp comm"] == pytest.approx(fwd.tp_comm_s + bwd.tp_comm_s)
    assert full.breakdown["tp comm"] == pytest.approx(2 * fwd.tp_comm_s + bwd.tp_comm_s)


def test_op_recompute_runs_half_the_matmuls_and_the_other_ops_again(counted):
    step = time_model(counted, H100)
    lay = TrainLayout(1, 2, 4, 32, recompute="op")               # 2 micro-batches of 2
    res = split_step(step, H100, lay, Links(1.0, 0.0, 1.0, 0.0))
    fwd = step.phases["forward"]
    assert 0 < fwd.linear_s < fwd.layer_s - fwd.attention_s
    # torchtitan's policy: every other matmul's output is saved, attention's is saved, the rest recomputed
    assert res.breakdown["recompute"] == pytest.approx(2 * (fwd.linear_s / 2 + fwd.layer_s - fwd.linear_s - fwd.attention_s))


def test_head_bytes_hold_the_logits_and_the_embedding_output(counted):
    # micro-batch 2 x 32 tokens: the LM head writes 2*32*100 bf16 logits = 12,800 bytes, the embedding
    # 2*32*64 bf16 = 8,192; the loss adds its upcast and log-softmax; nothing inside a layer counts
    assert counted.head_bytes >= 12_800 + 8_192
    inside = sum(r.cost.bytes_written for r in counted.profile.records
                 if r.phase == "forward" and layer_of(r.scope) is not None)
    outside = sum(r.cost.bytes_written for r in counted.profile.records if r.phase == "forward")
    assert counted.head_bytes == outside - inside


def test_op_recompute_keeps_layer_inputs_and_half_the_matmul_outputs(counted):
    # what the count says the policy keeps: attention outputs + half of every layer matmul's output
    inside = [r for r in counted.profile.records if r.phase == "forward" and layer_of(r.scope) is not None]
    from dispatchprof.sim.attention import is_attention
    mm = sum(r.cost.bytes_written for r in inside if r.cost.macs > 0 and not is_attention(r))
    att = sum(r.cost.bytes_written for r in inside if is_attention(r))
    assert counted.op_saved_bytes == att + mm // 2 and att > 0 and mm > 0
    # 10 layers, one stage, one micro-batch in flight: 10 inputs of 1e6 + 3e8 kept, then the larger of
    # one layer's 4e8 and the head's 1e8
    mem = memory_per_gpu(1e9, 1e8, 10, 4e9, dp=1, tp=1, pp=1, cp=1, vp=1, m=1, zero=0, recompute="op",
                         layer_input_bytes=1e6, reduce_bytes=2, head_bytes=1e8, op_saved_bytes=3e8)
    assert mem.activations == pytest.approx(10 * 1e6 + 3e8 + 4e8)


def test_tp_collectives_move_at_the_tp_groups_link():
    """The simulator times a TP all-reduce at interconnect / 2; the step puts it on `Links`."""
    from dispatchprof.sim.links import BUS_EFFICIENCY, links_of
    from dispatchprof.train.step import tp_link_scale
    a100 = placement_of("A100-80GB").devices[0]                     # NVLink 600 GB/s both ways: 300 one way
    inside = TrainLayout(8, 1, 1, 2048, tp=8)
    assert tp_link_scale(a100, inside, links_of(a100)) == pytest.approx(1 / BUS_EFFICIENCY)     # 300 / (300 x 0.8)
    assert tp_link_scale(a100, TrainLayout(8, 1, 8, 2048), links_of(a100)) == 1.0                # no tp
    # tp 16 over two nodes of 8: min(scale-up 240, 8 ranks per node x 10 x 0.8 = 64) GB/s
    across = TrainLayout(16, 1, 1, 2048, tp=16)
    assert tp_link_scale(a100, across, links_of(a100, 10.0)) == pytest.approx(300 / (8 * 10 * BUS_EFFICIENCY))
    # H100 (NVLink 900 GB/s, reduction in the switch): 1 inside a node; across nodes the NICs' rate
    assert tp_link_scale(H100, inside, links_of(H100)) == 1.0
    assert tp_link_scale(H100, across, links_of(H100, 10.0)) == pytest.approx(450 / (8 * 10 * BUS_EFFICIENCY))


def test_tp_comm_of_the_step_is_the_counted_time_times_the_link_scale(counted):
    from dispatchprof.sim.links import BUS_EFFICIENCY, links_of
    a100 = placement_of("A100-80GB").devices[0]
    lay = TrainLayout(2, 2, 2, 32, tp=2)
    step = time_model(counted, a100, tp=2)
    fwd, bwd = step.phases["forward"], step.phases["backward"]
    res = split_step(step, a100, lay, links_of(a100))
    assert res.breakdown["tp comm"] == pytest.approx((fwd.tp_comm_s + bwd.tp_comm_s) / BUS_EFFICIENCY)
    # H100's NVSwitch reduces in the switch: the all-reduces keep the simulator's datasheet rate
    step = time_model(counted, H100, tp=2)
    fwd, bwd = step.phases["forward"], step.phases["backward"]
    res = split_step(step, H100, lay, links_of(H100))
    assert res.breakdown["tp comm"] == pytest.approx(fwd.tp_comm_s + bwd.tp_comm_s)


def test_scale_out_bandwidth_sets_the_pipeline_sends_across_nodes(counted):
    """pp 2 over 2 nodes of 1 GPU: each micro-batch sends its output forward and its gradient back,
    2 x (2 x 32 x hidden x 2 bytes / (GB/s x 0.8 x 1e9) + 10 us)."""
    from dispatchprof.sim.links import BUS_EFFICIENCY, SCALE_OUT_LATENCY_US
    step = time_model(counted, H100)
    lay = TrainLayout(2, 2, 2, 32, pp=2, gpus_per_node=1)
    act = 2 * 32 * TINY_LLAMA["hidden_size"] * 2
    for gb_per_s in (25.0, 50.0):
        res = profile_training("tiny", H100, lay, counted=step, scale_out_gb_per_s=gb_per_s)
        want = 2 * (act / (gb_per_s * 1e9 * BUS_EFFICIENCY) + SCALE_OUT_LATENCY_US * 1e-6)
        assert res.breakdown["pp p2p"] == pytest.approx(want)
    with pytest.raises(ValueError, match="scale_out_gb_per_s must be > 0 GB/s, got 0"):
        profile_training("tiny", H100, lay, counted=step, scale_out_gb_per_s=0)
