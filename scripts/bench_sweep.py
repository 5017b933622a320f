"""Wall time of a 1,000-configuration sweep per model: the one-off counts of the shape-generic fit,
then every configuration answered from it (dispatchprof.llm.shape_generic).

    python scripts/bench_sweep.py                 # llama-3.1-8b and mixtral-8x7b, 250 shapes x 4 devices each
    python scripts/bench_sweep.py --limit 10      # time the first 10 shapes only; the full sweep is projected
    python scripts/bench_sweep.py --direct-limit 2   # time 2 of the shapes counted directly, project the rest

A configuration is one (batch, prompt, output, device) row: 5 batch sizes x 5 prompt lengths x 10
output lengths x 4 devices = 1,000 per model. Each model runs in this process, one after the other
(the sweep() API runs models side by side in processes; one at a time times each alone). Prints one
row per model: model build, fit (its counts: the decoder's fit from counts of the model built with
2 and 3 layers, repeated to full depth and checked against one count of the full model, and a
MoE model's fits of the batch sizes balanced routing does not split evenly, Mixtral's batch 1;
the layers counted; the reason where the model is counted directly), per-configuration time after
the fit (wall, and the vector simulator's CPU time per configuration it answered), the sweep's
total (build + fit + every configuration) and its CPU seconds per stage (the wall time on a
loaded machine is what other jobs leave), the configurations the vector simulator answered
(dispatchprof.llm.sweep_vector: all at once) and the seconds it took, and the configurations
counted shape by shape (outside every fit's region) with the seconds each took. Those take tens
of seconds each, so only the first --direct-limit of them are timed and the rest are projected at
that rate: the "total" column says "projected" then, "measured" otherwise. The last column is the
machine's 1-minute load average as the model's measurement starts and ends (os.getloadavg): on a
shared machine the CPU seconds grow with it too (other jobs' threads share the cores' caches and
the host's time), so a figure is quoted with its load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

MODELS = ("llama-3.1-8b", "mixtral-8x7b")
DEVICES = ("H100-SXM", "L4", "MI300X", "PIM-AI-4chip")
BATCHES = (1, 4, 16, 64, 256)
PROMPTS = (128, 512, 2048, 8192, 32768)
OUTPUTS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def measure(model_name: str, limit: int | None, direct_limit: int = 1) -> dict:
    """Times of one model's sweep (see the module docstring)."""
    from dispatchprof.llm.models import build_model
    from dispatchprof.llm.shape_generic import DecoderStream
    from dispatchprof.llm.sweep import run_shape, shapes
    from dispatchprof.llm.sweep_vector import decoder_rows
    from dispatchprof.sim.placement import scenarios_of

    warnings.simplefilter("ignore")
    todo = shapes([model_name], BATCHES, PROMPTS, OUTPUTS)
    scenarios = scenarios_of(list(DEVICES))
    load_start = os.getloadavg()[0]
    start, cpu_start = time.perf_counter(), time.process_time()
    model = build_model(model_name)
    built, cpu_built = time.perf_counter(), time.process_time()
    stream = DecoderStream(model)
    fit = stream.regime()[0]
    for batch in BATCHES:                     # a MoE model's batch sizes with fits of their own
        stream.fits_for(batch)
    fitted, cpu_fitted = time.perf_counter(), time.process_time()
    timed = todo[:limit] if limit else todo
    fast, _ = decoder_rows(stream, timed, scenarios, "bf16", None, False, "eager")
    answered, cpu_answered = time.perf_counter(), time.process_time()
    left = [s for k, s in enumerate(timed) if k not in fast]
    counted = left[:direct_limit]
    rows = list(fast.values()) + [run_shape(s, scenarios, model=model, stream=stream) for s in counted]
    done = time.perf_counter()
    per_direct = (done - answered) / len(counted) if counted else 0.0
    sweep_s = answered - fitted + per_direct * len(left)                # the timed shapes, projected where left out
    timed_configs = (len(fast) + len(counted)) * len(DEVICES)
    per_config = sweep_s / (len(timed) * len(DEVICES))
    counts = fit.counts + sum(f.step.counts + 1 for f in stream.odd.values())   # + 1: the check of every length
    return {"build_s": built - start, "fit_s": fitted - built, "fit_counts": counts, "reason": fit.reason,
            "depth": stream.full_depth_reason, "cpu_s": cpu_answered - cpu_start,
            "cpu_parts": (cpu_built - cpu_start, cpu_fitted - cpu_built, cpu_answered - cpu_fitted),
            "configs": len(todo) * len(DEVICES), "timed": timed_configs, "per_config_s": per_config,
            "total_s": fitted - start + per_config * len(todo) * len(DEVICES), "rows": sum(map(len, rows)),
            "vector": len(fast) * len(DEVICES), "vector_s": answered - fitted, "direct": len(left) * len(DEVICES),
            "direct_s": per_direct / len(DEVICES),
            "cpu_per_config_s": (cpu_answered - cpu_fitted) / max(len(fast) * len(DEVICES), 1),
            "load": (load_start, os.getloadavg()[0])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=0, help="time the first LIMIT shapes of each model (0: all)")
    p.add_argument("--direct-limit", type=int, default=1,
                   help="without --limit, time this many shapes of a model whose fit failed (each is counted)")
    p.add_argument("--model", action="append", choices=MODELS, help="one of the models (repeat; default both)")
    args = p.parse_args(argv)
    if args.limit < 0 or args.direct_limit < 1:
        p.error(f"--limit must be >= 0 and --direct-limit >= 1, got {args.limit} and {args.direct_limit}")
    from tabulate import tabulate

    headers = ["model", "build s", "fit s", "layers counted", "counted directly because", "ms per configuration",
               "CPU ms per configuration", "total s (build + fit + all)", "CPU s = build + fit + vector",
               "configurations", "vector: configs, s", "direct: configs, s each", "load average (start, end)"]
    for k, name in enumerate(args.model or MODELS):
        r = measure(name, args.limit or None, args.direct_limit)
        projected = r["timed"] < r["configs"]
        # the vector simulator answers its configurations all at once; the counted ones are timed per shape
        row = [name, f"{r['build_s']:.1f}", f"{r['fit_s']:.1f} ({r['fit_counts']} counts)",
               "2 and 3, repeated" if not r["depth"] else f"all: {r['depth'][:40]}",
               (r["reason"][:60] + "...") if r["reason"] else "-", f"{r['per_config_s'] * 1e3:.1f} (over {r['timed']})",
               f"{r['cpu_per_config_s'] * 1e3:.1f}",
               f"{r['total_s']:.1f}" + (" projected" if projected else " measured"),
               f"{r['cpu_s']:.1f} = " + " + ".join(f"{x:.1f}" for x in r["cpu_parts"]), r["configs"],
               f"{r['vector']}, {r['vector_s']:.2f}", f"{r['direct']}, {r['direct_s']:.1f}" if r["direct"] else "0",
               "{:.1f}, {:.1f}".format(*r["load"])]
        lines = tabulate([row], headers=headers, tablefmt="github").splitlines()
        print("\n".join(lines if k == 0 else lines[2:]), flush=True)       # one row as each model ends
    return 0


if __name__ == "__main__":
    sys.exit(main())
