"""``dispatchprof MODEL``: count and simulate one generation of a model (no weights needed)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Sequence

import torch

from dispatchprof import report
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.cli.progress import ProgressBar
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.results.files import write_atomic
from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.models import build_model
from dispatchprof.report.generation import generation_csv, generation_summary
from dispatchprof.results.generation import generation_to_dict
from dispatchprof.sim.device import WEIGHT_BITS
from dispatchprof.sim.runtime import RUNTIMES
from dispatchprof.sim.simulate import simulate

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FORMATS = ("table", "markdown", "json", "csv")


def positive(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def parser() -> Parser:
    p = Parser(prog="dispatchprof", description=(
        "Count and simulate a model: a prefill of --prompt-len tokens then decode steps up to "
        "--new-tokens, on each --device (and on a --place placement). Subcommands: "
        "dispatchprof devices | report FILE.json | calibrate."))
    p.add_argument("model", help="a bundled model (dispatchprof devices lists devices; models: see README), "
                                 "a config.json, a folder holding one, or a hub id")
    p.add_argument("--batch", type=positive, default=1)
    p.add_argument("--prompt-len", type=positive, default=128)
    p.add_argument("--new-tokens", type=positive, default=32, help="tokens to generate (the prefill gives the first)")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="bf16", help="dtype of the model's tensors")
    p.add_argument("--weight-dtype", choices=tuple(WEIGHT_BITS), help="simulate weights stored in this dtype")
    p.add_argument("--device", action="append", default=[], metavar="NAME|FILE",
                   help="a device to simulate on (repeat for side by side)")
    p.add_argument("--place", action="append", default=[], metavar="GLOB=DEVICE",
                   help="place modules matching GLOB on DEVICE (repeat; the last rule should be '*=DEVICE')")
    p.add_argument("--bound", action="store_true",
                   help="simulate the pure roofline bound (ignore the profiles' achieved fractions and overheads)")
    p.add_argument("--runtime", choices=RUNTIMES, default="eager",
                   help="software stack simulated: eager (every op launched from the host), compiled "
                        "(torch.compile + CUDA graphs), serving (an inference engine)")
    p.add_argument("--tp", type=positive, default=1, help="tensor parallelism over this many devices")
    p.add_argument("--depth", type=int, default=3, help="module tree depth (-1: all)")
    p.add_argument("--top", type=int, default=10, help="rows of the operator table (0: none)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--trace", metavar="FILE", help="write the prefill's simulated timeline (Perfetto JSON)")
    p.add_argument("--roofline", metavar="FILE", help="write the prefill's roofline plot (PNG, needs matplotlib)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    return p


def placement_rules(rules: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for rule in rules:
        glob, sep, device = rule.partition("=")
        if not sep or not glob or not device:
            raise UsageError(f"--place takes GLOB=DEVICE, such as '*.self_attn*=PIM-AI-1chip', got {rule!r}")
        out[glob] = device
    return out


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    if args.depth < -1:
        raise UsageError(f"--depth must be -1 (all) or >= 0, got {args.depth}")
    devices: list = list(args.device)
    if args.place:
        devices.append(placement_rules(args.place))
    scenarios = scenarios_of(devices)             # unknown devices fail here, before any work
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(args.model, dtype=DTYPES[args.dtype])
        bar = ProgressBar()
        try:
            g = profile_generation(model, args.batch, args.prompt_len, args.new_tokens, devices=devices or None,
                                   weight_dtype=args.weight_dtype, bound=args.bound, progress=bar,
                                   runtime=args.runtime, tp=args.tp)
        finally:
            bar.close()
    first = next(iter(scenarios.values()), None)
    prefill_sim = simulate(g.prefill, first, weight_dtype=args.weight_dtype, name=next(iter(scenarios)),
                           bound=args.bound, runtime=args.runtime, tp=args.tp) if first else None
    if args.trace or args.roofline:
        if prefill_sim is None:
            raise UsageError("--trace and --roofline need a --device to simulate on")
        if args.trace:
            from dispatchprof.report.trace import write_trace
            write_trace(prefill_sim, args.trace)
        if args.roofline:
            from dispatchprof.report.roofline import plot_roofline
            plot_roofline(prefill_sim, args.roofline)
    text = render(g, args, prefill_sim)
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def render(g, args, prefill_sim) -> str:
    if args.format == "json":
        return json.dumps(generation_to_dict(g, args.model), indent=1) + "\n"
    if args.format == "csv":
        return generation_csv(g)
    fmt = "github" if args.format == "markdown" else "simple"
    parts = [generation_summary(g, model=args.model, fmt=fmt),
             "Prefill by module" + (f" (time on {prefill_sim.name})" if prefill_sim else "") + ":\n"
             + report.module_tree(g.prefill, prefill_sim, depth=args.depth, fmt=fmt)]
    if args.top > 0:
        parts.append("Prefill by operator:\n" + report.operator_table(g.prefill, prefill_sim, row_limit=args.top, fmt=fmt))
    parts.append(report.LEGEND)
    return "\n\n".join(parts) + "\n"
