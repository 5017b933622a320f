"""Tables the docs quote, generated from the committed data they come from.

``python scripts/docs_tables.py`` prints each table; tests/test_docs_examples.py checks that the
README holds exactly these tables, so a figure that goes stale fails the suite. docs/sweep.csv
itself is written by ``make sweep-demo``.
"""

from __future__ import annotations

import csv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The README's sweep rows: (model, batch, prompt length) of docs/sweep.csv, every device.
SWEEP_ROWS = [("llama-3.2-1b", 1, 128), ("llama-3.2-1b", 64, 128), ("llama-3.1-8b", 1, 2048)]


def sweep_table(path: Path = ROOT / "docs" / "sweep.csv") -> str:
    """A markdown table of `SWEEP_ROWS` from the sweep's CSV: tokens/s, mJ/token, TPOT ms, fits."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    lines = ["| model | device | batch | prompt | tokens/s | mJ/token | TPOT ms | fits |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for model, batch, prompt in SWEEP_ROWS:
        for r in rows:
            if (r["model"], int(r["batch"]), int(r["prompt_len"])) == (model, batch, prompt):
                fits = {"True": "yes", "False": "NO", "": "unknown"}[r["fits"]]
                lines.append(f"| {model} | {r['device']} | {batch} | {prompt} | {float(r['tokens_per_s']):,.1f} | "
                             f"{_mj_per_token(r)} | {float(r['tpot_mean_s']) * 1e3:.3f} | {fits} |")
    return "\n".join(lines)


def _mj_per_token(r: dict[str, str]) -> str:
    """The mJ/token cell: the figure; its dynamic part and '+ static UNKNOWN' where the CSV gives
    only that (dispatchprof.results.sweep); UNKNOWN where it gives neither."""
    if r["energy_per_token_j"]:
        return f"{float(r['energy_per_token_j']) * 1e3:,.2f}"
    dynamic = r.get("dynamic_energy_per_token_j", "")
    return f"{float(dynamic) * 1e3:,.2f} + static UNKNOWN" if dynamic else "UNKNOWN"


def html_example() -> str:
    """What scripts/examples/html_view.py prints: the HTML a notebook shows for an OpCounter."""
    import contextlib
    import io
    import runpy
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(ROOT / "scripts" / "examples" / "html_view.py"), run_name="__main__")
    return out.getvalue().rstrip("\n")


if __name__ == "__main__":
    print(sweep_table())
    print()
    print(html_example())
