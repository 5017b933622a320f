"""``dispatchprof report FILE.json``: re-render a saved profile or generation profile."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof import report
from dispatchprof.cli.options import add_format, as_json, check_outputs, check_table_options, emit, table_fmt
from dispatchprof.cli.parser import Parser
from dispatchprof.report.dataframe import table_file
from dispatchprof.report.generation import generation_summary
from dispatchprof.report.generation_json import generation_json
from dispatchprof.report.simbytes import moved_lines
from dispatchprof.results.files import READ_LIMITS, read_json
from dispatchprof.results.frame import ROWS
from dispatchprof.results.generation import SCHEMA as GENERATION_SCHEMA
from dispatchprof.results.generation import generation_from_dict
from dispatchprof.results.profile import SCHEMA as PROFILE_SCHEMA
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import TOTALS_FIELDS, Totals
from dispatchprof.results.validate import check_totals
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate

SCHEMA = "dispatchprof.report"
FORWARD_SCHEMA = "dispatchprof.forward"     # dispatchprof.llm.forward.forward_to_dict


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof report", description="Re-render a profile saved as JSON "
               "(Profile.save, or dispatchprof MODEL --format json -o FILE).")
    p.add_argument("file")
    p.add_argument("--device", action="append", default=[], help="simulate a saved Profile on this device")
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--top", type=int, default=10)
    add_format(p, ("table", "markdown", "json", "csv", "parquet"))
    p.add_argument("--by", choices=tuple(ROWS), default="operator",
                   help="rows of --format csv|parquet: one per operator, module or op record (raw units)")
    p.add_argument("-o", "--output", metavar="FILE", help="write csv|parquet rows to FILE (default FILE.csv|.parquet)")
    args = p.parse_args(argv)
    check_table_options(args.depth, args.top)
    if args.format in ("csv", "parquet"):
        args.output = args.output or f"{args.file}.{args.format}"
    check_outputs({"-o": args.output}, inputs=[args.file, *args.device])
    scenarios = scenarios_of(args.device)              # bad devices fail before the file is read
    data = read_json(args.file, "file", limit=READ_LIMITS["profile"])
    schema = data.get("schema") if isinstance(data, dict) else None
    g = model = None
    if schema == GENERATION_SCHEMA:
        g, model = generation_from_dict(data, args.file)
        profile = g.prefill
    elif schema == PROFILE_SCHEMA:
        profile = Profile.from_dict(data, args.file)
    elif schema == FORWARD_SCHEMA:
        profile = Profile.from_dict(data.get("profile"), args.file)
        check_forward_totals(data, profile, args.file)
    else:
        raise ValueError(f"{args.file}: not a dispatchprof profile (schema {schema!r}; expected "
                         f"{PROFILE_SCHEMA!r}, {GENERATION_SCHEMA!r} or {FORWARD_SCHEMA!r})")
    sims = [simulate(profile, scenarios[n], name=n) for n in scenarios]
    if args.format in ("csv", "parquet"):
        emit(table_file(profile, sims, args.output, args.format, by=args.by) + "\n")
        return 0
    if args.format == "json":
        emit(as_json({"schema": SCHEMA, "version": 1, "file": args.file, "kind": schema,
                      "totals": dataclasses.asdict(profile.total()),
                      "simulations": {s.name: {**dataclasses.asdict(s.total), "runtime": s.runtime.runtime}
                                      for s in sims},
                      "generation": generation_json(g, model) if g is not None else None}))
        return 0
    fmt = table_fmt(args.format)
    parts = [generation_summary(g, model=model, fmt=fmt)] if g is not None else [report.summary(profile, sims, fmt=fmt)]
    if g is not None and data.get("simulated_bytes"):          # as the profile command printed it
        parts[0] += "\n" + report.wrap(moved_lines(data["simulated_bytes"]))
    parts.append(report.module_tree(profile, sims[0] if sims else None, depth=args.depth, fmt=fmt))
    if args.top > 0:
        parts.append(report.operator_table(profile, sims[0] if sims else None, row_limit=args.top, fmt=fmt))
    parts.append(report.LEGEND)
    emit("\n\n".join(parts) + "\n")
    return 0


def check_forward_totals(data: dict, profile: Profile, where: str) -> None:
    """A forward profile's stated ``totals`` must be its profile's records' sums (results.validate)."""
    stated = data.get("totals")
    if not isinstance(stated, dict) or set(stated) != set(TOTALS_FIELDS):
        raise ValueError(f"{where}: field totals must be a mapping of {', '.join(TOTALS_FIELDS)}")
    for name, v in stated.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{where}: field totals.{name} must be a number, got {v!r}")
    check_totals(Totals(**stated), profile.total(), "totals", "profile's records", where)
