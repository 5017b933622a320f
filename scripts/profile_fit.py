"""Where a decoder's one-off fit spends its CPU time (dispatchprof.llm.shape_generic).

    python scripts/profile_fit.py mixtral-8x7b                 # the fit bench_sweep.py makes
    python scripts/profile_fit.py llama-3.1-8b --batch 4 16

Builds the model, makes the stream's fit and the fits of the batch sizes given (default
bench_sweep's), and prints the CPU seconds (time.process_time, this process only: on a loaded
machine, what the fit itself used) of each kind of count: the counts with few layers repeated to
full depth (`ShallowCounts.count`: models of 2 and 3 layers, prefill and one decode step each,
repeated), the direct counts of the full model (the held-out check of the stream's fit), and the
rest of the fit (interpolation, checks, building the shallow models), with how many of each, and
the machine's 1-minute load average as it starts and ends (the CPU seconds grow with the load).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

from tabulate import tabulate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a catalog name, e.g. mixtral-8x7b")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64, 256],
                   help="batch sizes whose fits are made (default bench_sweep's)")
    args = p.parse_args(argv)
    if any(b < 1 for b in args.batch):
        p.error(f"--batch sizes must be >= 1, got {args.batch}")
    from dispatchprof.llm.models import build_model
    from dispatchprof.llm.shape_generic import DecoderStream

    warnings.simplefilter("ignore")
    stream = DecoderStream(build_model(args.model))
    spent: dict[str, list[float]] = {}

    def timed(name, fn):
        def run(*a):
            start = time.process_time()
            try:
                return fn(*a)
            finally:
                spent.setdefault(name, []).append(time.process_time() - start)
        return run

    stream.count = timed("full-depth direct count (prefill + decode step)", stream.count)
    if stream.repeat is not None:
        stream.repeat.count = timed("2 + 3 layers counted, repeated to full depth", stream.repeat.count)
    load_start, start = os.getloadavg()[0], time.process_time()
    stream.regime()
    for batch in args.batch:
        stream.fits_for(batch)
    total = time.process_time() - start
    rows = [[name, len(t), f"{sum(t):.1f}", f"{sum(t) / len(t):.2f}"] for name, t in spent.items()]
    rest = total - sum(sum(t) for t in spent.values())
    rows += [["the rest (fits, checks, shallow models built)", "-", f"{rest:.1f}", "-"], ["fit total", "-", f"{total:.1f}", "-"]]
    print(f"{args.model}: {stream.full_depth_reason or 'layers repeated'}; batch fits of their own: "
          f"{sorted(stream.odd) or 'none'}; load average {load_start:.1f} -> {os.getloadavg()[0]:.1f}")
    print(tabulate(rows, headers=["count", "calls", "CPU s", "CPU s each"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
