"""The 2025 GPU profiles (B300, GB300, MI325X, MI355X): each loads with its sources, and one GEMM's
roofline time on each is the hand-worked one."""

import pytest
import torch

from dispatchprof import OpCounter, load_device

# name: (memory GB, bandwidth GB/s, bf16 / fp8 / fp4 dense TFLOP/s, interconnect GB/s, TDP W), as quoted in
# the profiles' sources (per GPU, without sparsity)
FRONTIER = {
    "B300": (270, 7700, 2250, 4500, 14000, 1800, 1100),
    "GB300": (279, 8000, 2500, 5000, 15000, 1800, 1400),
    "MI325X": (256, 6000, 1307.4, 2614.9, None, 896, 1000),
    "MI355X": (288, 8000, 2516.6, 5033.2, 10066.3, 1075.2, 1400),
}


@pytest.mark.parametrize("name", sorted(FRONTIER))
def test_frontier_device_loads_with_its_sourced_figures(name):
    memory, bandwidth, bf16, fp8, fp4, link, tdp = FRONTIER[name]
    d = load_device(name)
    assert (d.memory_capacity_gb, d.memory_bandwidth_gb_per_s, d.interconnect_gb_per_s, d.tdp_w) == \
        (memory, bandwidth, link, tdp)
    assert d.peak_flops("bf16", matrix=True) == bf16 * 1e12
    assert d.peak_flops("fp8", matrix=True) == fp8 * 1e12
    if fp4 is not None:
        assert d.peak_flops("fp4", matrix=True) == fp4 * 1e12
    for field in ("memory_capacity_gb", "memory_bandwidth_gb_per_s", "matrix_tflops", "interconnect_gb_per_s",
                  "tdp_w", "compute_units"):
        assert d.source_of(field), f"{name}: no source for {field}"


def test_mi355x_peaks_follow_its_compute_units_and_clock():
    # 8 XCDs x 32 CUs, 8192 FP8 FLOP per CU per clock (ISSCC 2026), 2.4 GHz: 5,033.2 TFLOP/s; bf16 half, MXFP4 twice
    fp8 = 8 * 32 * 8192 * 2.4e9
    d = load_device("MI355X")
    assert d.compute_units == 256
    assert d.peak_flops("fp8", matrix=True) == pytest.approx(fp8, rel=1e-5)
    assert d.peak_flops("bf16", matrix=True) == pytest.approx(fp8 / 2, rel=1e-5)
    assert d.peak_flops("fp4", matrix=True) == pytest.approx(fp8 * 2, rel=1e-5)


@pytest.mark.parametrize("name", sorted(FRONTIER))
def test_one_bf16_gemm_roofline_on_each(name):
    # [4096, 8192] @ [8192, 2048] in bf16, pure roofline (bound=True):
    # work = MULT 4096*2048*8192 + ADD 4096*2048*8191 = 68,719,476,736 + 68,711,088,128 = 137,430,564,864
    # bytes = 2 * (4096*8192 + 8192*2048 + 4096*2048) = 2 * 58,720,256 = 117,440,512
    memory, bandwidth, bf16, *_ = FRONTIER[name]
    a = torch.empty(4096, 8192, dtype=torch.bfloat16, device="meta")
    b = torch.empty(8192, 2048, dtype=torch.bfloat16, device="meta")
    with OpCounter(devices=name, bound=True) as c:
        torch.mm(a, b)
    sim = c.simulated()
    (t,) = [t for t, r in zip(sim.ops, sim.records) if r.op == "aten.mm"]
    assert t.work == 137_430_564_864 and t.traffic_bytes == 117_440_512
    assert t.t_compute == pytest.approx(137_430_564_864 / (bf16 * 1e12))      # B300: 61.08 us
    assert t.t_memory == pytest.approx(117_440_512 / (bandwidth * 1e9))        # B300: 15.25 us
    assert t.t_compute > t.t_memory                                            # compute-bound on all four
