"""Calculon and dispatchprof side by side on the rows both predict.

Calculon (Isaev et al., SC'23) validates its end-to-end iteration time on Korthikanti et al.
2022 (arXiv 2205.05198) Table 5: Megatron GPT 22B, 175B, 530B and 1T on A100 80GB, full
recompute and sequence parallel + selective recompute. Those eight configurations are the
"megatron-lm" rows of scripts/data/published_training.csv (the models as Llama-architecture
stand-ins of the same width, depth and GEMM FLOPs: scripts/data/models/megatron-gpt-*). This
script prints, per row, the published iteration time, Calculon's prediction and dispatchprof's
(`profile_training` with the shipped defaults, as scripts/validate_training.py predicts every
row), each with its error, then both tools' mean and median |error| over the rows.

Calculon's predictions are read from its own `llm-validation` output, stored in
scripts/data/calculon/llm_validation_caa4b11.txt (Calculon at commit caa4b11, run unchanged);
``--calculon DIR`` runs a checkout of Calculon again instead.

``--errors FILE`` writes every row's published, Calculon's and dispatchprof's seconds (`write_errors`):
scripts/data/calculon_predictions.csv, from which tests/test_accuracy_training.py recomputes
docs/training.md's side-by-side figures.

Usage: PYTHONPATH=.:scripts python scripts/calculon_side_by_side.py [--cache FILE] [--calculon DIR] [--errors FILE]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

from dispatchprof.train.factors import FACTORS
from validate_training import DATA, Steps, layout_of, predict

STORED = Path(__file__).parent / "data" / "calculon" / "llm_validation_caa4b11.txt"
#: Our row's model size -> Calculon's model name; our recompute -> Calculon's Table 5 column.
CALCULON_MODEL = {"22b": "megatron-22B", "175b": "gpt3-175B", "530b": "turing-530B", "1t": "megatron-1T"}
CALCULON_MODE = {"full": "full", "selective": "seqsel"}


def end_to_end(text: str) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(Calculon model, mode) -> (published s, Calculon s, Calculon's error) from the 'End-to-end'
    block of ``calculon llm-validation``'s output: ``model,|,Profile,Calc,Delta,GiB,|,Profile,Calc,
    Delta,GiB,``, full columns first, seqsel second; Calculon prints Delta = 100 (1 - calc /
    profile) from its unrounded time, so the error calc / profile - 1 is -Delta / 100."""
    lines = text.splitlines()
    if not any(line.startswith("End-to-end") for line in lines):
        raise ValueError("no 'End-to-end' block in Calculon's llm-validation output")
    block = lines[[i for i, line in enumerate(lines) if line.startswith("End-to-end")][0] + 2:]
    out = {}
    for line in block:
        cells = line.split(",")
        if cells[0] not in CALCULON_MODEL.values():
            break
        for mode, at in (("full", 2), ("seqsel", 7)):
            out[cells[0], mode] = (float(cells[at]), float(cells[at + 1]), -float(cells[at + 2].rstrip("%")) / 100)
    return out


def calculon_output(checkout: str | None) -> str:
    if checkout is None:
        return STORED.read_text()
    env = dict(os.environ, PYTHONPATH=checkout)
    run = subprocess.run([sys.executable, os.path.join(checkout, "bin", "calculon"), "llm-validation", "-b", checkout],
                         capture_output=True, text=True, env=env, check=True)
    return run.stdout


def write_errors(path: str, table: list[tuple[dict, float, float, float]]) -> None:
    """Every row of ``table`` ((row, published s, Calculon's error, dispatchprof's s)): id, split, the
    published iteration time ("measured"), Calculon's ("calculon") and dispatchprof's
    ("dispatchprof"), in seconds, 9 significant digits (the report gives errors to 0.001%). Calculon's time is written as published x
    (1 + its error), the time its printed Delta (0.01% steps) gives: its printed seconds are rounded
    to 0.01 s, too coarse for its errors' third decimal; so predicted / measured - 1 gives back the
    error this script prints."""
    import io

    from dispatchprof.results.files import write_atomic

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "split", "measured", "calculon", "dispatchprof"])
    for r, published, their_error, ours in table:
        w.writerow([r["id"], r["split"], f"{published:.9g}", f"{published * (1 + their_error):.9g}", f"{ours:.9g}"])
    write_atomic(path, buf.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", metavar="FILE", help="validate_training.py's cache of counted steps")
    ap.add_argument("--calculon", metavar="DIR", help="run this Calculon checkout instead of reading its stored output")
    ap.add_argument("--errors", metavar="FILE", help="write every row's published, Calculon's and dispatchprof's "
                    "seconds to FILE (CSV)")
    args = ap.parse_args()
    calc = end_to_end(calculon_output(args.calculon))
    rows = [r for r in csv.DictReader(DATA.open()) if r["source"] == "megatron-lm"]
    steps = Steps(args.cache)
    print(f"{'id':<30} {'split':<8} {'published s':>11} {'Calculon s':>10} {'error':>7} {'dispatchprof s':>14} {'error':>7}")
    errs: dict[str, list[float]] = {"Calculon": [], "dispatchprof": []}
    table = []
    for r in rows:
        size = r["id"].split("-")[3]
        published, theirs, their_error = calc[CALCULON_MODEL[size], CALCULON_MODE[r["recompute"]]]
        tokens, _ = predict(r, steps, FACTORS)
        lay = layout_of(r)
        ours = lay.global_batch * lay.seq_len / tokens / lay.devices
        errs["Calculon"].append(their_error)
        errs["dispatchprof"].append(ours / published - 1)
        table.append((r, published, their_error, ours))
        print(f"{r['id']:<30} {r['split']:<8} {published:>11.2f} {theirs:>10.2f} {errs['Calculon'][-1]:>+7.1%} "
              f"{ours:>14.2f} {errs['dispatchprof'][-1]:>+7.1%}")
    steps.save()
    if args.errors:
        write_errors(args.errors, table)
    print()
    for tool, e in errs.items():
        print(f"{tool:<13} rows {len(e)}  mean |error| {statistics.mean(map(abs, e)):6.3%}  "
              f"median |error| {statistics.median(map(abs, e)):6.3%}  max |error| {max(map(abs, e)):6.3%}")
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
