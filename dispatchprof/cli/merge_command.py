"""``dispatchprof merge FILE|DIR ...``: one report from the per-process files of a run."""

from __future__ import annotations

import sys
from typing import Sequence

from dispatchprof.cli.parser import Parser
from dispatchprof.report.ranks import merge_report
from dispatchprof.results.ranks import load_ranks


def run(argv: Sequence[str]) -> int:
    p = Parser(prog="dispatchprof merge", description="Merge dispatchprof_{rank}.json files of a multi-process run.")
    p.add_argument("paths", nargs="+", help="rank files, or folders holding dispatchprof_*.json")
    p.add_argument("--device", action="append", default=[], help="simulate every rank on this device")
    p.add_argument("--format", choices=("table", "markdown"), default="table")
    args = p.parse_args(argv)
    ranks = load_ranks(args.paths)
    sys.stdout.write(merge_report(ranks, args.device or None, "github" if args.format == "markdown" else "simple") + "\n")
    return 0
