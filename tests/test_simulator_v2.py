"""Simulator v2 (issue #14), each piece worked by hand: the host/device timeline, runtimes (a fused
chain's bytes, KV written in place, last-position logits), GEMM tile and wave efficiency, a tp=2
all-reduce, static energy, and the errors promised for bad runtime and tp input."""

import dataclasses
import itertools
import warnings

import pytest
import torch

from conftest import tiny_device_yaml, tiny_model
from dispatchprof import OpCounter, load_device
from dispatchprof.llm.generation import profile_generation
from dispatchprof.results.records import OpRecord
from op_formulas.cost import Cost
from dispatchprof.sim.kernels import gemm_dims, shape_efficiency
from dispatchprof.sim.runtime import plan_runtime
from dispatchprof.sim.timeline import schedule, step_time, sum_step_times
from dispatchprof.sim.timing import OpTiming, affine_sum, allreduce


def op(device_s: float, host_s: float) -> OpTiming:
    """An op whose kernel takes device_s (all memory time) and whose issue takes host_s."""
    return OpTiming(0, "d", 0.0, device_s, 0.0, 0.0, 0.0, t_host=host_s)


def test_host_bound_step_by_hand():
    # eager, tiny kernels: host issues at 7, 14, 21 us; each kernel 2 us starts when issued
    ops = [op(2e-6, 7e-6)] * 3
    assert schedule(ops) == pytest.approx([(7e-6, 7e-6, 9e-6), (14e-6, 14e-6, 16e-6), (21e-6, 21e-6, 23e-6)])
    assert step_time(ops) == pytest.approx(23e-6)            # 3 x 7 + 2: the device waits for the host


def test_device_bound_step_by_hand():
    # one graph launch of 20 us, then kernels of 100, 50, 30 us back to back: 20 + 180 = 200 us
    ops = [op(100e-6, 20e-6), op(50e-6, 0.0), op(30e-6, 0.0)]
    assert [s for _, s, _ in schedule(ops)] == pytest.approx([20e-6, 120e-6, 170e-6])
    assert step_time(ops) == pytest.approx(200e-6)
    # mixed: host 10 us per op, kernels 5, 40, 5 us: ends 15, 60 (starts at max(20, 15)), 65 (max(30, 60))
    assert step_time([op(5e-6, 10e-6), op(40e-6, 10e-6), op(5e-6, 10e-6)]) == pytest.approx(65e-6)


def test_sum_of_step_times_equals_stepping_each():
    # kernels that grow with the step (a KV cache): the step turns from host-bound to device-bound
    t0 = [op(1e-6, 5e-6), op(2e-6, 5e-6), op(1e-6, 5e-6)]
    t1 = [op(1e-6, 5e-6), op(3e-6, 5e-6), op(1e-6, 5e-6)]
    n = 40
    steps = [[op(t0[i].time_s + (t1[i].time_s - t0[i].time_s) * k, 5e-6) for i in range(3)] for k in range(n)]
    assert sum_step_times(t0, t1, n) == pytest.approx(sum(step_time(s) for s in steps), rel=1e-12)
    # k = 0: host-bound, 15 + 1 = 16 us; k = 30: device-bound from the second op, 10 + 32 + 1 = 43 us
    assert step_time(steps[0]) == pytest.approx(16e-6) and step_time(steps[30]) == pytest.approx(43e-6)


def test_affine_sum_splits_the_unoverlapped_share_by_each_steps_longer_side():
    # compute grows from 2 to 2 + 9 us, memory shrinks from 6 to 6 - 4.5 us over 10 steps: they
    # cross between k = 2 and 3; half of each step's shorter side is not hidden
    def at(k):
        return OpTiming(0, "d", 2e-6 + 1e-6 * k, 6e-6 - 0.5e-6 * k, 0.0, 1e-6, 0.0, unoverlapped=0.5)

    steps = [at(k) for k in range(10)]
    time, _, compute, memory = affine_sum(at(0), at(1), 10)
    assert time == pytest.approx(sum(t.time_s for t in steps), rel=1e-12)
    assert compute == pytest.approx(sum(t.busy_s for t in steps if t.bound == "compute"), rel=1e-12)
    assert memory == pytest.approx(sum(t.busy_s for t in steps if t.bound == "memory"), rel=1e-12)
    # k = 0: memory 6 + 0.5 * 2 = 7 us; k = 9: compute 11 + 0.5 * 1.5 = 11.75 us
    assert (steps[0].busy_s, steps[9].busy_s) == (pytest.approx(7e-6), pytest.approx(11.75e-6))


