"""Measure this machine's CPU and write a device profile for it.

    python scripts/calibrate_cpu.py [-o host-cpu.yaml] [--name host-cpu]

Then simulate on it: OpCounter(devices="host-cpu.yaml").
"""

from __future__ import annotations

import argparse

from dispatchprof.calibrate import measure, write_profile


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="host-cpu.yaml")
    p.add_argument("--name", default="host-cpu")
    args = p.parse_args()
    cal = measure()
    path = write_profile(args.output, cal, args.name)
    print(f"wrote {path}")
    for key in cal.matrix_flops:
        print(f"  matmul {key}: {cal.matrix_flops[key] / 1e9:,.1f} GFLOP/s   "
              f"element-wise {key}: {cal.vector_flops[key] / 1e9:,.2f} GFLOP/s")
    print(f"  copy bandwidth: {cal.copy_bytes_per_s / 1e9:,.2f} GB/s   threads: {cal.threads}")


if __name__ == "__main__":
    main()
