"""``dispatchprof profile MODEL`` (short: ``dispatchprof MODEL``): count and simulate one
generation of a decoder model, or one forward pass of an encoder or encoder-decoder model (no
weights needed).

Everything is checked before counting starts: sizes, dtypes, output folders, devices (YAML
parsed and validated) and the model's config; a problem is one line and exit 2.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Sequence

from dispatchprof import report, units
from dispatchprof.cli.hostoption import add_host, apply_host, host_split_block
from dispatchprof.cli.options import (
    DTYPES, add_format, add_weight_dtype, as_json, check_outputs, check_table_options, emit, format_from_output,
    input_files, model_dtype, need_matplotlib, resolve_weight_dtype, size, table_fmt, warn, weight_dtype,
)
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.cli.progress import ProgressBar
from dispatchprof.cli.runtime_help import RUNTIME_HELP
from dispatchprof.llm.forward import ForwardProfile, generates, profile_forward
from dispatchprof.llm.forward_json import TOTALS, forward_json
from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.models import build_model
from dispatchprof.report.generation import generation_csv, generation_summary
from dispatchprof.report.generation_json import generation_json
from dispatchprof.report.simbytes import bytes_dict, moved_lines, simulated_as
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.runtime import RUNTIMES
from dispatchprof.sim.simulate import simulate

FORMATS = ("table", "markdown", "json", "csv")


def parser() -> Parser:
    p = Parser(prog="dispatchprof profile", description=(
        "Count and simulate a model: a decoder model runs a prefill of --prompt-len tokens then decode steps up to "
        "--new-tokens; an encoder (BERT) or encoder-decoder (T5) model runs one forward pass. Simulated on each "
        "--device (and on a --place placement). 'dispatchprof MODEL ...' is the short form."))
    p.add_argument("model", help="a bundled model (see README), a config.json, a folder holding one, or a hub id")
    p.add_argument("--batch", type=size("batch"), default=1)
    p.add_argument("--prompt-len", type=size("prompt_len"), default=128,
                   help="prompt tokens (an encoder's input length)")
    p.add_argument("--new-tokens", type=size("new_tokens"), default=32,
                   help="tokens to generate (the prefill gives the first); an encoder-decoder's decoder length")
    p.add_argument("--dtype", type=model_dtype, default="bf16",
                   help="dtype of the model's tensors: bf16|bfloat16, fp16|float16, fp32|float32")
    add_weight_dtype(p, help="simulate weights stored in this dtype")
    p.add_argument("--kv-dtype", type=weight_dtype, help="store the KV cache in this dtype (its bytes and capacity)")
    p.add_argument("--device", action="append", default=[], metavar="NAME|FILE",
                   help="a device to simulate on (repeat for side by side)")
    p.add_argument("--place", action="append", default=[], metavar="GLOB=DEVICE",
                   help="place modules matching GLOB on DEVICE (repeat; the last rule should be '*=DEVICE')")
    p.add_argument("--bound", action="store_true",
                   help="simulate the pure roofline bound (ignore the profiles' achieved fractions and overheads)")
    p.add_argument("--runtime", choices=RUNTIMES, default="eager", help=RUNTIME_HELP)
    p.add_argument("--tp", type=size(), default=1, help="tensor parallelism over this many devices")
    add_host(p)
    p.add_argument("--depth", type=int, default=3, help="module tree depth (-1: all)")
    p.add_argument("--top", type=int, default=10, help="rows of the operator table (0: none)")
    add_format(p, FORMATS, from_output=True)
    p.add_argument("--trace", metavar="FILE", help="write the prefill's simulated timeline (Perfetto JSON)")
    p.add_argument("--roofline", metavar="FILE",
                   help="write the prefill's roofline plot, one panel per device (PNG, needs matplotlib)")
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


def check_args(args):
    """Every check that needs no model: options, output folders, devices (each YAML parsed once,
    here). Returns the scenarios."""
    check_table_options(args.depth, args.top)
    resolve_weight_dtype(args)
    args.format = format_from_output(args, FORMATS)
    devices: list = list(args.device)
    if args.place:
        devices.append(placement_rules(args.place))
    if (args.trace or args.roofline) and not devices:
        raise UsageError("--trace and --roofline need a --device to simulate on")
    check_outputs({"-o": args.output, "--trace": args.trace, "--roofline": args.roofline},
                  inputs=[*input_files(args.model), *args.device])
    if args.roofline:
        need_matplotlib("--roofline")
    return apply_host(scenarios_of(devices), args.host)      # unknown devices, hosts and bad YAML fail here


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    scenarios = check_args(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(args.model, dtype=DTYPES[args.dtype])   # a bad config fails here, before counting
        _warn_context_window(model, args)
        if not generates(model):
            return _forward(model, args, scenarios)
        bar = ProgressBar()
        try:
            g = profile_generation(model, args.batch, args.prompt_len, args.new_tokens, devices=scenarios,
                                   weight_dtype=args.weight_dtype, bound=args.bound, progress=bar,
                                   kv_dtype=args.kv_dtype, runtime=args.runtime, tp=args.tp)
        finally:
            bar.close()
    for d in g.devices.values():
        for c in d.capacity:
            if c.fits is False:
                warn(c.message)
    sims = [_simulate(g.prefill, scenarios, n, args) for n in scenarios] \
        if args.format != "csv" or args.trace or args.roofline else []
    _write_plots(args, sims)
    lasts = [_simulate(g.last_step, scenarios, n, args) for n in scenarios] \
        if sims and g.last_step is not None else []
    emit(_render(g, args, sims, lasts, scenarios) + host_split_block(g, scenarios, args), args.output)
    return 0


def _simulate(profile, scenarios, name: str, args):
    """``profile`` (the prefill or the last decode step) on scenario ``name``, under the options the
    generation was simulated with (its tables and simulated bytes)."""
    return simulate(profile, scenarios[name], weight_dtype=args.weight_dtype, name=name, bound=args.bound,
                    runtime=args.runtime, tp=args.tp, kv_dtype=args.kv_dtype)


def _warn_context_window(model, args) -> None:
    """Warn when the run needs more positions than the model's context window
    (``config.max_position_embeddings``): a generation feeds prompt + new tokens - 1 positions
    (the last token is not fed back), a forward pass its --prompt-len. The run is counted anyway."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not isinstance(limit, int) or limit <= 0:
        return
    if generates(model):
        needed, what = args.prompt_len + args.new_tokens - 1, "prompt + new tokens - 1"
    else:
        needed, what = args.prompt_len, "--prompt-len"
    if needed > limit:
        warn(f"{args.model}: {what} = {needed:,} positions exceed the model's context window of {limit:,} "
             f"(max_position_embeddings); counted anyway, but the model was not trained for it")


