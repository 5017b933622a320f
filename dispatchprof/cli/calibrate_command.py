"""``dispatchprof calibrate``: measure this machine's CPU and write its device profile."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof.cli.options import add_format, as_json, check_output, emit
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.sim.calibrate import measure, write_profile

SCHEMA = "dispatchprof.calibration"


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof calibrate", description="Measure matmul and element-wise throughput, "
               "copy bandwidth and memory of this CPU; write a device YAML.")
    p.add_argument("-o", "--output", default="host-cpu.yaml")
    p.add_argument("--name", default="host-cpu")
    p.add_argument("--gpu", action="store_true", help="measure the CUDA GPU instead (GEMM sweep, copy and GEMV "
                                                     "bandwidth, launch and host cost per op)")
    add_format(p, ("table", "json"))
    args = p.parse_args(argv)
    check_output(args.output, "-o")
    if args.gpu:
        from dispatchprof.sim.calibrate_gpu import measure_gpu, write_gpu_profile
        try:
            gpu = measure_gpu()
        except RuntimeError as e:
            raise UsageError(str(e)) from None
        path = write_gpu_profile(args.output, gpu, args.name)
        if args.format == "json":
            emit(as_json({"schema": SCHEMA, "version": 1, "path": path, "name": args.name, "gpu": True}))
        else:
            emit(f"wrote {path}: use it as --device {path}\n")
        return 0
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
