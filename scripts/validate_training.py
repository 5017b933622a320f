"""Validate `dispatchprof train` against published training throughput.

Reads scripts/data/published_training.csv (one row per published configuration: source URL, the
quoted table line, device, model, parallel sizes, batch, recompute, FP8, the network bandwidth per
GPU across nodes where the source names its cluster, measured tokens/s per GPU),
predicts every row with the public API (`dispatchprof.train.profile_training`, shipped defaults),
and prints per row the prediction and its error, then the median |error| of tokens/s/GPU on the
held-out rows by source and over all of them.

``tp_overlap`` is 1 on the Megatron-Bridge and NeMo rows with tp > 1: their performance recipes set
MegatronCommOverlapCallback(tp_comm_overlap=True) (NeMo llama3 70B recipe, Megatron-Bridge perf scripts).
``sequence_parallel`` is 0 on the Megatron-LM full-recompute rows (Korthikanti et al. 2022, Table 5's
baseline: tensor parallelism without sequence parallelism), 1 elsewhere (the recipes' default with tp > 1).

Split rule (fixed before any prediction): a row is held-out when the first 8 hex digits of
sha256(row id), read as an integer, are odd; else it is a fit row. The script checks that every
row's ``split`` column follows the rule.

MPT rows (llm-foundry) are simulated as a Llama-architecture proxy of the same width, depth and
parameter count (`mpt_proxy`): transformers' MPT attention is not SDPA, so counting it would time
the attention as unfused matmuls, which llm-foundry does not run.

``--errors FILE`` writes every row's measured and predicted tokens/s per GPU with its split and groups
(`write_errors`): scripts/data/training_predictions.csv, from which tests/test_accuracy_training.py
recomputes docs/training.md's accuracy blocks.

Usage: PYTHONPATH=.:scripts python scripts/validate_training.py [--only SOURCE] [--errors FILE] [--cache FILE] [--fit]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import statistics
import sys
import time
import warnings
from dataclasses import asdict, fields
from pathlib import Path

import torch

from dispatchprof.sim.links import SCALE_OUT_GB_PER_S
from dispatchprof.sim.placement import placement_of
from dispatchprof.train import TrainLayout, profile_training
from dispatchprof.count.layer_repeat import LayerRepeatError
from dispatchprof.train.count import (CountedModel, CountedStep, OpTable, count_model, op_table, simulate_model, step_from,
                                      time_model)
from dispatchprof.train.depth import repeated_table
from dispatchprof.train.factors import FACTORS, Factors
from dispatchprof.llm.models import build_model
from prediction_cache import code_version, load_cache, save_cache

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "published_training.csv"
#: The project's own measured training steps (scripts/measure_gpu.py, section "train") and the
#: device profile each was measured on.
MEASURED = (("H200", Path(__file__).parent / "data" / "h200_lent" / "run1_rows.csv"),
            ("H100-SXM", Path(__file__).parent / "data" / "h100_lent" / "run1_rows.csv"))
#: The modules that only split a counted step over a layout: a cached step does not depend on them.
AFTER_COUNT = tuple(f"dispatchprof/train/{m}.py" for m in ("__init__", "step", "memory", "schedule", "links", "layout",
                                                           "render", "trace", "factors"))
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
    """The row's layout. A row without a ``sequence_parallel`` column (scripts/data/
    published_training_memory.csv's) takes sequence parallelism on, the recipes' default."""
    vp = int(r["vp"])
    return TrainLayout(int(r["devices"]), int(r["micro_batch"]), int(r["global_batch"]), int(r["seq_len"]),
                       tp=int(r["tp"]), pp=int(r["pp"]), cp=int(r["cp"]), zero=int(r["zero"]),
                       schedule="interleaved" if vp > 1 else "1f1b", vp=vp, recompute=r["recompute"],
                       fp8=r["fp8"] == "1", gpus_per_node=min(int(r["gpus_per_node"]), int(r["devices"])),
                       tp_overlap=r["tp_overlap"] == "1", sequence_parallel=r.get("sequence_parallel", "1") == "1")


def scale_out_of(r: dict) -> float:
    """The row's network bandwidth per GPU across nodes, GB/s one way: its ``scale_out_gb_per_s``
    (a cluster its source names), else the default of `profile_training` (one 400 Gb/s NIC per GPU)."""
    return float(r["scale_out_gb_per_s"]) if r["scale_out_gb_per_s"] else SCALE_OUT_GB_PER_S


def measured_rows() -> list[dict]:
    """The measured single-GPU steps (eager PyTorch: fp32 weights, bf16 autocast, fused AdamW,
    SDPA), each predicted on its device with runtime "eager", the model counted once per shape in
    bf16 (what autocast runs its matmuls in). One dict per row: source (file:line), device, model,
    batch, seq, measured and predicted step seconds, measured peak GiB (torch's
    max_memory_allocated), predicted memory GiB with and without the fragmentation margin."""
    out, counted = [], {}
    for device, path in MEASURED:
        dev = placement_of(device).devices[0]
        for line, row in enumerate(csv.reader(path.open()), 1):
            if row[0] != "train" or row[6] != "step_s":
                continue
            model, batch, seq = row[1], int(row[3]), int(row[4])
            peak = re.search(r"peak ([0-9.]+) GiB", row[9])
            if (model, batch, seq) not in counted:
                counted[model, batch, seq] = count_model(build_model(model, torch.bfloat16), model, batch, seq)
            res = profile_training(model, device, TrainLayout(1, batch, batch, seq),
                                   counted=time_model(counted[model, batch, seq], dev, runtime="eager"))
            mem = res.memory
            out.append({"source": f"{path.relative_to(ROOT)}:{line}", "device": device, "model": model,
                        "batch": batch, "seq": seq, "measured_s": float(row[7]), "predicted_s": res.step_s,
                        "measured_gib": float(peak.group(1)) if peak else None,
                        "predicted_gib": mem.total / 2**30, "allocated_gib": (mem.total - mem.margin) / 2**30})
    return out


def print_measured() -> None:
    """The measured rows against their predictions: step time, and memory without the margin
    (what max_memory_allocated sees) and with it."""
    print(f"{'source':<41} {'device':<8} {'batch x seq':>11} {'measured s':>10} {'predicted s':>11} {'error':>7} "
          f"{'peak GiB':>8} {'pred. alloc':>11} {'error':>7} {'+margin':>7}")
    for r in measured_rows():
        mem_err = f"{r['allocated_gib'] / r['measured_gib'] - 1:>+7.1%}" if r["measured_gib"] else f"{'-':>7}"
        print(f"{r['source']:<41} {r['device']:<8} {r['batch']:>5} x {r['seq']:<4} {r['measured_s']:>10.4f} "
              f"{r['predicted_s']:>11.4f} {r['predicted_s'] / r['measured_s'] - 1:>+7.1%} "
              f"{r['measured_gib'] or 0:>8.1f} {r['allocated_gib']:>11.1f} {mem_err} {r['predicted_gib']:>7.1f}")


class Steps:
    """Each row's counted step on its device, tp and runtime, as the op table the factors act on
    (`dispatchprof.train.count.op_table`) on first use: a decoder of identical layers from counts
    with 2, 3 and 4 layers (`dispatchprof.train.depth.repeated_table`), else counted at full depth. With ``cache`` (a JSON file) the tables
    are kept there, stamped with the version of the code that makes them: everything under
    dispatchprof/, op_formulas/ and devices/ but the modules that only split a counted step over a
    layout (`AFTER_COUNT`); a cache of other code is refused."""

    def __init__(self, cache: str | None = None):
        self.path, self.models = cache, {}
        self.cache = load_cache(cache, code_version([mpt_proxy, Steps.table], AFTER_COUNT), "validate_training.py")

    def table(self, r: dict) -> dict:
        key = (r["model"], int(r["micro_batch"]), int(r["seq_len"]))
        skey = json.dumps([*key, r["device"], int(r["tp"]), r["runtime"]])
        if skey not in self.cache:
            dev = placement_of(r["device"]).devices[0]
            if key not in self.models:
                self.models.clear()
                spec = mpt_proxy(r["model"]) if r["model"] in MPT else r["model"]
                self.models[key] = build_model(spec, torch.bfloat16)
            try:                                      # a decoder of identical layers: from 2, 3 and 4 layers
                m, table, peak = repeated_table(self.models[key], r["model"], key[1], key[2], dev, tp=int(r["tp"]),
                                                runtime=r["runtime"])
            except LayerRepeatError:
                m = count_model(self.models[key], r["model"], key[1], key[2])
                table = op_table(simulate_model(m, dev, tp=int(r["tp"]), runtime=r["runtime"]))
                peak = dict(m.profile.phase_peaks).get("forward", 0)
            print(f"counted {skey}", file=sys.stderr, flush=True)
            self.cache[skey] = {"model": {f.name: getattr(m, f.name) for f in fields(CountedModel) if f.name != "profile"},
                                "table": asdict(table), "activation_bytes": peak}
            self.save()                               # a run cut short keeps what it simulated
        return self.cache[skey]

    def step(self, r: dict, factors: Factors) -> CountedStep:
        c = self.table(r)
        t = c["table"]
        table = OpTable(tuple(tuple(row) for row in t["rows"]), {p: tuple(v) for p, v in t["sums"].items()},
                        t["host_s"])
        return step_from(CountedModel(**c["model"], profile=None), table, placement_of(r["device"]).devices[0],
                         c["activation_bytes"], fp8=r["fp8"] == "1", factors=factors)

    def save(self) -> None:
        if self.path:
            save_cache(self.cache, self.path)


def predict(r: dict, steps: Steps, factors: Factors) -> tuple[float, float]:
    """(predicted tokens/s/GPU, relative error) of a row under ``factors``."""
    res = profile_training(r["model"], r["device"], layout_of(r), counted=steps.step(r, factors),
                           scale_out_gb_per_s=scale_out_of(r))
    return res.tokens_per_s_per_gpu, res.tokens_per_s_per_gpu / float(r["tokens_per_s_per_gpu"]) - 1


def fit_factors(rows: list[dict], sims: Steps) -> Factors:
    """attention_efficiency first, on the bf16 fit rows; then fp8_efficiency on the FP8 fit rows:
    each the grid value (0.05 steps) with the least median |error|."""
    def score(sel: list[dict], f: Factors) -> float:
        return statistics.median(abs(predict(r, sims, f)[1]) for r in sel)

    grid = [round(0.05 * k, 2) for k in range(4, 21)]
    bf16 = [r for r in rows if r["fp8"] == "0"]
    att = min(grid, key=lambda a: score(bf16, Factors(1.0, a)))
    fp8 = [r for r in rows if r["fp8"] == "1"]
    eff = min(grid, key=lambda e: score(fp8, Factors(e, att)))
    return Factors(eff, att)


def parallelism(r: dict) -> str:
    """The row's kinds of model parallelism and its data-parallel flavour, e.g. 'tp+pp, zero 1'."""
    kinds = [k for k in ("tp", "pp", "cp") if int(r[k]) > 1]
    return f"{'+'.join(kinds) or 'dp only'}, zero {r['zero']}"


