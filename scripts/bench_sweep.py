"""Wall time of a 1,000-configuration sweep per model: the one-off counts of the shape-generic fit,
then every configuration answered from it (dispatchprof.llm.shape_generic).

    python scripts/bench_sweep.py                 # llama-3.1-8b and mixtral-8x7b, 250 shapes x 4 devices each
    python scripts/bench_sweep.py --limit 10      # time the first 10 shapes only; the full sweep is projected

A configuration is one (batch, prompt, output, device) row: 5 batch sizes x 5 prompt lengths x 10
output lengths x 4 devices = 1,000 per model. Each model runs in this process, one after the other
(the sweep() API runs models side by side in processes; one at a time times each alone). Prints one
row per model: model build, fit (its counts, and the reason where the model is counted directly),
per-configuration time after the fit, and the sweep's total (measured, or projected from --limit
shapes, as the "total" column says).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

MODELS = ("llama-3.1-8b", "mixtral-8x7b")
DEVICES = ("H100-SXM", "L4", "MI300X", "PIM-AI-4chip")
BATCHES = (1, 4, 16, 64, 256)
PROMPTS = (128, 512, 2048, 8192, 32768)
OUTPUTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def measure(model_name: str, limit: int | None) -> dict:
    """Times of one model's sweep (see the module docstring)."""
    from dispatchprof.llm.models import build_model
    from dispatchprof.llm.shape_generic import DecoderStream
    from dispatchprof.llm.sweep import run_shape, shapes
    from dispatchprof.sim.placement import scenarios_of

    warnings.simplefilter("ignore")
    todo = shapes([model_name], BATCHES, PROMPTS, OUTPUTS)
    scenarios = scenarios_of(list(DEVICES))
    start = time.perf_counter()
    model = build_model(model_name)
    built = time.perf_counter()
    stream = DecoderStream(model)
    fit = stream.regime()[0]
    fitted = time.perf_counter()
    timed = todo[:limit] if limit else todo
    rows = [run_shape(s, scenarios, model=model, stream=stream) for s in timed]
    done = time.perf_counter()
    per_config = (done - fitted) / (len(timed) * len(DEVICES))
    return {"build_s": built - start, "fit_s": fitted - built, "fit_counts": fit.counts, "reason": fit.reason,
            "configs": len(todo) * len(DEVICES), "timed": len(timed) * len(DEVICES), "per_config_s": per_config,
            "total_s": fitted - start + per_config * len(todo) * len(DEVICES), "rows": sum(map(len, rows))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=0, help="time the first LIMIT shapes of each model (0: all)")
    p.add_argument("--model", action="append", choices=MODELS, help="one of the models (repeat; default both)")
    args = p.parse_args(argv)
    if args.limit < 0:
        p.error(f"--limit must be >= 0, got {args.limit}")
    from tabulate import tabulate

    headers = ["model", "build s", "fit s", "counted directly because", "ms per configuration",
               "total s (build + fit + all)", "configurations"]
    for k, name in enumerate(args.model or MODELS):
        r = measure(name, args.limit or None)
        projected = r["timed"] < r["configs"]
        row = [name, f"{r['build_s']:.1f}", f"{r['fit_s']:.1f} ({r['fit_counts']} counts)",
               (r["reason"][:60] + "...") if r["reason"] else "-", f"{r['per_config_s'] * 1e3:.1f} (over {r['timed']})",
               f"{r['total_s']:.1f}" + (" projected" if projected else " measured"), r["configs"]]
        lines = tabulate([row], headers=headers, tablefmt="github").splitlines()
        print("\n".join(lines if k == 0 else lines[2:]), flush=True)       # one row as each model ends
    return 0


if __name__ == "__main__":
    sys.exit(main())
