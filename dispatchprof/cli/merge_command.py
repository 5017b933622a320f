"""``dispatchprof merge FILE|DIR ...``: one report from the per-process files of a run."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof.cli.options import add_format, as_json, emit, table_fmt
from dispatchprof.cli.parser import Parser
from dispatchprof.report.ranks import merge_report
from dispatchprof.results.ranks import load_ranks, merged_totals
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate

SCHEMA = "dispatchprof.merge"


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof merge", description="Merge dispatchprof_{rank}.json files of a multi-process run.")
    p.add_argument("paths", nargs="+", help="rank files, or folders holding dispatchprof_*.json")
    p.add_argument("--device", action="append", default=[], help="simulate every rank on this device")
    add_format(p)
    args = p.parse_args(argv)
    scenarios_of(args.device)                          # bad devices fail before the files are read
    ranks = load_ranks(args.paths)
    if args.format != "json":
        emit(merge_report(ranks, args.device or None, table_fmt(args.format)) + "\n")
        return 0
    scenarios = scenarios_of(args.device)
    rows = []
    for r in ranks:
        sims = {n: dataclasses.asdict(simulate(r.profile, scenarios[n], name=n).total) for n in scenarios}
        rows.append({"rank": r.rank, "path": r.path, "totals": dataclasses.asdict(r.profile.total()),
                     "simulations": sims})
    slowest = {n: max(row["simulations"][n]["time_s"] for row in rows) for n in scenarios}
    emit(as_json({"schema": SCHEMA, "version": 1, "ranks": rows,
                  "totals": dataclasses.asdict(merged_totals(ranks)), "slowest_rank_time_s": slowest}))
    return 0