@pytest.mark.parametrize("compute_slope,memory_slope", [(1.0, 0.0), (0.0, 1.0), (-1.0, 0.5), (0.5, 0.5), (0.0, 0.0)])
def test_affine_sum_equals_the_steps_summed_one_by_one(compute_slope, memory_slope):
    # compute from 3 us, memory from 5 us, each on its own line: compute longer at every step, at
    # none, from the start until they cross, or on parallel lines (never crossing)
    def at(k):
        return OpTiming(0, "d", (3 + compute_slope * k) * 1e-6, (5 + memory_slope * k) * 1e-6, 0.0, 1e-6, 0.1 * k,
                        unoverlapped=0.25)

    steps = [at(k) for k in range(7)]
    time, dynamic, compute, memory = affine_sum(at(0), at(1), 7)
    assert time == pytest.approx(sum(t.time_s for t in steps), rel=1e-12)
    assert dynamic == pytest.approx(0.1 * 21, rel=1e-12)
    assert compute == pytest.approx(sum(t.busy_s for t in steps if t.bound == "compute"), rel=1e-12, abs=1e-18)
    assert memory == pytest.approx(sum(t.busy_s for t in steps if t.bound == "memory"), rel=1e-12, abs=1e-18)


def test_fused_pointwise_chain_costs_its_inputs_and_outputs():
    x = torch.randn(1000)                                     # 4000 bytes from the host
    with OpCounter(devices="H100-SXM", runtime="compiled") as fused, OpCounter(devices="H100-SXM") as eager:
        ((x * 2 + 1).relu() * x).sum()
    # eager: mul r4000 w4000, add r4000 w4000, relu r4000 w4000, mul r8000 w4000, sum r4000 w4 = 40004
    assert sum(t.traffic_bytes for t in eager.simulated().ops) == 40004
    sim = fused.simulated()
    # compiled: one kernel reads x once (4000) and writes the 4-byte sum: every intermediate stays on chip
    assert sum(t.traffic_bytes for t in sim.ops) == 4004
    assert sim.runtime.fused_chains == 1 and sim.runtime.fused_ops == 4 and sim.runtime.kernels == 1
    assert sim.runtime.removed_bytes == 36000
    assert [t.t_overhead for t in sim.ops] == pytest.approx([2e-6, 0, 0, 0, 0])    # one launch
    assert [t.t_host for t in sim.ops] == pytest.approx([20e-6, 0, 0, 0, 0])      # one graph per step
    assert "4 ops fused into 1 pointwise chains" in sim.runtime.describe()


def record(op_name: str, inputs, read: int, written: int, phase: str = "decode", scope: str = "attn",
           shapes=()) -> OpRecord:
    return OpRecord(op_name, scope, phase, "bfloat16", Cost(bytes_read=read, bytes_written=written),
                    inputs=tuple(inputs), shapes=shapes)


def test_kv_cache_written_in_place_moves_the_new_token_only():
    # cache [1, 2, 8, 16] bf16 = 512 bytes (made by a cat), new keys 64 bytes: eager copies 576 in, 576 out
    records = [record("aten.cat", [(-1, 0, 1), (-1, 512, 2)], 512, 512, "prefill"),
               record("aten.cat", [(0, 512, 3), (-1, 64, 4)], 576, 576)]
    plans, changes = plan_runtime(records, "serving", (0, 1), ["d", "d"])
    assert plans[1].removed_bytes == 576 + 576 - 2 * 64        # in place: read 64, write 64
    assert changes.kv_bytes_in_place == 1024
    eager, _ = plan_runtime(records, "eager", (0, 1), ["d", "d"])
    assert eager[1].removed_bytes == 0 and eager[1].host == "op"


def test_serving_computes_last_position_logits_only():
    model = tiny_model()
    with torch.no_grad(), OpCounter(devices="H100-SXM", runtime="serving", bound=True) as c:
        with c.phase("prefill"):
            model(torch.zeros(1, 8, dtype=torch.long))
    sim = c.simulated()
    head = next(t for t, r in zip(sim.ops, sim.records) if r.scope == "lm_head")
    r = sim.records[head.record]
    # lm_head [8, 64] x [64, 100] fp32: 51200 MACs = 102400 - 800 work; kept for 1 of 8 positions
    assert head.work == pytest.approx((r.cost.add + r.cost.mult) / 8)
    # weights 64*100*4 = 25600 bytes read whole; activations (8*64 + 8*100) * 4 = 5248 bytes, 1/8 kept
    assert head.traffic_bytes == pytest.approx(25600 + 5248 / 8)
    assert sim.runtime.logits_share == pytest.approx(1 / 8)


