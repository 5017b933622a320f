"""``dispatchprof calibrate``: measure this machine's CPU (or, with ``--gpu``, its CUDA GPU) and write
its device profile."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof.cli.options import add_format, as_json, check_outputs, emit
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.report.render import render
from dispatchprof.sim.calibrate import measure, write_profile

SCHEMA = "dispatchprof.calibration"
GPU_SCHEMA = "dispatchprof.gpu_calibration"


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof calibrate", description="Measure matmul and element-wise throughput, "
               "copy bandwidth and memory of this CPU (with --gpu: a GEMM sweep of the CUDA GPU, fitted); "
               "write a device YAML.")
    p.add_argument("-o", "--output", help="the YAML to write (default: NAME.yaml)")
    p.add_argument("--name", help="the device's name in the profile (default: host-cpu, or this-gpu with --gpu)")
    p.add_argument("--gpu", action="store_true", help="measure the CUDA GPU instead (GEMM sweep, copy and GEMV "
                                                     "bandwidth, launch and host cost per op) and fit its matrix "
                                                     "figures to the sweep")
    p.add_argument("--host-speed", action="store_true",
                   help="only time the host calibration loop (the unit of measured host time) and show how "
                        "fast each bundled host runs the model's Python against this machine; writes nothing")
    add_format(p, ("table", "json"))
    args = p.parse_args(argv)
    if args.host_speed:
        return _host_speed(args.format)
    args.name = args.name or ("this-gpu" if args.gpu else "host-cpu")
    args.output = args.output or f"{args.name}.yaml"
    check_outputs({"-o": args.output})
    if args.gpu:
        return _calibrate_gpu(args.output, args.name, args.format)
    cal = measure()
    path = write_profile(args.output, cal, args.name)
    if args.format == "json":
        emit(as_json({"schema": SCHEMA, "version": 1, "path": path, "name": args.name,
                      **dataclasses.asdict(cal)}))
        return 0
    lines = [f"wrote {path}: use it as --device {path}"]
    lines += [f"  {key}: matmul {cal.matrix_flops[key] / 1e9:,.1f} GFLOP/s, "
              f"element-wise {cal.vector_flops[key] / 1e9:,.2f} GFLOP/s" for key in cal.matrix_flops]
    lines.append(f"  copy bandwidth {cal.copy_bytes_per_s / 1e9:,.2f} GB/s, {cal.threads} threads")
    emit("\n".join(lines) + "\n")
    return 0


def _host_speed(fmt: str) -> int:
    """The calibration loop here (median of 9 runs of 20000 iterations, perf_counter) against
    each bundled host's real loop time (`dispatchprof.sim.hostprofile.real_loop_ns`): the
    single-thread score it implies (a host's score x its real loop time / the time here) and each
    host's speed against this machine (time here / the host's real loop time)."""
    from dispatchprof.count.hostcal import measure_loop_ns
    from dispatchprof.sim.hostprofile import hosts, real_loop_ns

    here = measure_loop_ns(20000, 9)
    known = hosts()
    real = {name: real_loop_ns(h) for name, h in known.items()}
    if any(v is None for v in real.values()):
        raise UsageError("no bundled host has a measured_loop_ns: the hosts' real loop times are unknown")
    any_name, any_host = next(iter(known.items()))
    score = any_host.single_thread_score * real[any_name] / here
    rows = [[h.name, h.cpu, f"{real[h.name]:.1f}", f"{here / real[h.name]:.2f}x"] for h in known.values()]
    if fmt == "json":
        emit(as_json({"schema": SCHEMA + ".host", "version": 1, "loop_ns": here, "implied_single_thread_score": score,
                      "hosts": {name: {"loop_ns": real[name], "speed_vs_here": here / real[name]} for name in known}}))
        return 0
    emit(f"calibration loop here: {here:.1f} ns per iteration (perf_counter; implied single-thread score "
         f"{score:,.0f}, Geekbench 5 single-core scale)\n"
         + render(rows, ["host", "cpu", "loop ns", "model Python speed vs here"], "simple") + "\n")
    return 0


def _calibrate_gpu(output: str, name: str, fmt: str) -> int:
    """Measure the GPU, fit its matrix figures to the GEMM sweep, write the profile, show both."""
    from dispatchprof.sim.calibrate_gpu import fit_calibration, measure_gpu, write_gpu_profile
    try:
        gpu = measure_gpu()
        fit = fit_calibration(gpu, name)
    except (RuntimeError, ValueError) as e:
        raise UsageError(str(e)) from None
    path = write_gpu_profile(output, gpu, fit, name)
    if fmt == "json":
        measured = {**dataclasses.asdict(gpu), "gemm_flops": {str(m): f for m, f in gpu.gemm_flops.items()}}
        emit(as_json({"schema": GPU_SCHEMA, "version": 1, "path": path, "name": name, "measured": measured,
                      "fit": {"matrix_tflops": fit.matrix_tflops,
                              "matrix_memory_efficiency": fit.matrix_memory_efficiency,
                              "unoverlapped_fraction": fit.unoverlapped_fraction, "mean_error": fit.mean_error,
                              "points": [{"m": m, "measured_s": t, "predicted_s": p} for m, t, p in fit.points]}}))
        return 0
    n = gpu.gemm_n
    rows = [(m, f"{gpu.gemm_flops[m] / 1e12:,.1f}", f"{t * 1e6:,.1f}", f"{p * 1e6:,.1f}", f"{p / t - 1:+.1%}")
            for m, t, p in fit.points]
    table = render(rows, ("M", "measured TFLOP/s", "measured us", "profile us", "error"), "simple")
    emit(f"wrote {path}: use it as --device {path}\n"
         f"fp16 GEMM [M, {n}] x [{n}, {n}] on {gpu.product}, measured and as the profile simulates it:\n"
         f"{table}\n"
         f"fitted: matrix peak {fit.matrix_tflops:,.1f} TFLOP/s, matrix_memory_efficiency "
         f"{fit.matrix_memory_efficiency:g}, unoverlapped_fraction {fit.unoverlapped_fraction:g} "
         f"(mean |error| {fit.mean_error:.1%})\n"
         f"copy {gpu.copy_bytes_per_s / 1e9:,.0f} GB/s, GEMV {gpu.gemv_bytes_per_s / 1e9:,.0f} GB/s; "
         f"kernel {gpu.kernel_s * 1e6:.2f} us, host {gpu.host_op_s * 1e6:.2f} us per op; "
         f"{gpu.compute_units} compute units, {gpu.memory_bytes / 1e9:,.1f} GB\n")
    return 0
