"""``dispatchprof devices``: the bundled device profiles with their key figures; a figure the
profile could not source (dispatchprof.sim.unknowns) shows as UNKNOWN."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof.cli.options import add_format, as_json, emit, table_fmt
from dispatchprof.cli.parser import Parser
from dispatchprof.report.render import render, wrap
from dispatchprof.sim.catalog import catalog
from dispatchprof.sim.unknowns import unknown_figures

SCHEMA = "dispatchprof.devices"


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof devices", description="List the bundled device profiles.")
    add_format(p)
    args = p.parse_args(argv)
    if args.format == "json":
        emit(as_json({"schema": SCHEMA, "version": 1,
                      "devices": [dataclasses.asdict(d) for d in catalog().values()]}))
        return 0
    rows = []
    for d in catalog().values():
        unknown = unknown_figures(d)
        matrix = max(d.matrix_tflops.items(), key=lambda kv: kv[1])
        memory = "UNKNOWN" if "memory_capacity_gb" in unknown else (
            "-" if d.memory_capacity_gb is None else f"{d.memory_capacity_gb:g} GB")
        rows.append([d.name, d.kind, memory, f"{d.memory_bandwidth_gb_per_s:g} GB/s", f"{matrix[1]:g} ({matrix[0]})",
                     *("UNKNOWN" if f in unknown else f"{getattr(d, f):g}" for f in ("pj_per_flop", "memory_pj_per_bit")),
                     "UNKNOWN" if "static_power_w" in unknown else f"{d.static_power_w:g}"])
    emit(render(rows, ["device", "kind", "memory", "bandwidth", "peak TFLOPS", "pJ/FLOP", "pJ/bit", "static W"],
                table_fmt(args.format))
         + "\n" + wrap("UNKNOWN: not published by the profile's sources (simulated as 0; capacity not checked). "
                       "Every figure and its source: dispatchprof devices --json, devices/*.yaml.") + "\n")
    return 0