def test_serving_host_works_per_sequence_of_a_step():
    quick = dataclasses.replace(load_device("H100-SXM"), name="quick-host", graph_launch_us=20.0, sequence_host_us=0.0)
    busy = dataclasses.replace(quick, name="busy-host", sequence_host_us=10.0)
    model = tiny_model()
    x = torch.zeros(3, 8, dtype=torch.long)
    runs = {}
    for runtime in ("serving", "compiled", "eager"):
        with torch.no_grad(), OpCounter(devices=[quick, busy], runtime=runtime) as c:
            with c.phase("prefill"):
                model(x)
            with c.phase("decode"):
                model(x[:, :1])
        runs[runtime] = {s.name: s for s in c.simulations()}
    serving = runs["serving"]
    starts = [i for i, t in enumerate(serving["busy-host"].ops) if t.t_host]
    assert len(starts) == 2                                    # one graph launch per step
    # each step runs 3 sequences: its launch is issued after 20 + 3 x 10 = 50 us instead of 20;
    # only the first op has host time, so each step ends 30 us later: 60 us over the two steps
    assert [serving["busy-host"].ops[i].t_host for i in starts] == pytest.approx([50e-6, 50e-6])
    assert [serving["quick-host"].ops[i].t_host for i in starts] == pytest.approx([20e-6, 20e-6])
    assert serving["busy-host"].total.time_s == pytest.approx(serving["quick-host"].total.time_s + 60e-6, rel=1e-12)
    for runtime in ("compiled", "eager"):                       # an engine's per-sequence work only
        assert runs[runtime]["busy-host"].total.time_s == runs[runtime]["quick-host"].total.time_s
    with torch.no_grad(), OpCounter(devices=busy, runtime="serving", bound=True) as c:
        model(x)
    assert not any(t.t_host for t in c.simulated().ops)        # --bound: no host time at all


def test_gemm_efficiency_at_two_shapes_by_hand():
    h100 = load_device("H100-SXM")                 # 132 SMs, 128x128 tiles
    # [256, 12288] x [12288, 12288]: 2 * 96 = 192 tiles -> 2 waves of 132: 192 / 264 = 0.7273; tiles full
    assert shape_efficiency(h100, (1, 256, 12288, 12288)) == pytest.approx(192 / 264)
    # [8192, 8192] x [8192, 8192]: 64 * 64 = 4096 tiles -> 32 waves: 4096 / 4224 = 0.9697
    assert shape_efficiency(h100, (1, 8192, 8192, 8192)) == pytest.approx(4096 / 4224)
    # decode GEMV [1, 4096] x [4096, 1024]: 16-row tiles (1/16 used), 8 tiles split 8 ways over K
    # (min(132 // 8, 4096 // 512) = 8): 64 units of 132 -> 1/16 * 64/132
    assert shape_efficiency(h100, (1, 1, 1024, 4096)) == pytest.approx(64 / 132 / 16)
    # tensor parallelism: this device's N is half: [256, 12288] x [12288, 6144] -> 96 tiles, 1 wave 96/132
    assert shape_efficiency(h100, (1, 256, 12288, 12288), share=0.5) == pytest.approx(96 / 132)
    assert shape_efficiency(h100.as_bound(), (1, 256, 12288, 12288)) == 1.0
    # predicted throughput of the measured shape: 0.8 * 0.7273 * 989.4 = 576 TFLOP/s (measured ~618)
    assert 0.8 * shape_efficiency(h100, (1, 256, 12288, 12288)) * 989.4 == pytest.approx(575.6, abs=0.1)
    rec = OpRecord("aten.addmm", "", "forward", "float16", Cost(), shapes=((12288,), (256, 12288), (12288, 12288)))
    assert gemm_dims(rec) == (1, 256, 12288, 12288)


