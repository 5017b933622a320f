"""Wall time and peak memory of profiling a whole generation (the fast decode path), counted and
from a shape-generic stream (dispatchprof.llm.shape_generic).

    python scripts/bench_generation.py        # llama-3.1-8b, batch 1, prompt 512, 1024 new tokens, 2 devices
    python scripts/bench_generation.py --how stream     # the stream case only

Each case runs in a fresh process so that its peak RSS is its own. Prints one table row per case:
"counted" counts the prefill and the sampled decode steps; "stream" fits the stream (its one-off
counts, in "fit s") and then evaluates the prefill and the decode steps from it ("after fit s": a
second generation profile, of another shape, answered by the same stream, its decode steps
sampled where they lie on a line); "every step s": the same generation with every one of its
decode steps simulated from the stream (dispatchprof.llm.sweep_vector.generation_steps), and the
largest relative difference of its mean TPOT from the generation profile's.

"wall s" starts after the imports, those transformers makes lazily included: "import s" is the
time to import the library and, for the model's type, the config and modeling modules
(`import_model_code`; about 1.7 s for Llama, which the first `build_model` of a process would
otherwise pay inside the wall time: the modules behind transformers' auto classes, hub kernels,
torch.distributed.tensor). The last column is the machine's 1-minute load average as the case
starts and ends (os.getloadavg): on the shared machine the times grow with it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CASES = [("llama-3.1-8b", 1, 512, 1024, ("PIM-AI-1chip", "H100-SXM"), "counted"),
         ("llama-3.1-8b", 1, 512, 1024, ("PIM-AI-1chip", "H100-SXM"), "stream")]


def import_model_code(model: str) -> None:
    """Import the transformers modules that building ``model`` needs (transformers imports a
    model type's config and modeling modules on first use)."""
    import transformers

    from dispatchprof.llm.catalog import load_config

    transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(load_config(model))]


def measure(model: str, batch: int, prompt: int, new: int, devices: list[str], how: str) -> dict:
    import warnings

    t = time.perf_counter()
    from dispatchprof.llm.generation import profile_generation
    from dispatchprof.llm.models import build_model
    from dispatchprof.llm.shape_generic import DecoderStream
    from dispatchprof.llm.sweep_vector import generation_steps
    from dispatchprof.sim.placement import scenarios_of

    warnings.simplefilter("ignore")
    import_model_code(model)
    start = time.perf_counter()
    import_s = start - t
    m = build_model(model)
    stream, fit_s, after, every, every_diff = None, 0.0, 0.0, 0.0, 0.0
    if how == "stream":
        t = time.perf_counter()
        stream = DecoderStream(m)
        stream.regime()
        fit_s = time.perf_counter() - t
    g = profile_generation(m, batch, prompt, new, devices=devices, stream=stream)
    seconds = time.perf_counter() - start
    if stream is not None:
        t = time.perf_counter()
        profile_generation(m, batch + 1, prompt + 1, new, devices=devices, stream=stream)
        after = time.perf_counter() - t
        t = time.perf_counter()
        steps = generation_steps(stream, batch, prompt, new, scenarios_of(devices))
        every = time.perf_counter() - t
        every_diff = max(abs(steps[n].tpot_mean_s / d.tpot_mean_s - 1) for n, d in g.devices.items())
    return {"import_s": import_s, "seconds": seconds, "fit_s": fit_s, "after_s": after, "every_s": every,
            "every_diff": every_diff,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "steps_counted": g.steps_counted,
            "tpot_ms": {n: d.tpot_mean_s * 1e3 for n, d in g.devices.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--how", action="append", choices=("counted", "stream"), help="run this case only (repeat)")
    args = p.parse_args(argv)
    if args.one:
        spec = json.loads(args.one)
        print(json.dumps(measure(*spec)))
        return 0
    from tabulate import tabulate

    rows = []
    for model, batch, prompt, new, devices, how in CASES:
        if args.how and how not in args.how:
            continue
        spec = json.dumps([model, batch, prompt, new, list(devices), how])
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, __file__, "--one", spec], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append([model, how, batch, prompt, new, ", ".join(devices), f"{r['import_s']:.1f}",
                     f"{r['seconds']:.1f}",
                     f"{r['fit_s']:.1f}" if how == "stream" else "-",
                     f"{r['after_s']:.2f}" if how == "stream" else "-",
                     f"{r['every_s']:.2f} (TPOT {r['every_diff']:.1e})" if how == "stream" else "-",
                     f"{r['rss_mb']:.0f}",
                     f"{r['steps_counted']} of {new - 1}",
                     ", ".join(f"{n} {v:.2f} ms" for n, v in r["tpot_ms"].items()),
                     f"{load:.1f}, {os.getloadavg()[0]:.1f}"])
    print(tabulate(rows, headers=["model", "how", "batch", "prompt", "new tokens", "devices", "import s", "wall s",
                                  "fit s", "after fit s", "every step s", "peak RSS MB", "decode steps sampled",
                                  "mean TPOT", "load average (start, end)"],
                   tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