#: How the report groups the errors, besides by source: the device, the parallelism, the precision.
GROUPS = {"device": lambda r: Path(r["device"]).stem, "parallelism": parallelism,
          "precision": lambda r: "fp8" if r["fp8"] == "1" else "bf16"}


def write_errors(path: str, out: list[tuple[dict, float, float]]) -> None:
    """Every row of ``out`` ((row, predicted, error) as `main` makes them): id, split, source, its
    `GROUPS` (device, parallelism, precision), the published ("measured") and the predicted
    ("dispatchprof") tokens/s per GPU, 6 significant digits (a median of the errors rounds to the
    report's one decimal as the unrounded one does)."""
    import io

    from dispatchprof.results.files import write_atomic

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "split", "source", *GROUPS, "measured", "dispatchprof"])
    for r, pred, _ in out:
        w.writerow([r["id"], r["split"], r["source"], *(group(r) for group in GROUPS.values()),
                    f"{float(r['tokens_per_s_per_gpu']):.6g}", f"{pred:.6g}"])
    write_atomic(path, buf.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="only the rows of this source")
    ap.add_argument("--errors", metavar="FILE", help="write every row's measured and predicted tokens/s per GPU to "
                    "FILE (CSV)")
    ap.add_argument("--cache", metavar="FILE", help="keep the counted steps in this JSON file (refused when the "
                    "counting or simulating code has changed since)")
    ap.add_argument("--fit", action="store_true", help="fit the factors on the fit rows, then report with them")
    ap.add_argument("--measured", action="store_true", help="only the project's own measured steps (H200, H100)")
    args = ap.parse_args()
    if args.measured:
        print_measured()
        return 0
    rows = list(csv.DictReader(DATA.open()))
    bad = [r["id"] for r in rows if r["split"] != split_of(r["id"])]
    if bad:
        print(f"rows whose split does not follow the rule: {bad}", file=sys.stderr)
        return 1
    rows = of_source(ap, rows, args.only)
    sims = Steps(args.cache)
    by_count = sorted(rows, key=lambda r: (r["model"], int(r["micro_batch"]), int(r["seq_len"])))  # count each once
    if args.fit:
        fit = [r for r in by_count if r["split"] == "fit"]
        factors = fit_factors(fit, sims)
        print(f"fitted on {len(fit)} fit rows: {factors}")
    else:
        factors = FACTORS
    pred = {r["id"]: predict(r, sims, factors) for r in by_count}
    sims.save()
    out = [(r, *pred[r["id"]]) for r in rows]
    print(f"{'id':<44} {'split':<8} {'published':>9} {'predicted':>9} {'error':>7}")
    for r, pred, err in out:
        print(f"{r['id']:<44} {r['split']:<8} {float(r['tokens_per_s_per_gpu']):>9.0f} {pred:>9.0f} {err:>+7.1%}")
    print()
    for split in ("fit", "held-out"):
        sel = [o for o in out if o[0]["split"] == split]
        for source in sorted({o[0]["source"] for o in sel}):
            errs = [o[2] for o in sel if o[0]["source"] == source]
            print(f"{split:<8} {source:<16} rows {len(errs):>3}  median |error| "
                  f"{statistics.median(map(abs, errs)):6.1%}  median error {statistics.median(errs):+6.1%}")
        if sel:
            print(f"{split:<8} {'all':<16} rows {len(sel):>3}  median |error| "
                  f"{statistics.median(abs(o[2]) for o in sel):6.1%}")
    print()
    for name, group in GROUPS.items():
        for split in ("fit", "held-out"):
            sel = [o for o in out if o[0]["split"] == split]
            for value in sorted({group(o[0]) for o in sel}):
                errs = [o[2] for o in sel if group(o[0]) == value]
                print(f"by {name:<12} {split:<8} {value:<22} rows {len(errs):>3}  median error "
                      f"{statistics.median(errs):+6.1%}")
    if args.errors:
        write_errors(args.errors, out)
    return 0


def of_source(ap: argparse.ArgumentParser, rows: list[dict], only: str | None) -> list[dict]:
    """The rows of source ``only`` (all rows for None); an unknown source is a usage error naming
    the known ones."""
    if only is None:
        return rows
    sources = sorted({r["source"] for r in rows})
    if only not in sources:
        ap.error(f"--only {only!r}: no rows of that source; the sources are {', '.join(sources)}")
    return [r for r in rows if r["source"] == only]


def run_timed(main_fn) -> None:
    """A validation script's entry: torch's warnings off, ``main_fn()``'s status as the exit code,
    and its wall seconds on stderr."""
    warnings.simplefilter("ignore")
    t0 = time.time()
    status = main_fn()
    print(f"\n{time.time() - t0:.0f} s", file=sys.stderr)
    sys.exit(status)


if __name__ == "__main__":
    run_timed(main)