def test_fp8_gemms_reach_their_own_share_of_the_peak_by_hand():
    from dispatchprof.sim.timing import time_op
    from op_formulas.matmul import matmul_cost
    h100 = load_device("H100-SXM")                 # matrix_efficiency fp8 0.55; bf16 compute_efficiency 0.8
    m = n = k = 8192                               # 4096 tiles in 32 waves: shape efficiency 4096 / 4224
    flop = m * n * (2 * k - 1)                     # k multiplies and k - 1 adds per output
    cost = matmul_cost(m, k, n).with_bytes(m * k + k * n, 2 * m * n)
    rec = OpRecord("aten.mm", "", "forward", "bfloat16", cost, shapes=((m, k), (k, n)), param_bytes=2 * k * n,
                   param_elements=k * n)
    fp8 = time_op(0, rec, [h100], set(), "fp8", False)
    assert fp8.t_compute == pytest.approx(flop / (1978.9e12 * 0.55 * 4096 / 4224))    # 0.5265 ms
    bf16 = time_op(0, rec, [h100], set(), None, False)
    assert bf16.t_compute == pytest.approx(flop / (989.4e12 * 0.8 * 4096 / 4224))      # 0.7237 ms
    # int8 has no figure of its own: compute_efficiency; the bound ignores both
    assert time_op(0, rec, [h100], set(), "int8", False).t_compute == pytest.approx(
        flop / (1978.9e12 * 0.8 * 4096 / 4224))
    assert time_op(0, rec, [h100.as_bound()], set(), "fp8", False).t_compute == pytest.approx(
        flop / 1978.9e12)


def test_tp2_allreduce_by_hand():
    h100 = load_device("H100-SXM")                 # NVLink 900 GB/s both ways, 6 us latency
    # 8192 bytes over 2 devices: each sends 2 * 1/2 * 8192 = 8192 bytes one way at 450 GB/s, + 6 us
    seconds, joules = allreduce(8192, 2, h100)
    assert seconds == pytest.approx(8192 / 450e9 + 6e-6)
    assert joules == pytest.approx(8 * 8192 * 27e-12)          # no NVLink pJ/bit: the host link's 27
    assert allreduce(8192, 1, h100) == (0.0, 0.0)


def test_tp8_allreduce_latency_grows_with_the_ring_by_hand():
    h100 = load_device("H100-SXM")                 # 6 us over 2 GPUs, 0.6 us per further ring step
    # 8 GPUs: 2 * 7 = 14 ring steps, 12 more than 2 GPUs' 2: 6 + 12 * 0.6 = 13.2 us;
    # each sends 2 * 7/8 * 8192 = 14336 bytes one way at 450 GB/s
    seconds, _ = allreduce(8192, 8, h100)
    assert seconds == pytest.approx(14336 / 450e9 + 13.2e-6)
    assert allreduce(8192, 4, h100)[0] == pytest.approx(12288 / 450e9 + 8.4e-6)    # 6 + 4 * 0.6


def test_tp4_allreduce_over_pcie_by_hand():
    l40s = load_device("L40S")     # no NVLink: PCIe, a measured 13.25 GB/s bus bandwidth (26.5 both ways), 6 us
    # 2 MB over 4 devices: each sends 2 * 3/4 * 2 MB = 3 MB one way at 13.25 GB/s (226.4 us), + 6 us
    # for two devices + 4 further ring steps at PCIe's 1.0 us
    seconds, joules = allreduce(2_000_000, 4, l40s)
    assert seconds == pytest.approx(3_000_000 / 13.25e9 + 10e-6)
    assert seconds == pytest.approx(236.415e-6, rel=1e-5)
    assert joules == pytest.approx(8 * 3_000_000 * 27e-12)


def test_tp2_splits_blocks_and_all_reduces_twice_per_layer():
    model = tiny_model(num_hidden_layers=3)
    x = torch.zeros(1, 4, dtype=torch.long)
    with torch.no_grad(), OpCounter(devices="H100-SXM", tp=2, bound=True) as two, \
            OpCounter(devices="H100-SXM", bound=True) as one:
        model(x)
    split, whole = two.simulated(), one.simulated()
    reduced = [(split.records[t.record].scope, t.t_comm) for t in split.ops if t.t_comm]
    assert [s for s, _ in reduced] == [f"model.layers.{i}.{b}" for i in range(3)
                                       for b in ("self_attn.o_proj", "mlp.down_proj")]
    # the o_proj output [4, 64] fp32 = 1024 bytes: 1024 / 450 GB/s (no latency at the bound)
    assert reduced[0][1] == pytest.approx(1024 / 450e9)
    q = next(i for i, r in enumerate(whole.records) if r.scope.endswith("layers.0.self_attn.q_proj"))
    assert split.ops[q].work == pytest.approx(whole.ops[q].work / 2)
    assert split.ops[q].traffic_bytes == pytest.approx(whole.ops[q].traffic_bytes / 2)
    norm = next(i for i, r in enumerate(whole.records) if "input_layernorm" in r.scope)
    assert split.ops[norm].traffic_bytes == whole.ops[norm].traffic_bytes          # norms run whole
    assert split.group_energy_j == pytest.approx(2 * split.total.energy_j)


