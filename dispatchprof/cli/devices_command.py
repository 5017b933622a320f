"""``dispatchprof devices``: the bundled device profiles with their key figures."""

from __future__ import annotations

import sys
from typing import Sequence

from dispatchprof.cli.parser import Parser
from dispatchprof.sim.catalog import catalog
from dispatchprof.report.render import render


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof devices", description="List the bundled device profiles.")
    p.add_argument("--format", choices=("table", "markdown"), default="table")
    args = p.parse_args(argv)
    rows = []
    for d in catalog().values():
        matrix = max(d.matrix_tflops.items(), key=lambda kv: kv[1])
        rows.append([d.name, d.kind, "-" if d.memory_capacity_gb is None else f"{d.memory_capacity_gb:g} GB",
                     f"{d.memory_bandwidth_gb_per_s:g} GB/s", f"{matrix[1]:g} ({matrix[0]})",
                     f"{d.vector_tflops['fp32']:g}", f"{d.host_to_device_gb_per_s:g} / {d.device_to_host_gb_per_s:g} GB/s",
                     f"{d.pj_per_flop:g}", f"{d.memory_pj_per_bit:g}"])
    sys.stdout.write(render(rows, ["device", "kind", "memory", "bandwidth", "peak matrix TFLOPS", "fp32 vector TFLOPS",
                                   "host links in / out", "pJ/FLOP", "pJ/bit"],
                            "github" if args.format == "markdown" else "simple") + "\n")
    return 0
