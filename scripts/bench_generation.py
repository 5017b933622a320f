"""Wall time and peak memory of profiling a whole generation (the fast decode path).

    python scripts/bench_generation.py        # llama-3.1-8b, batch 1, prompt 512, 1024 new tokens, 2 devices

Each case runs in a fresh process so that its peak RSS is its own. Prints one table row per case.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CASES = [("llama-3.1-8b", 1, 512, 1024, ("PIM-AI-1chip", "H100-SXM"))]


def measure(model: str, batch: int, prompt: int, new: int, devices: list[str]) -> dict:
    import warnings

    from dispatchprof.llm.generation import profile_generation
    from dispatchprof.llm.models import build_model

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    m = build_model(model)
    g = profile_generation(m, batch, prompt, new, devices=devices)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "steps_counted": g.steps_counted,
            "tpot_ms": {n: d.tpot_mean_s * 1e3 for n, d in g.devices.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        spec = json.loads(args.one)
        print(json.dumps(measure(*spec)))
        return 0
    from tabulate import tabulate

    rows = []
    for model, batch, prompt, new, devices in CASES:
        spec = json.dumps([model, batch, prompt, new, list(devices)])
        out = subprocess.run([sys.executable, __file__, "--one", spec], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append([model, batch, prompt, new, ", ".join(devices), f"{r['seconds']:.1f}", f"{r['rss_mb']:.0f}",
                     f"{r['steps_counted']} of {new - 1}",
                     ", ".join(f"{n} {v:.2f} ms" for n, v in r["tpot_ms"].items())])
    print(tabulate(rows, headers=["model", "batch", "prompt", "new tokens", "devices", "wall s", "peak RSS MB",
                                  "decode steps counted", "mean TPOT"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
