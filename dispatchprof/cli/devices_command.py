"""``dispatchprof devices``: the bundled device profiles with their key figures."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from dispatchprof.cli.options import add_format, as_json, emit, table_fmt
from dispatchprof.cli.parser import Parser
from dispatchprof.report.render import render
from dispatchprof.sim.catalog import catalog

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
        matrix = max(d.matrix_tflops.items(), key=lambda kv: kv[1])
        rows.append([d.name, d.kind, "-" if d.memory_capacity_gb is None else f"{d.memory_capacity_gb:g} GB",
                     f"{d.memory_bandwidth_gb_per_s:g} GB/s", f"{matrix[1]:g} ({matrix[0]})",
                     f"{d.vector_tflops['fp32']:g}", f"{d.host_to_device_gb_per_s:g} / {d.device_to_host_gb_per_s:g} GB/s",
                     f"{d.pj_per_flop:g}", f"{d.memory_pj_per_bit:g}"])
    emit(render(rows, ["device", "kind", "memory", "bandwidth", "peak matrix TFLOPS", "fp32 vector TFLOPS",
                       "host links in / out", "pJ/FLOP", "pJ/bit"], table_fmt(args.format)) + "\n")
    return 0
