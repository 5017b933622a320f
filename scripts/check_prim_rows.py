"""Check every row of scripts/data/prim_rows.csv against the measured logs it quotes.

    python scripts/check_prim_rows.py PATH_TO_A_vPIM_GIT_CHECKOUT

For each row, its ``source`` names a file of github.com/brisco007/vPIM at a commit and the lines
its figures stand on ("... apps/vPrIM/full_results/native/VA_60 lines 1,2,8,9,10"); the script reads
that file at that commit (git show) and checks that every ' / '-separated piece of the row's
``quote`` is on one of those lines (whitespace collapsed) and that each measured part the row
carries (cpu_dpu_ms, dpu_ms, inter_dpu_ms, dpu_cpu_ms; 0 = not printed) is quoted. Prints one
line per row, 'ok' or what is wrong; exit 1 when any row is wrong, 2 on bad arguments.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

ROWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "prim_rows.csv")
PARTS = {"cpu_dpu_ms": "CPU-DPU", "dpu_ms": "DPU", "inter_dpu_ms": "Inter-DPU", "dpu_cpu_ms": "DPU-CPU"}
SOURCE = re.compile(r"^github\.com/brisco007/vPIM@(?P<commit>[0-9a-f]{7,40}) (?P<path>\S+) lines (?P<lines>[\d,]+)")


def problems(row: dict[str, str], repo: str) -> list[str]:
    """What is wrong with ``row`` against the vPIM checkout at ``repo`` (empty: nothing)."""
    m = SOURCE.match(row["source"])
    if not m:
        return [f"source {row['source']!r} is not 'github.com/brisco007/vPIM@COMMIT PATH lines N,M,...'"]
    shown = subprocess.run(["git", "-C", repo, "show", f"{m['commit']}:{m['path']}"], capture_output=True, text=True)
    if shown.returncode:
        return [f"git show {m['commit']}:{m['path']} failed: {shown.stderr.strip()}"]
    text = shown.stdout.splitlines()
    cited = [" ".join(text[int(n) - 1].split()) for n in m["lines"].split(",") if 0 < int(n) <= len(text)]
    wrong = [f"quote {piece!r} is on none of lines {m['lines']}"
             for piece in row["quote"].split(" / ") if " ".join(piece.split()) not in cited]
    for part, label in PARTS.items():
        if float(row[part]) and f"{label}: {row[part]}" not in row["quote"].split(" / "):
            wrong.append(f"{part} = {row[part]} is not quoted as '{label}: {row[part]}'")
    return wrong


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: check_prim_rows.py PATH_TO_A_vPIM_GIT_CHECKOUT (a directory)", file=sys.stderr)
        return 2
    with open(ROWS, newline="") as f:
        rows = list(csv.DictReader(f))
    bad = 0
    for row in rows:
        wrong = problems(row, argv[0])
        bad += bool(wrong)
        print(f"{row['id']:20} " + ("ok" if not wrong else "; ".join(wrong)))
    print(f"{len(rows) - bad} of {len(rows)} rows match their logs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
