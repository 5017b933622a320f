"""The bundled profile of a lent GPU against what `scripts/measure_gpu.py shapes` measured on it.

    python scripts/compare_lent_gpu.py [--rows scripts/data/h100_lent/run1_rows.csv] [--device H100-SXM] [--errors FILE]

For every prefill shape: the measured synchronised wall time of one prefill forward (HF eager)
against the predicted TTFT under ``--runtime eager`` and ``--runtime compiled``; for every decode
shape: the measured kernels' summed time per decode step (no host time) against the predicted
first decode step under ``--runtime compiled`` (kernels without host gaps). Each prediction is
``dispatchprof MODEL --device D --batch B --prompt-len P --new-tokens 2 --runtime R --json``.
Prints one table; the signed error is predicted / measured - 1. ``--errors FILE`` also writes every
prediction as a CSV row (one per runtime: a prefill shape has two), in seconds.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def predict(model: str, device: str, batch: int, prompt: int, runtime: str) -> dict:
    """The CLI's JSON figures of ``device`` for one generation of 2 new tokens."""
    out = subprocess.run([sys.executable, "-m", "dispatchprof", model, "--device", device, "--batch", str(batch),
                          "--prompt-len", str(prompt), "--new-tokens", "2", "--runtime", runtime, "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout)["devices"][device]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=os.path.join(ROOT, "scripts", "data", "h100_lent", "run1_rows.csv"))
    ap.add_argument("--device", default="H100-SXM")
    ap.add_argument("--errors", metavar="FILE", help="write every shape's measured and predicted time to FILE (CSV)")
    args = ap.parse_args(argv)
    with open(args.rows, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["section"] == "shapes"
                and r["metric"] in ("prefill_wall_s", "decode_busy_s")]
    print(f"| model | phase | batch | tokens | measured ms | predicted ms ({args.device}) | error |")
    print("|---|---|---:|---:|---:|---|---|")
    predictions = []                  # (row, phase, runtime, predicted s)
    for r in rows:
        batch, tokens, measured = int(r["batch"]), int(r["prompt_len"]), float(r["value"])
        if r["metric"] == "prefill_wall_s":
            e = predict(r["model"], args.device, batch, tokens, "eager")["ttft_s"]
            c = predict(r["model"], args.device, batch, tokens, "compiled")["ttft_s"]
            predictions += [(r, "prefill", "eager", e), (r, "prefill", "compiled", c)]
            cell = f"eager {e * 1e3:.2f}, compiled {c * 1e3:.2f}"
            err = f"{e / measured - 1:+.0%}, {c / measured - 1:+.0%}"
            phase = "prefill (wall, HF eager)"
        else:
            c = predict(r["model"], args.device, batch, tokens, "compiled")["tpot_first_s"]
            cell, err, phase = f"compiled {c * 1e3:.2f}", f"{c / measured - 1:+.0%}", "decode (kernels)"
            predictions.append((r, "decode", "compiled", c))
        print(f"| {r['model']} | {phase} | {batch} | {tokens} | {measured * 1e3:.2f} | {cell} | {err} |", flush=True)
    if args.errors:
        write_errors(args.errors, args.device, predictions)
    return 0


def write_errors(path: str, device: str, predictions: list) -> None:
    """One CSV row per (measured row, phase, runtime, predicted s): the shape, the measured metric
    and value and the prediction in seconds (6 significant digits), id MODEL/PHASE/bBATCH/pTOKENS.
    The rows have no fit/held-out split (nothing is fitted on them): ``split`` is "all".
    tests/test_accuracy_lent_gpu.py recomputes docs/simulator.md's "Kernels on a lent H100" table from it."""
    import io

    from dispatchprof.results.files import write_atomic

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "split", "model", "device", "phase", "runtime", "batch", "tokens", "metric", "measured",
                "dispatchprof"])
    for r, phase, runtime, pred in predictions:
        w.writerow([f"{r['model']}/{phase}/b{r['batch']}/p{r['prompt_len']}", "all", r["model"], device, phase,
                    runtime, r["batch"], r["prompt_len"], r["metric"], f"{float(r['value']):.6g}", f"{pred:.6g}"])
    write_atomic(path, buf.getvalue())


if __name__ == "__main__":
    sys.exit(main())
