"""``dispatchprof calibrate``: measure this machine's CPU and write its device profile."""

from __future__ import annotations

import sys
from typing import Sequence

from dispatchprof.sim.calibrate import measure, write_profile
from dispatchprof.cli.parser import Parser, UsageError


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof calibrate", description="Measure matmul and element-wise throughput, "
               "copy bandwidth and memory of this CPU; write a device YAML.")
    p.add_argument("-o", "--output", default="host-cpu.yaml")
    p.add_argument("--name", default="host-cpu")
    p.add_argument("--gpu", action="store_true", help="measure the CUDA GPU instead (GEMM sweep, copy and GEMV "
                                                     "bandwidth, launch and host cost per op)")
    args = p.parse_args(argv)
    if args.gpu:
        from dispatchprof.sim.calibrate_gpu import measure_gpu, write_gpu_profile
        try:
            gpu = measure_gpu()
        except RuntimeError as e:
            raise UsageError(str(e)) from None
        path = write_gpu_profile(args.output, gpu, args.name)
        print(f"wrote {path}: use it as --device {path}")
        return 0
    cal = measure()
    path = write_profile(args.output, cal, args.name)
    print(f"wrote {path}: use it as --device {path}")
    for key in cal.matrix_flops:
        print(f"  {key}: matmul {cal.matrix_flops[key] / 1e9:,.1f} GFLOP/s, "
              f"element-wise {cal.vector_flops[key] / 1e9:,.2f} GFLOP/s")
    print(f"  copy bandwidth {cal.copy_bytes_per_s / 1e9:,.2f} GB/s, {cal.threads} threads")
    sys.stdout.flush()
    return 0
