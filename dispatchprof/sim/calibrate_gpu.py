"""Measure the CUDA GPU this process runs on and write it as a device profile (simulator v2 fields).

Measured (`measure_gpu`, only where ``torch.cuda.is_available()``):
- a GEMM sweep: fp16 [M, N] x [N, N] for M in ``GEMM_M`` (N = ``GEMM_N``, the shape of issue
  #14's H100 figures; M = 1 is the GEMV);
- copy bandwidth (a device-to-device clone of 1 GiB): memory_bandwidth_gb_per_s, memory_efficiency 1;
- GEMV bandwidth (the M = 1 point's weight bytes per second), reported beside the copy's;
- launch cost: the device time of a tiny kernel replayed in a CUDA graph (launch_overhead_us);
- host cost per op: wall time per op of a long eager chain of tiny ops (host_overhead_us);
- the SM count (compute_units) and the memory size.
Fitted (`dispatchprof.sim.gemm_fit`): the matrix peak, matrix_memory_efficiency and
unoverlapped_fraction that reproduce the whole sweep with the simulator's own timing formula
(compute_efficiency 1: the fitted peak is the achieved one). Not measured: energy (stated
assumptions), static power, the interconnect. `gpu_profile_yaml` turns a `GpuCalibration` and its
`GemmFit` into the profile document; tests feed it fake measurements.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import yaml

from dispatchprof.results.files import write_atomic
from dispatchprof.sim.gemm_fit import GemmFit, fit_gemm
from dispatchprof.sim.loader import parse_profile
from op_formulas.matmul import matmul_cost

GEMM_M = (1, 16, 64, 256, 1024, 4096, 8192)
GEMM_N = 12288
GEMM_TILE = (128, 128)


@dataclass(frozen=True)
class GpuCalibration:
    """Measured figures of one GPU (FLOP/s, bytes/s, seconds)."""

    product: str
    gemm_flops: dict[int, float]       # M -> FLOP/s (ADD + MULT, as counted) of fp16 [M, N] x [N, N]
    copy_bytes_per_s: float
    gemv_bytes_per_s: float            # weight bytes/s of the M = 1 point
    kernel_s: float                    # device time of a tiny kernel in a CUDA graph
    host_op_s: float                   # eager wall time per tiny op
    compute_units: int
    memory_bytes: int
    gemm_n: int = GEMM_N


def _timed(fn, repeats: int = 10) -> float:
    """Median seconds of ``fn`` on the GPU (CUDA events)."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def measure_gpu() -> GpuCalibration:
    """Run the measurements of the module docstring on ``cuda:0``."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("calibrating a GPU needs CUDA: torch.cuda.is_available() is False on this machine")
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    w = torch.randn(GEMM_N, GEMM_N, device=dev, dtype=torch.float16)
    seconds = {}
    for m in GEMM_M:
        a = torch.randn(m, GEMM_N, device=dev, dtype=torch.float16)
        seconds[m] = _timed(lambda: a @ w)
    gemm = {m: matmul_cost(m, GEMM_N, GEMM_N).flops / t for m, t in seconds.items()}
    gemv = w.numel() * w.element_size() / seconds[1]
    big = torch.empty(1 << 29, device=dev, dtype=torch.float16)          # 1 GiB
    copy = 2 * big.numel() * 2 / _timed(lambda: big.clone())
    tiny = torch.zeros(1, device=dev)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(100):
            tiny.add_(1)
    kernel = _timed(graph.replay) / 100
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(1000):
        tiny.add_(1)
    torch.cuda.synchronize()
    host = (time.perf_counter() - start) / 1000
    return GpuCalibration(props.name, gemm, copy, gemv, kernel, host, props.multi_processor_count,
                          props.total_memory)


def fit_calibration(cal: GpuCalibration, name: str = "this-gpu") -> GemmFit:
    """The matrix figures that reproduce ``cal``'s GEMM sweep (`dispatchprof.sim.gemm_fit`)."""
    base = parse_profile(yaml.safe_dump(gpu_profile_yaml(cal, None, name)), "the measured GPU")[0]
    return fit_gemm(base, cal.gemm_flops, cal.gemm_n)