def test_kv_heads_fewer_than_devices_are_read_whole_per_head():
    """tp=4 over 2 KV heads: each device holds one KV head (replicated, as vLLM does), so the
    attention op reads 1/2 of its keys and values, not 1/4, while the query, the output and the
    arithmetic split 4 ways; tp=2 splits everything 2 ways."""
    from dispatchprof.sim.attention import is_attention

    model = tiny_model(num_hidden_layers=1)
    x = torch.zeros(1, 4, dtype=torch.long)
    with torch.no_grad(), OpCounter(devices="H100-SXM", tp=4, bound=True) as four, \
            OpCounter(devices="H100-SXM", tp=2, bound=True) as two, OpCounter(devices="H100-SXM", bound=True) as one:
        model(x)
    whole = one.simulated()
    i = next(k for k, r in enumerate(whole.records) if is_attention(r))
    r = whole.records[i]
    kv = r.inputs[1][1] + r.inputs[2][1]                # k and v [1, 2, 4, 16] fp32: 512 B each
    assert kv == 1024 and r.shapes[1] == (1, 2, 4, 16)
    total = whole.ops[i].traffic_bytes
    assert four.simulated().ops[i].traffic_bytes == pytest.approx((total - kv) / 4 + kv / 2)
    assert four.simulated().ops[i].work == pytest.approx(whole.ops[i].work / 4)
    assert two.simulated().ops[i].traffic_bytes == pytest.approx(total / 2)


def test_static_energy_by_hand():
    h100 = dataclasses.replace(load_device("H100-SXM"), static_power_w=100.0)
    x = torch.randn(256)
    with OpCounter(devices=h100, host_time=False) as c:      # the fixed host figure
        torch.exp(x)
        torch.exp(x)
    sim = c.simulated()
    # eager: issued at 7 and 14 us, each kernel ~2 us: the step ends at 14 + t_op(2nd) (host-bound)
    assert sim.total.time_s == pytest.approx(14e-6 + sim.ops[1].time_s)
    # static = 100 W x the whole elapsed time, idle gaps included; dynamic from the ops alone
    assert sim.total.static_j == pytest.approx(100 * sim.total.time_s)
    assert sim.total.energy_j == pytest.approx(sum(t.dynamic_j for t in sim.ops) + 100 * sim.total.time_s)


def test_fast_decode_path_matches_every_step_under_each_runtime_and_tp():
    model = tiny_model()
    h100 = dataclasses.replace(load_device("H100-SXM"), static_power_w=80.0, sequence_host_us=10.0,
                               weight_only_kernel_us={"int4": 3.0}, unoverlapped_fraction=0.5)
    for runtime, tp in itertools.product(("eager", "compiled", "serving"), (1, 2)):
        weights = "int4" if tp == 2 else None          # each dequantising kernel's fixed cost too
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fast = profile_generation(model, 2, 5, 30, devices=[h100], runtime=runtime, tp=tp, weight_dtype=weights)
            slow = profile_generation(model, 2, 5, 30, devices=[h100], runtime=runtime, tp=tp, weight_dtype=weights,
                                      exact=True)
        f, s = fast.devices["H100-SXM"], slow.devices["H100-SXM"]
        assert fast.steps_counted < slow.steps_counted
        for name in ("ttft_s", "tpot_first_s", "tpot_mean_s", "tpot_last_s", "energy_per_token_j"):
            assert getattr(f, name) == pytest.approx(getattr(s, name), rel=1e-9), (runtime, tp, name)
        for name in ("compute_bound_s", "memory_bound_s"):      # the unoverlapped share on its step's side
            assert getattr(f.decode, name) == pytest.approx(getattr(s.decode, name), rel=1e-9), (runtime, tp, name)
        assert f.decode.static_j == pytest.approx(80.0 * f.decode.time_s)
        assert (f.runtime, f.tp) == (runtime, tp)