def _write_plots(args, sims) -> None:
    if args.trace:
        from dispatchprof.report.trace import write_trace
        write_trace(sims[0], args.trace)
    if args.roofline:
        from dispatchprof.report.roofline import plot_roofline
        plot_roofline(sims, args.roofline)


def devices_of(scenarios) -> dict:
    """Scenario name -> the devices it runs on (for the reports' unknown-figure notes)."""
    return {name: scenarios[name].devices for name in scenarios}


def _render(g, args, sims, lasts, scenarios) -> str:
    if args.format == "json":
        return as_json({**generation_json(g, args.model, devices_of(scenarios)), "dtype": args.dtype,
                        "simulated_bytes": _moved(g, sims, lasts)})
    if args.format == "csv":
        return generation_csv(g, devices_of(scenarios))
    head = generation_summary(g, model=args.model, fmt=table_fmt(args.format), devices=devices_of(scenarios))
    if sims:
        head += "\n" + report.wrap(moved_lines(_moved(g, sims, lasts)))
    prefill_sim, last_sim = (sims[0] if sims else None), (lasts[0] if lasts else None)
    parts = [head, *_tables(g.prefill, prefill_sim, args, "Prefill")]
    if g.last_step is not None:        # its count holds the prefill before it: its decode records only
        parts += _tables(g.last_step, last_sim, args, f"Last decode step (token {g.new_tokens} of {g.new_tokens})",
                         phase="decode")
    return "\n\n".join([*parts, report.LEGEND]) + "\n"


