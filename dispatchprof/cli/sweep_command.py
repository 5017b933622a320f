"""``dispatchprof sweep MODEL... --device A --device B --batch 1,8,64 --prompt-len 128,2048``:
every combination (one process per model, each answering its shapes from a shape-generic fit,
docs/sweep.md), a row per combination (CSV or JSON) and a plot of J/token against tokens/s with
each device's Pareto front."""

from __future__ import annotations

import sys
from typing import Sequence

from dispatchprof.cli.options import (
    add_format, add_weight_dtype, as_json, check_outputs, emit, format_from_output, input_files, model_dtype,
    need_matplotlib, resolve_weight_dtype, size_list, table_fmt, warn,
)
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.cli.runtime_help import RUNTIME_HELP
from dispatchprof.llm.sweep import check_sweep_size, sweep
from dispatchprof.report.render import render
from dispatchprof.report.runtimes import runtime_line
from dispatchprof.report.sweep import energy_per_token_cell, plot_sweep, sweep_csv
from dispatchprof.results.sweep import sweep_to_dict
from dispatchprof.sim.runtime import RUNTIMES

FORMATS = ("table", "markdown", "csv", "json")


def parser() -> Parser:
    p = Parser(prog="dispatchprof sweep", description=(
        "Every combination of MODELs x --batch x --prompt-len x --new-tokens, simulated on every --device. Each "
        "model is counted at a few shapes once (docs/sweep.md) and every combination with prompts of 32 tokens or "
        "more is answered from those counts; models run in parallel processes. Writes a row per combination and "
        "device; combinations that do not fit in a device's memory are kept and marked (fits = False)."))
    p.add_argument("models", nargs="+", metavar="MODEL", help="bundled models, config.json paths or hub ids")
    p.add_argument("--device", action="append", default=[], metavar="NAME|FILE", required=True,
                   help="a device to simulate on (repeat)")
    p.add_argument("--batch", type=size_list("batch"), default=[1], help="comma-separated, such as 1,8,64")
    p.add_argument("--prompt-len", type=size_list("prompt_len"), default=[128], help="comma-separated")
    p.add_argument("--new-tokens", type=size_list("new_tokens"), default=[32], help="comma-separated")
    p.add_argument("--dtype", type=model_dtype, default="bf16")
    add_weight_dtype(p)
    p.add_argument("--bound", action="store_true", help="simulate the pure roofline bound")
    p.add_argument("--runtime", choices=RUNTIMES, default="eager", help=RUNTIME_HELP)
    p.add_argument("--workers", type=int, default=0, help="processes (0: one per CPU, at most one per model)")
    add_format(p, FORMATS, from_output=True)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the rows to FILE instead of stdout (CSV; JSON for a .json name or --json)")
    p.add_argument("--plot", metavar="FILE.png", help="write the plot of J/token against tokens/s (needs matplotlib)")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    resolve_weight_dtype(args)
    tasks = check_sweep_size(args.models, args.batch, args.prompt_len, args.new_tokens)
    if args.workers < 0:
        raise UsageError(f"--workers must be >= 0, got {args.workers}")
    check_outputs({"-o": args.output, "--plot": args.plot},
                  inputs=[f for m in args.models for f in input_files(m)] + args.device)
    if args.plot:
        need_matplotlib("--plot")
    args.format = format_from_output(args, FORMATS, fallback="csv")
    executor = None
    if args.workers:
        from dispatchprof.llm.sweep import default_executor
        executor = default_executor(min(args.workers, len(set(args.models))))
    bar = _progress_bar(tasks)
    try:
        rows = sweep(args.models, args.device, args.batch, args.prompt_len, args.new_tokens, dtype=args.dtype,
                     weight_dtype=args.weight_dtype, bound=args.bound, executor=executor, progress=bar.update_to,
                     runtime=args.runtime)
    finally:
        bar.close()
        if executor is not None:
            executor.shutdown()
    over = [r for r in rows if r.fits is False]
    if over:
        warn(f"{len(over)} of {len(rows)} combinations do not fit in the device's memory (kept, marked fits=False)")
    if args.plot:
        plot_sweep(rows, args.plot)
    emit(_render(rows, args.format), args.output)
    return 0


def _render(rows, fmt: str) -> str:
    if fmt == "json":
        return as_json(sweep_to_dict(rows))
    if fmt == "csv":
        return sweep_csv(rows)
    table = [[r.model, r.device, r.batch, r.prompt_len, r.new_tokens, f"{r.tokens_per_s:,.1f}",
              energy_per_token_cell(r), "-" if r.tpot_mean_s is None else f"{r.tpot_mean_s * 1e3:.4g}",
              {True: "yes", False: "NO", None: "unknown"}[r.fits], "*" if r.pareto else ""] for r in rows]
    return render(table, ["model", "device", "batch", "prompt", "new tokens", "tokens/s", "mJ/token",
                          "TPOT ms", "fits", "Pareto"], table_fmt(fmt)) + "\n" \
        + runtime_line((r.device, r.runtime) for r in rows) + "\n"


class _Bar:
    """tqdm on stderr (silent when stderr is not a terminal), or nothing without tqdm."""

    def __init__(self, total: int) -> None:
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc="model shapes", unit="shape", disable=not sys.stderr.isatty())
        except ImportError:
            self.bar = None

    def update_to(self, done: int, total: int) -> None:
        if self.bar is not None:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress_bar(total: int) -> _Bar:
    return _Bar(total)