def test_bad_runtime_and_tp():
    with pytest.raises(ValueError, match=r"OpCounter\(runtime=...\) must be one of \('eager', 'compiled', "
                                         r"'serving'\), got 'jit'"):
        OpCounter(devices="H100-SXM", runtime="jit")
    with pytest.raises(ValueError, match=r"runtime must be one of \('eager', 'compiled', 'serving'\)"):
        profile_generation(tiny_model(), 1, 2, 2, devices="H100-SXM", runtime="vllm")
    with pytest.raises(ValueError, match="tp=3 does not divide the model's 4 attention heads; allowed: 1, 2, 4"):
        profile_generation(tiny_model(), 1, 2, 2, devices="H100-SXM", tp=3)
    with pytest.raises(ValueError, match="tp=2 needs a device-to-device interconnect, and 'RTX-4090' has no "
                                         "interconnect_gb_per_s figure"):
        OpCounter(devices="RTX-4090", tp=2)
    with pytest.raises(ValueError, match="tp must be a whole number >= 1, got 0"):
        OpCounter(devices="H100-SXM", tp=0)


def test_trace_has_a_host_track_and_a_track_per_device_of_the_group():
    from dispatchprof.report.trace import trace_events

    model = tiny_model()
    with torch.no_grad(), OpCounter(devices="H100-SXM", tp=2, host_time=False) as c:
        model(torch.zeros(1, 4, dtype=torch.long))
    sim = c.simulated()
    events = trace_events(sim)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"H100-SXM #0", "H100-SXM #1", "host"}
    launches = [e for e in events if e["ph"] == "X" and e["cat"] == "host"]
    assert len(launches) == len(sim.ops) and launches[1]["ts"] == pytest.approx(7.0)   # eager: 7 us each
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "op"]
    assert len(ops) == 2 * len(sim.ops)
    end = max(e["ts"] + e["dur"] for e in ops)
    assert end * 1e-6 == pytest.approx(sim.total.time_s, abs=1e-9)


def test_weight_dtype_changes_simulated_time_not_the_counted_bytes():
    from dispatchprof.report.generation import generation_summary

    model = tiny_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = profile_generation(model, 1, 4, 4, devices="H100-SXM", bound=True)
        int4 = profile_generation(model, 1, 4, 4, devices="H100-SXM", bound=True, weight_dtype="int4")
    assert int4.decode_totals == full.decode_totals                 # the bytes column: as counted (fp32 here)
    assert int4.devices["H100-SXM"].tpot_mean_s < full.devices["H100-SXM"].tpot_mean_s
    assert "bytes moved (as counted)" in generation_summary(int4)


def test_unoverlapped_share_of_the_shorter_side_by_hand(tmp_path):
    from dispatchprof import DeviceProfileError

    # the Tiny device: 10 GB/s memory, matrix fp32 at 0.01 TFLOP/s, fast host links, full efficiencies
    text = tiny_device_yaml(host_to_device_gb_per_s=1000, device_to_host_gb_per_s=1000, matrix_tflops="{fp32: 0.01}",
                            compute_efficiency=1, memory_efficiency=1, unoverlapped_fraction=0.5)
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    lin = torch.nn.Linear(100, 100, bias=False)
    x = torch.ones(10, 100)

    def matmul(bound=False):
        with OpCounter(devices=str(path), bound=bound) as c:
            lin(x)
        return c.simulated().ops[-1]

    # [10, 100] x [100, 100]: 10 * 100 * (100 MULT + 99 ADD) = 199,000 FLOPs at 1e10/s = 19.9 us;
    # x 4,000 + weight 40,000 + out 4,000 bytes at 10 GB/s = 4.8 us. Half of the shorter side is
    # not hidden: 19.9 + 0.5 * 4.8 = 22.3 us, compute-bound; bound: the roofline's 19.9 us
    t = matmul()
    assert (t.t_compute, t.t_memory) == (pytest.approx(19.9e-6), pytest.approx(4.8e-6))
    assert t.busy_s == pytest.approx(22.3e-6) and t.bound == "compute"
    assert t.time_s == pytest.approx(22.3e-6 + t.t_overhead + t.t_transfer)
    assert matmul(bound=True).busy_s == pytest.approx(19.9e-6)
    path.write_text(text.replace("unoverlapped_fraction: 0.5", "unoverlapped_fraction: 1.5"))
    with pytest.raises(DeviceProfileError, match=r"unoverlapped_fraction.*must be in \[0, 1\]"):
        load_device(str(path))