def _moved(g, sims, lasts) -> dict:
    """Per scenario: the bytes its simulation moved in the prefill and the last decode step, beside
    the counted bytes, with the dtypes and runtime (dispatchprof.report.simbytes)."""
    out = {}
    for k, sim in enumerate(sims):
        out[sim.name] = {"prefill": bytes_dict(sim, g.prefill_totals.bytes)}
        if lasts:
            out[sim.name]["last_decode_step"] = bytes_dict(lasts[k], g.last_step.total("decode").bytes, "decode")
    return out


#: Module tree columns of the console report, under 100 columns for Llama's deepest names; with a
#: simulation the bytes it moved (`SIM_TREE_COLUMNS`); `report.module_tree` gives every other column.
TREE_COLUMNS = ("params", "flops", "bytes")
SIM_TREE_COLUMNS = ("params", "flops", "sim_bytes", "time", "%time")


def _tables(profile, sim, args, label: str, phase: str | None = None) -> list[str]:
    """The module tree and the operator table of ``profile`` (of one ``phase`` if given; times on
    ``sim``), titled ``label``."""
    fmt = table_fmt(args.format)
    columns = SIM_TREE_COLUMNS if sim is not None else TREE_COLUMNS
    tree_sim = sim
    if sim is not None and phase is not None:
        tree_sim = dataclasses.replace(sim, ops=tuple(t for t in sim.ops if sim.records[t.record].phase == phase))
    where = f" on {sim.name} ({simulated_as(sim)})" if sim else ""
    parts = [report.wrap(f"{label} by module{where}:") + "\n"
             + report.module_tree(profile, tree_sim, depth=args.depth, columns=columns, fmt=fmt, phase=phase)]
    if args.top > 0:
        parts.append(report.wrap(f"{label} by operator{where}:") + "\n"
                     + report.operator_table(profile, sim, row_limit=args.top, fmt=fmt, phase=phase,
                                             simulated_bytes=True))
    return parts


def _forward(model, args, scenarios) -> int:
    """An encoder or encoder-decoder: one forward pass, tokens/s of the processed tokens."""
    f = profile_forward(model, args.batch, args.prompt_len, args.new_tokens, devices=scenarios or None,
                        weight_dtype=args.weight_dtype, bound=args.bound, runtime=args.runtime, tp=args.tp)
    sims = list(f.simulations.values())
    for sim in sims:
        if sim.fits() is False:
            warn(f"{sim.name}: the model does not fit in the device's memory (simulated anyway)")
    _write_plots(args, sims)
    emit(_render_forward(f, args, sims), args.output)
    return 0


def _render_forward(f: ForwardProfile, args, sims) -> str:
    data = {**forward_json(f, args.model, args.dtype), "runtime": args.runtime, "tp": args.tp}
    if args.format == "json":
        return as_json(data)
    if args.format == "csv":
        head = ["kind", "batch", "seq_len", "decoder_len", "tokens"]
        cols = ["time_s", "energy_j", "tokens_per_s", "energy_per_token_j", "fits"]
        lines = [",".join(["device", *head, "flops", "macs", *cols])]
        for name, d in data["devices"].items() or [("", dict.fromkeys(cols, ""))]:
            cells = ("" if d[k] is None and k in TOTALS else d[k] for k in cols)   # an energy not sourced
            lines.append(",".join(map(str, [name, *(data[k] for k in head), f.profile.total().flops,
                                            f.profile.total().macs, *cells])))
        return "\n".join(lines) + "\n"
    fmt = table_fmt(args.format)
    title = (f"{args.model}: {f.kind} forward pass, batch {f.batch}, {f.seq_len} tokens"
             + (f" into the encoder and {f.decoder_len} into the decoder" if f.decoder_len else "")
             + f" ({f.tokens} tokens processed; no generation metrics: the model does not generate token by token)")
    head = report.wrap(title) + "\n\n" + report.summary(f.profile, sims, fmt=fmt, tokens={"forward": f.tokens})
    return "\n\n".join([head, *_tables(f.profile, sims[0] if sims else None, args, "Forward"), report.LEGEND]) + "\n"
