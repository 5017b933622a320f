"""How close is the simulator to published GPU measurements? Predict every row of
scripts/data/published_gpu.csv, fit a few parameters on the rows marked "fit", report both errors.

    python scripts/validate_published.py [--markdown] [--only ID,ID] [--cache FILE]

Each row (a model on a GPU, tensor-parallel degree, runtime, weight dtype, batch, prompt and output
length, one measured metric, its source) is one `profile_generation` on weightless (fake) models,
simulated side by side on variants of the row's device profile: every combination of a per-device
parameter (matrix_memory_efficiency, the achieved fraction of bandwidth of GEMM/GEMV streams) and a
per-runtime parameter (host_overhead_us for eager, graph_launch_us for compiled and serving). The fit
picks, on the fit rows only, the per-device and per-runtime values with the least mean absolute
error of the time rows (each capped at 100%: a median would be flat in a parameter that moves only
a few rows, such as the eager host cost, and one wild row should not decide a device), then each device's static power from its energy fit rows (energy per token
is linear in it: the median of (measured * tokens / tp - dynamic energy) / time). Nothing is fitted
per model or per row; the held-out rows never enter the fit.

Metrics: tpot = decode time per step (mean); e2e_per_token = (prefill + decode time) / output tokens;
ttft = prefill time; throughput = batch * output tokens / (prefill + decode time) of the whole group;
energy_per_token = the group's energy / (batch * output tokens). The columns of the CSV say where
each value comes from and what was assumed (scripts/data/README.md).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import json
import os
import statistics
import sys
import warnings

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "published_gpu.csv")
MME = (0.6, 0.7, 0.8, 0.9)                                     # per device: matrix_memory_efficiency
HOST = {"eager": ("host_overhead_us", (4.0, 7.0, 10.0)),      # per runtime: host cost
        "compiled": ("graph_launch_us", (20.0, 100.0, 300.0)),
        "serving": ("graph_launch_us", (20.0, 100.0, 300.0))}
FAMILIES = {"tpot": "TPOT", "e2e_per_token": "TPOT", "ttft": "TTFT", "throughput": "throughput",
            "energy_per_token": "energy"}
LLAMA2 = {"llama-2-13b": dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                              num_attention_heads=40, num_key_value_heads=40),
          "llama-2-70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                              num_attention_heads=64, num_key_value_heads=8)}
ALIASES = {"llama-3.3-70b": "llama-3.1-70b", "llama-3-8b": "llama-3.1-8b"}


def build(name: str):
    import torch
    import transformers as tf

    from dispatchprof.llm.models import build_model

    if name in LLAMA2:                # not in the bundled catalog: Llama-2 configs (HF model cards)
        cfg = tf.LlamaConfig(vocab_size=32000, max_position_embeddings=4096, rope_theta=10000.0, **LLAMA2[name])
        return build_model(cfg, dtype=torch.bfloat16)
    return build_model(ALIASES.get(name, name), dtype=torch.bfloat16)


def variants(device_name: str, runtime: str):
    """Named variants of a device profile: (mme, host value) -> Device."""
    from dispatchprof.sim.catalog import load_device

    base = load_device(device_name)
    field, values = HOST[runtime]
    return {(m, h): dataclasses.replace(base, name=f"{device_name}|{m}|{h}", matrix_memory_efficiency=m,
                                        **{field: h})
            for m, h in itertools.product(MME, values)}


def predict_row(row: dict, model) -> dict:
    """Per variant: (time figures by metric, dynamic J, total s, tokens)."""
    from dispatchprof.llm.generation import profile_generation

    batch, prompt, out, tp = (int(row[k]) for k in ("batch", "prompt_len", "output_len", "tp"))
    devs = variants(row["hardware"], row["runtime"])
    wd = None if row["weight_dtype"] in ("bf16", "fp16") else row["weight_dtype"]
    g = profile_generation(model, batch, prompt, out, devices=list(devs.values()), weight_dtype=wd,
                           runtime=row["runtime"], tp=tp)
    result = {}
    for key, dev in devs.items():
        d = g.devices[dev.name]
        figures = {"tpot": d.tpot_mean_s, "e2e_per_token": d.total_time_s / out, "ttft": d.ttft_s,
                   "throughput": d.tokens_per_s}
        dynamic = d.prefill.energy_j - d.prefill.static_j + d.decode.energy_j - d.decode.static_j
        result[f"{key[0]}|{key[1]}"] = (figures, dynamic, d.total_time_s, batch * out)
    return result


def _figure(row: dict, pred: list) -> float | None:
    """The row's metric from a generation's figures (energy is computed from its parts)."""
    return None if row["measure"] == "energy_per_token" else pred[0][row["measure"]]


def energy(pred: tuple, static_w: float, tp: int) -> float:
    _, dynamic, time, tokens = pred
    return tp * (dynamic + static_w * time) / tokens


def error(measured: float, predicted: float) -> float:
    return (predicted - measured) / measured


def fit(rows: list[dict], preds: dict) -> tuple[dict, dict, dict]:
    """Per device mme, per runtime host value (least median |error| of the fit rows' times), then
    per device static power (median of the energy fit rows' solutions)."""
    fit_rows = [r for r in rows if r["split"] == "fit" and r["measure"] != "energy_per_token"]
    devices = sorted({r["hardware"] for r in rows})
    runtimes = sorted({r["runtime"] for r in rows})
    best, best_err = None, float("inf")
    for mmes in itertools.product(MME, repeat=len(devices)):
        per_dev = dict(zip(devices, mmes))
        for hosts in itertools.product(*(HOST[rt][1] for rt in runtimes)):
            per_rt = dict(zip(runtimes, hosts))
            errs = [min(1.0, abs(error(float(r["value"]),
                                       preds[r["id"]][f"{per_dev[r['hardware']]}|{per_rt[r['runtime']]}"][0])))
                    for r in fit_rows]
            e = statistics.fmean(errs) if errs else 0.0
            if e < best_err - 1e-12:
                best, best_err = (per_dev, per_rt), e
    per_dev, per_rt = best
    static: dict[str, float] = {}
    for dev in devices:
        sol = []
        for r in rows:
            if r["split"] == "fit" and r["measure"] == "energy_per_token" and r["hardware"] == dev:
                _, dynamic, time, tokens = preds[r["id"]][f"{per_dev[dev]}|{per_rt[r['runtime']]}"]
                sol.append(max(0.0, (float(r["value"]) * tokens / int(r["tp"]) - dynamic) / time))
        if sol:
            static[dev] = statistics.median(sol)
    return per_dev, per_rt, static


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--only", help="comma-separated row ids")
    p.add_argument("--cache", help="JSON file keeping predictions between runs (keyed by row id)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from tabulate import tabulate

    from dispatchprof.sim.catalog import load_device

    rows = list(csv.DictReader(open(DATA, encoding="utf-8")))
    if args.only:
        rows = [r for r in rows if r["id"] in args.only.split(",")]
    cache = json.load(open(args.cache)) if args.cache and os.path.exists(args.cache) else {}
    models: dict[str, object] = {}
    preds = {}
    for r in sorted(rows, key=lambda r: r["model"]):
        key = "/".join(r[k] for k in ("model", "hardware", "tp", "runtime", "weight_dtype", "batch", "prompt_len",
                                      "output_len"))             # rows of one generation share it
        if key not in cache:
            if r["model"] not in models:
                models.clear()             # one model alive at a time (a 405B fake model is large)
                models[r["model"]] = build(r["model"])
            print(f"  {r['id']} ...", file=sys.stderr, flush=True)
            cache[key] = predict_row(dict(r, measure="tpot"), models[r["model"]])
            if args.cache:
                json.dump(cache, open(args.cache, "w"))
        preds[r["id"]] = {k: (_figure(r, v), *v[1:]) for k, v in cache[key].items()}
    per_dev, per_rt, static = fit(rows, preds)
    table, errs = [], {"fit": [], "held-out": []}
    families: dict[str, list[float]] = {}
    for r in rows:
        pred = preds[r["id"]][f"{per_dev[r['hardware']]}|{per_rt[r['runtime']]}"]
        tp = int(r["tp"])
        if r["measure"] == "energy_per_token":
            value = energy(pred, static.get(r["hardware"], load_device(r["hardware"]).static_power_w), tp)
        else:
            value = pred[0]
        e = error(float(r["value"]), value)
        errs[r["split"]].append(abs(e))
        if r["split"] == "held-out":
            families.setdefault(FAMILIES[r["measure"]], []).append(abs(e))
        table.append([r["id"], r["split"], r["model"], r["hardware"], tp, r["runtime"], r["weight_dtype"], r["batch"],
                      r["prompt_len"], r["output_len"], r["measure"], f"{float(r['value']):.4g}", f"{value:.4g}",
                      f"{e:+.1%}"])
    fmt = "github" if args.markdown else "simple"
    print(tabulate(table, ["id", "split", "model", "device", "tp", "runtime", "weights", "batch", "prompt", "output",
                           "metric", "measured", "predicted", "error"], fmt))
    print()
    print("fitted per device: matrix_memory_efficiency " + ", ".join(f"{k} {v}" for k, v in per_dev.items())
          + "; static_power_w " + ", ".join(f"{k} {v:.0f}" for k, v in static.items()))
    print("fitted per runtime: " + ", ".join(f"{k} {HOST[k][0]} {v:g}" for k, v in per_rt.items()))
    for split in ("fit", "held-out"):
        if errs[split]:
            print(f"median |error| on {len(errs[split])} {split} rows: {statistics.median(errs[split]):.1%}")
    for fam, v in sorted(families.items()):
        print(f"  held-out {fam}: median |error| {statistics.median(v):.1%} over {len(v)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
