"""The bundled profile of a lent GPU against what `scripts/measure_gpu.py shapes` measured on it.

    python scripts/compare_lent_gpu.py [--rows scripts/data/h100_lent/run1_rows.csv] [--device H100-SXM]

For every prefill shape: the measured synchronised wall time of one prefill forward (HF eager)
against the predicted TTFT under ``--runtime eager`` and ``--runtime compiled``; for every decode
shape: the measured kernels' summed time per decode step (no host time) against the predicted
first decode step under ``--runtime compiled`` (kernels without host gaps). Each prediction is
``dispatchprof MODEL --device D --batch B --prompt-len P --new-tokens 2 --runtime R --json``.
Prints one table; the signed error is predicted / measured - 1.
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
    args = ap.parse_args(argv)
    with open(args.rows, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["section"] == "shapes"
                and r["metric"] in ("prefill_wall_s", "decode_busy_s")]
    print(f"| model | phase | batch | tokens | measured ms | predicted ms ({args.device}) | error |")
    print("|---|---|---:|---:|---:|---|---|")
    for r in rows:
        batch, tokens, measured = int(r["batch"]), int(r["prompt_len"]), float(r["value"])
        if r["metric"] == "prefill_wall_s":
            e = predict(r["model"], args.device, batch, tokens, "eager")["ttft_s"]
            c = predict(r["model"], args.device, batch, tokens, "compiled")["ttft_s"]
            cell = f"eager {e * 1e3:.2f}, compiled {c * 1e3:.2f}"
            err = f"{e / measured - 1:+.0%}, {c / measured - 1:+.0%}"
            phase = "prefill (wall, HF eager)"
        else:
            c = predict(r["model"], args.device, batch, tokens, "compiled")["tpot_first_s"]
            cell, err, phase = f"compiled {c * 1e3:.2f}", f"{c / measured - 1:+.0%}", "decode (kernels)"
        print(f"| {r['model']} | {phase} | {batch} | {tokens} | {measured * 1e3:.2f} | {cell} | {err} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
