"""Validate `dispatchprof train` against published training throughput.

Reads scripts/data/published_training.csv (one row per published configuration: source URL, the
quoted table line, device, model, parallel sizes, batch, recompute, FP8, measured tokens/s per GPU),
predicts every row with the public API (`dispatchprof.train.profile_training`, shipped defaults),
and prints per row the prediction and its error, then the median |error| of tokens/s/GPU on the
held-out rows by source and over all of them.

Split rule (fixed before any prediction): a row is held-out when the first 8 hex digits of
sha256(row id), read as an integer, are odd; else it is a fit row. The script checks that every
row's ``split`` column follows the rule.

MPT rows (llm-foundry) are simulated as a Llama-architecture proxy of the same width, depth and
parameter count (`mpt_proxy`): transformers' MPT attention is not SDPA, so counting it would time
the attention as unfused matmuls, which llm-foundry does not run.

Usage: PYTHONPATH=. python scripts/validate_training.py [--only SOURCE] [--csv OUT]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

from dispatchprof.sim.placement import placement_of
from dispatchprof.train import TrainLayout, profile_training
from dispatchprof.train.count import count_model, time_model
from dispatchprof.llm.models import build_model

DATA = Path(__file__).parent / "data" / "published_training.csv"
#: MPT sizes (llm-foundry yamls): d_model, n_layers; heads = d_model / 128 (head size 128)
MPT = {"mpt-1b": (2048, 24), "mpt-3b": (2560, 32), "mpt-7b": (4096, 32), "mpt-13b": (5120, 40),
       "mpt-30b": (7168, 48), "mpt-70b": (8192, 80)}


def split_of(row_id: str) -> str:
    """The fixed split rule (module docstring)."""
    return "held-out" if int(hashlib.sha256(row_id.encode()).hexdigest()[:8], 16) % 2 else "fit"


def mpt_proxy(name: str):
    """A LlamaConfig as wide and deep as MPT ``name``, its MLP 8d/3 wide (the 8 d^2 of MPT's 4x GELU
    MLP), vocabulary 50368, embeddings tied to the LM head, as MPT."""
    import transformers
    d, layers = MPT[name]
    return transformers.LlamaConfig(hidden_size=d, intermediate_size=round(8 * d / 3), num_hidden_layers=layers,
                                    num_attention_heads=d // 128, num_key_value_heads=d // 128, vocab_size=50368,
                                    tie_word_embeddings=True, max_position_embeddings=65536)


def layout_of(r: dict) -> TrainLayout:
    vp = int(r["vp"])
    return TrainLayout(int(r["devices"]), int(r["micro_batch"]), int(r["global_batch"]), int(r["seq_len"]),
                       tp=int(r["tp"]), pp=int(r["pp"]), cp=int(r["cp"]), zero=int(r["zero"]),
                       schedule="interleaved" if vp > 1 else "1f1b", vp=vp, recompute=r["recompute"],
                       fp8=r["fp8"] == "1", gpus_per_node=min(int(r["gpus_per_node"]), int(r["devices"])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="only the rows of this source")
    ap.add_argument("--csv", help="write the per-row predictions here")
    args = ap.parse_args()
    rows = list(csv.DictReader(DATA.open()))
    bad = [r["id"] for r in rows if r["split"] != split_of(r["id"])]
    if bad:
        print(f"rows whose split does not follow the rule: {bad}", file=sys.stderr)
        return 1
    if args.only:
        rows = [r for r in rows if r["source"] == args.only]
    counted, timed, out = {}, {}, []
    print(f"{'id':<44} {'split':<8} {'published':>9} {'predicted':>9} {'error':>7}")
    for r in sorted(rows, key=lambda r: (r["model"], r["micro_batch"], r["seq_len"])):
        key = (r["model"], int(r["micro_batch"]), int(r["seq_len"]))
        if key not in counted:
            spec = mpt_proxy(r["model"]) if r["model"] in MPT else r["model"]
            counted.clear()
            timed.clear()
            net = build_model(spec, torch.bfloat16)
            counted[key] = count_model(net, r["model"], key[1], key[2])
            del net
        lay = layout_of(r)
        tkey = (key, r["device"], lay.tp, lay.fp8, r["runtime"])
        if tkey not in timed:
            timed[tkey] = time_model(counted[key], placement_of(r["device"]).devices[0], tp=lay.tp, fp8=lay.fp8,
                                     runtime=r["runtime"])
        res = profile_training(r["model"], r["device"], lay, counted=timed[tkey])
        pub = float(r["tokens_per_s_per_gpu"])
        err = res.tokens_per_s_per_gpu / pub - 1
        out.append((r, res.tokens_per_s_per_gpu, err))
        print(f"{r['id']:<44} {r['split']:<8} {pub:>9.0f} {res.tokens_per_s_per_gpu:>9.0f} {err:>+7.1%}", flush=True)
    print()
    for split in ("fit", "held-out"):
        sel = [o for o in out if o[0]["split"] == split]
        for source in sorted({o[0]["source"] for o in sel}):
            errs = [abs(o[2]) for o in sel if o[0]["source"] == source]
            print(f"{split:<8} {source:<16} rows {len(errs):>3}  median |error| {statistics.median(errs):6.1%}  "
                  f"median error {statistics.median(o[2] for o in sel if o[0]['source'] == source):+6.1%}")
        if sel:
            print(f"{split:<8} {'all':<16} rows {len(sel):>3}  median |error| "
                  f"{statistics.median(abs(o[2]) for o in sel):6.1%}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "source", "split", "published", "predicted", "error"])
            w.writerows([o[0]["id"], o[0]["source"], o[0]["split"], o[0]["tokens_per_s_per_gpu"], f"{o[1]:.1f}",
                         f"{o[2]:.4f}"] for o in out)
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    t0 = time.time()
    status = main()
    print(f"\n{time.time() - t0:.0f} s", file=sys.stderr)
    sys.exit(status)
