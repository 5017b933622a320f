"""``dispatchprof report FILE.json``: re-render a saved profile or generation profile."""

from __future__ import annotations

import sys
from typing import Sequence

from dispatchprof import report
from dispatchprof.cli.parser import Parser
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.results.files import read_json
from dispatchprof.results.profile import SCHEMA as PROFILE_SCHEMA
from dispatchprof.results.profile import Profile
from dispatchprof.report.generation import generation_summary
from dispatchprof.results.generation import SCHEMA as GENERATION_SCHEMA
from dispatchprof.results.generation import generation_from_dict
from dispatchprof.sim.simulate import simulate


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof report", description="Re-render a profile saved as JSON "
               "(Profile.save, or dispatchprof MODEL --format json -o FILE).")
    p.add_argument("file")
    p.add_argument("--device", action="append", default=[], help="simulate a saved Profile on this device")
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--format", choices=("table", "markdown"), default="table")
    args = p.parse_args(argv)
    fmt = "github" if args.format == "markdown" else "simple"
    data = read_json(args.file, "file")
    schema = data.get("schema") if isinstance(data, dict) else None
    parts = []
    if schema == GENERATION_SCHEMA:
        g, model = generation_from_dict(data, args.file)
        parts.append(generation_summary(g, model=model, fmt=fmt))
        profile = g.prefill
    elif schema == PROFILE_SCHEMA:
        profile = Profile.from_dict(data, args.file)
    else:
        raise ValueError(f"{args.file}: not a dispatchprof profile (schema {schema!r}; expected "
                         f"{PROFILE_SCHEMA!r} or {GENERATION_SCHEMA!r})")
    scenarios = scenarios_of(args.device)
    sims = [simulate(profile, scenarios[n], name=n) for n in scenarios]
    if schema == PROFILE_SCHEMA:
        parts.append(report.summary(profile, sims, fmt=fmt))
    parts.append(report.module_tree(profile, sims[0] if sims else None, depth=args.depth, fmt=fmt))
    if args.top > 0:
        parts.append(report.operator_table(profile, sims[0] if sims else None, row_limit=args.top, fmt=fmt))
    parts.append(report.LEGEND)
    sys.stdout.write("\n\n".join(parts) + "\n")
    return 0