def gpu_profile_yaml(cal: GpuCalibration, fit: GemmFit | None, name: str = "this-gpu") -> dict:
    """The device-profile document of a GPU calibration with its fitted matrix figures; without
    ``fit``, the measured figures alone (the fit's starting point: the largest measured throughput
    as the peak)."""
    peak = fit.matrix_tflops if fit else max(cal.gemm_flops.values()) / 1e12
    when = time.strftime("%Y-%m-%d")
    n = cal.gemm_n
    sweep = ", ".join(f"M={m}: {f / 1e12:.1f}" for m, f in sorted(cal.gemm_flops.items()))
    device = {
        "kind": "gpu", "product": cal.product,
        "memory_capacity_gb": round(cal.memory_bytes / 1e9, 3),
        "memory_bandwidth_gb_per_s": _sig(cal.copy_bytes_per_s / 1e9),
        "memory_pj_per_bit": 7, "host_to_device_gb_per_s": 32, "host_to_device_pj_per_bit": 27,
        "device_to_host_gb_per_s": 32, "device_to_host_pj_per_bit": 27,
        "matrix_tflops": {"fp16": _sig(peak), "bf16": _sig(peak)},
        "vector_tflops": {"fp32": _sig(peak / 16)},
        "pj_per_flop": 0.5,
        "launch_overhead_us": _sig(cal.kernel_s * 1e6),
        "host_overhead_us": _sig(cal.host_op_s * 1e6),
        "compute_units": cal.compute_units,
        "gemm_tile": list(GEMM_TILE),
    }
    fitted = ""
    if fit:
        device["matrix_memory_efficiency"] = fit.matrix_memory_efficiency
        device["unoverlapped_fraction"] = fit.unoverlapped_fraction
        fitted = (f"fitted with matrix_memory_efficiency and unoverlapped_fraction to the fp16 [M, {n}] x "
                  f"[{n}, {n}] sweep (TFLOP/s: {sweep}); mean |error| {fit.mean_error:.1%} over its "
                  f"{len(fit.points)} shapes")
    device["sources"] = {
        "matrix_tflops": fitted or f"largest throughput of the fp16 [M, {n}] x [{n}, {n}] sweep (TFLOP/s: {sweep})",
        **dict.fromkeys(("matrix_memory_efficiency", "unoverlapped_fraction") if fit else (),
                        "fitted with matrix_tflops to the GEMM sweep (its source says how)"),
        "vector_tflops": "not measured: 1/16 of the matrix peak (an assumption)",
        "memory_bandwidth_gb_per_s": "bytes read + written / time of a 1 GiB device-to-device clone",
        "launch_overhead_us": "device time per tiny kernel replayed in a CUDA graph",
        "host_overhead_us": "wall time per op of an eager chain of 1000 tiny ops",
        "compute_units": "torch.cuda.get_device_properties().multi_processor_count",
        "gemm_tile": "not measured: the CUTLASS default 128x128",
        "memory_pj_per_bit": "not measured: the UPMEM framework's GPU figure",
        "pj_per_flop": "not measured: the UPMEM framework's GPU figure",
        "host_to_device_gb_per_s": "not measured: PCIe Gen4 x16",
    }
    return {"family": "calibrated GPU",
            "source": f"measured by dispatchprof calibrate --gpu on {when} on {cal.product}",
            "devices": {name: device}}


def _sig(x: float) -> float:
    return float(f"{x:.6g}")


def write_gpu_profile(path: str | os.PathLike, cal: GpuCalibration, fit: GemmFit, name: str = "this-gpu") -> str:
    """Write the profile atomically, after checking that it loads."""
    text = "# Written by dispatchprof calibrate --gpu; units are in the field names.\n" + \
        yaml.safe_dump(gpu_profile_yaml(cal, fit, name), sort_keys=False)
    parse_profile(text, os.fspath(path))
    return write_atomic(path, text)
