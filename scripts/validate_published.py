"""How close is the simulator to published GPU measurements? Predict every row of
scripts/data/published_gpu.csv, fit a few parameters on the rows marked "fit", report both errors.

    python scripts/validate_published.py [--markdown] [--only ID,ID] [--cache FILE] [--jobs N] [--as-shipped] [--errors FILE]

Each row (a model on a GPU, tensor-parallel degree, runtime, weight and KV-cache dtype, batch,
prompt and output length, one measured metric, its source) is predicted on weightless (fake) models,
simulated side by side on variants of the row's device profile: every combination of a per-device
parameter (matrix_memory_efficiency, the achieved fraction of bandwidth of GEMM/GEMV streams), a
per-runtime parameter (host_overhead_us for eager, graph_launch_us for compiled; graph_launch_us and
sequence_host_us for each serving engine, fitted as a runtime of its own) and, for weight-only
int8/int4 rows, a per-device weight_only_efficiency. A `static` row is one
`profile_generation`; a `continuous` row (an engine keeping `batch` sequences running) is the
steady state of the serving step cost model (`predict_continuous`). The fit picks, on the fit rows
only, the per-device and per-runtime values with the least mean absolute error of the time rows
(each capped at 100%: a median would be flat in a parameter that moves only a few rows, such as the
eager host cost, and one wild row should not decide a device), then the weight-only efficiencies
on their int rows (`fit_hosts`). A second stage simulates, at those host figures and efficiencies,
every mme x per-device unoverlapped_fraction (the share of an op's shorter side, compute or memory,
its kernel does not hide) and picks each device's pair the same way (`fit_unoverlapped`); then
each device's static power and dynamic energy scale, and whether a serving engine's per-sequence
time draws the kernels' power, come from the energy fit rows (`fit_energy`). The grids and
the fitting stages live in scripts/published_fit.py; this script simulates and reports. Only the time fit
rows are simulated on every variant; the energy fit rows and the held-out rows are simulated on
the fitted one alone (`fit`). Nothing is fitted per model or per row; the held-out rows never
enter the fit. A `--cache` file is stamped with the version of the code that simulated it
(`code_version`) and refused by other code.

``--as-shipped`` fits nothing: every row is predicted on its bundled device profile as a user
gets it (`load_device(hardware)`: its sourced efficiencies, host figures and static power), so
the table says how far the defaults are from the measurements.

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
import math
import multiprocessing
import os
import statistics
import sys
import warnings

import prediction_cache
from prediction_cache import VERSION, save_cache
from published_fit import (
    HOST, MME, READINGS, UNOVERLAPPED, WOE, Fitted, energy, error, fit_energy, fit_hosts, fit_time_rows,
    fit_unoverlapped, runtime_of, variant_key, weight_only,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "scripts", "data", "published_gpu.csv")
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


def variants(row: dict, fitted: Fitted | None = None):
    """Named variants (`variant_key`) of ``row``'s device profile -> Device. First stage (no
    ``fitted``): every mme x host figures of its runtime (x woe for a weight-only int row), with
    unoverlapped_fraction 0. Second stage: every mme x nonzero unoverlapped_fraction, at the host
    figures and woe ``fitted`` in the first stage."""
    from dispatchprof.sim.catalog import load_device

    base = load_device(row["hardware"])
    wd = weight_only(row)
    if fitted is None:
        grid = itertools.product(MME, HOST[row["runtime"]], (0.0,), WOE if wd else (None,))
    else:
        grid = itertools.product(MME, (fitted.host[runtime_of(row)],), UNOVERLAPPED[1:],
                                 (fitted.woe.get((row["hardware"], wd), 1.0),) if wd else (None,))
    out = {}
    for m, h, u, w in grid:
        key = variant_key(m, h, u, w)
        extra = {"weight_only_efficiency": {wd: w}} if w is not None else {}
        out[key] = dataclasses.replace(base, name=f"{row['hardware']}|{key}", matrix_memory_efficiency=m,
                                       unoverlapped_fraction=u, **dict(h), **extra)
    return out


def simulated_weight_dtype(row: dict) -> str | None:
    """The ``weight_dtype`` to simulate ``row`` with: None for the model's own 16-bit weights."""
    return None if row["weight_dtype"] in ("bf16", "fp16") else row["weight_dtype"]


def predict_row(row: dict, model, devs: dict) -> dict:
    """Per variant of ``devs`` (name -> Device): (time figures by metric, dynamic J, total s, tokens)."""
    from dispatchprof.llm.generation import profile_generation

    batch, prompt, out, tp = (int(row[k]) for k in ("batch", "prompt_len", "output_len", "tp"))
    wd = simulated_weight_dtype(row)
    g = profile_generation(model, batch, prompt, out, devices=list(devs.values()), weight_dtype=wd,
                           runtime=row["runtime"], tp=tp, kv_dtype=row["kv_dtype"] or None)
    result = {}
    for key, dev in devs.items():
        d = g.devices[dev.name]
        figures = {"tpot": d.tpot_mean_s, "e2e_per_token": d.total_time_s / out, "ttft": d.ttft_s,
                   "throughput": d.tokens_per_s}
        dynamic = d.prefill.energy_j - d.prefill.static_j + d.decode.energy_j - d.decode.static_j
        result[key] = (figures, dynamic, d.total_time_s, batch * out)
    return result


def predict_continuous(row: dict, model, devs: dict) -> dict:
    """Per variant of ``devs``, for a row measured under continuous batching at saturation (``scheduling`` =
    continuous: an engine keeping ``batch`` sequences running, a finished one replaced at once):
    the steady state of the engine's steps, from the serving step cost model
    (`dispatchprof.serving.cost`). Each step runs the ``batch`` slots; lambda = batch / output
    sequences finish per step on average (Little's law), so a step admits k ~ Poisson(lambda) new
    prompts, each prefilled in that step (chunked prefill: one mixed step) while the other batch - k
    decode. A running sequence has generated E[O^2] / (2 E[O]) = output_dispersion * output / 2
    tokens on average (a long response holds its slot longer: length-biased sampling), so the
    decoders' mean context is prompt + that. Step time T(k) and energy E(k) from the cost model;
    tpot = the median step's T (the median inter-token latency), throughput = batch / E[T],
    e2e_per_token = tpot; (dynamic J, s) per step are means."""
    from dispatchprof.serving.cost import Composition, fit_cost_models
    from dispatchprof.sim.placement import scenarios_of

    batch, prompt, out, tp = (int(row[k]) for k in ("batch", "prompt_len", "output_len", "tp"))
    wd = simulated_weight_dtype(row)
    models = fit_cost_models(model, scenarios_of(list(devs.values())), wd, runtime=row["runtime"], tp=tp,
                             kv_dtype=row["kv_dtype"] or None)
    dispersion = float(row["output_dispersion"] or 1.0)
    lam = batch / out
    weights, k = [], 0
    while k <= batch and (k <= lam or weights[-1] > 1e-9):
        weights.append(math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1)))
        k += 1
    total = sum(weights)
    weights = [w / total for w in weights]
    cumulative, median_k = 0.0, 0
    for median_k, w in enumerate(weights):
        cumulative += w
        if cumulative >= 0.5:
            break
    result = {}
    for key, dev in devs.items():
        cost = models[dev.name]
        steps = []
        for k in range(len(weights)):
            decoding = batch - k
            c = Composition.decoding(decoding, decoding * (prompt + dispersion * out / 2), prompt + 2 * out)
            steps.append(cost.cost(c.merge(Composition.of([(prompt, prompt)] * k)) if k else c))
        time = sum(w * st.time_s for w, st in zip(weights, steps))
        dynamic = sum(w * (st.energy_j - dev.static_power_w * st.time_s) for w, st in zip(weights, steps))
        figures = {"tpot": steps[median_k].time_s, "e2e_per_token": steps[median_k].time_s,
                   "ttft": float("nan"), "throughput": batch / time}
        result[key] = (figures, dynamic, time, batch)
    return result


def _figure(row: dict, pred: list) -> float | None:
    """The row's metric from a generation's figures (energy is computed from its parts)."""
    return None if row["measure"] == "energy_per_token" else pred[0][row["measure"]]


def generation_key(row: dict) -> str:
    """What a row's predictions are cached under: rows of one generation share it."""
    key = "/".join(row[k] for k in ("model", "hardware", "tp", "runtime", "weight_dtype", "batch", "prompt_len",
                                    "output_len"))
    key += f"/kv-{row['kv_dtype']}" if row["kv_dtype"] else ""
    return key + (f"/continuous-{row['output_dispersion']}" if row["scheduling"] == "continuous" else "")


def code_version() -> str:
    """The version of the code the predictions come from (`prediction_cache.code_version`): the
    library's trees and this script's functions that simulate (`build`, `variants`,
    `shipped_variant`, `simulated_weight_dtype`, `predict_row`, `predict_continuous`); the fitting
    code is not in it."""
    return prediction_cache.code_version((build, variants, shipped_variant, simulated_weight_dtype, predict_row,
                                          predict_continuous))


def load_cache(path: str | None) -> dict:
    """The predictions cached in ``path``, refused when another code version made them."""
    return prediction_cache.load_cache(path, code_version(), "validate_published.py")


SHIPPED = "as-shipped"                   # the variant name of a row's bundled profile, unchanged


def shipped_variant(row: dict) -> dict:
    """``row``'s bundled device profile as a user gets it, under the name `SHIPPED`."""
    from dispatchprof.sim.catalog import load_device

    return {SHIPPED: load_device(row["hardware"])}


def chosen_variant(row: dict, f: Fitted) -> dict:
    """The one variant of ``row``'s device profile that ``f`` selects (`Fitted.key`) -> Device,
    taken from the stage whose grid holds it (the first for unoverlapped_fraction 0)."""
    key = f.key(row)
    return {key: variants(row, f if f.unoverlapped.get(row["hardware"], 0.0) else None)[key]}


_MODELS: dict[str, object] = {}          # this process's one live model (a 405B fake model is large)


def _model(name: str):
    if name not in _MODELS:
        _MODELS.clear()
        _MODELS[name] = build(name)
    return _MODELS[name]


def _grid(row: dict, fitted: Fitted | None, chosen: Fitted | str | None) -> dict:
    """The variants of ``row`` that a `predict_all` stage reads (see there)."""
    if chosen == SHIPPED:
        return shipped_variant(row)
    return chosen_variant(row, chosen) if chosen is not None else variants(row, fitted)


def _simulate(task: tuple) -> tuple[str, str, dict]:
    """(row id, generation key, variant -> prediction) of one task: a row, the stage its variants
    come from (``fitted``, ``chosen``: as `predict_all`) and the names of those to simulate."""
    row, fitted, chosen, names = task
    grid = _grid(row, fitted, chosen)
    predict = predict_continuous if row["scheduling"] == "continuous" else predict_row
    return row["id"], generation_key(row), predict(dict(row, measure="tpot"), _model(row["model"]),
                                                   {k: grid[k] for k in names})


def predict_all(rows: list[dict], cache: dict, path: str | None, fitted: Fitted | None = None,
                chosen: Fitted | str | None = None, jobs: int = 1) -> dict:
    """Row id -> variant -> (figure, dynamic J, s, tokens) over `variants` (first stage, or second
    at ``fitted``; only the variant ``chosen`` selects, when given; the bundled profile alone when
    ``chosen`` is `SHIPPED`), simulating only the variants
    ``cache`` lacks, one generation per task, in ``jobs`` processes (saving the cache to ``path``
    after each)."""
    tasks, pending = [], {}
    for r in sorted(rows, key=lambda r: r["model"]):
        key = generation_key(r)
        known = cache.setdefault(key, {})
        grid = _grid(r, fitted, chosen)
        names = [k for k in grid if k not in known and k not in pending.setdefault(key, set())]
        if names:
            pending[key].update(names)
            tasks.append((r, fitted, chosen, names))
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 and len(tasks) > 1 else None
    try:
        for row_id, key, out in (pool.imap_unordered(_simulate, tasks) if pool else map(_simulate, tasks)):
            cache[key].update(out)
            print(f"  {row_id}: {len(out)} variants simulated", file=sys.stderr, flush=True)
            if path:
                save_cache(cache, path)
    finally:
        if pool:
            pool.terminate()
    return {r["id"]: {k: (_figure(r, v), *v[1:]) for k, v in cache[generation_key(r)].items()} for r in rows}


def fit(rows: list[dict], cache: dict, path: str | None, jobs: int = 1) -> tuple[Fitted, dict]:
    """(the fitted parameters, every row's predictions), simulating only what the fit and the
    table read: the time fit rows on both stages' grids, the energy fit rows at the time
    parameters, then every row at the fitted variant (a held-out row is simulated once)."""
    time_rows, _ = fit_time_rows(rows)
    first = fit_hosts(rows, predict_all(time_rows, cache, path, jobs=jobs))
    second = fit_unoverlapped(rows, predict_all(time_rows, cache, path, first, jobs=jobs), first)
    energy_rows = [r for r in rows if r["split"] == "fit" and r["measure"] == "energy_per_token"]
    fitted = fit_energy(rows, predict_all(energy_rows, cache, path, chosen=second, jobs=jobs), second)
    return fitted, predict_all(rows, cache, path, chosen=fitted, jobs=jobs)


def shipped_value(row: dict, pred: tuple) -> float:
    """A row's figure on its bundled profile; energy with the profile's static power."""
    if row["measure"] != "energy_per_token":
        return pred[0]
    return energy(row, pred, Fitted({}, {}), shipped_variant(row)[SHIPPED].static_power_w)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--only", help="comma-separated row ids")
    p.add_argument("--jobs", type=int, default=1, help="processes simulating side by side (default 1)")
    p.add_argument("--cache", help="JSON file keeping predictions between runs (per generation and variant; "
                                   "refused when written by other code)")
    p.add_argument("--as-shipped", action="store_true", help="fit nothing: predict every row on its bundled profile")
    p.add_argument("--errors", metavar="FILE", help="write every row's measured and predicted figure to FILE (CSV)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from dispatchprof.sim.catalog import load_device

    rows = list(csv.DictReader(open(DATA, encoding="utf-8")))
    if args.only:
        rows = [r for r in rows if r["id"] in args.only.split(",")]
    if args.jobs < 1:
        p.error(f"--jobs must be a positive number of processes, got {args.jobs}")
    cache = load_cache(args.cache)
    if args.as_shipped:
        preds = predict_all(rows, cache, args.cache, chosen=SHIPPED, jobs=args.jobs)
        print_table(rows, {r["id"]: shipped_value(r, preds[r["id"]][SHIPPED]) for r in rows}, args.markdown)
        print("as shipped: every row on its bundled device profile, nothing fitted "
              "(the split is the fitted table's; nothing here was fitted on either part)")
        values = {r["id"]: shipped_value(r, preds[r["id"]][SHIPPED]) for r in rows}
        print_medians(rows, values)
        if args.errors:
            write_errors(args.errors, rows, values)
        return 0
    fitted, preds = fit(rows, cache, args.cache, args.jobs)
    values = {}
    for r in rows:
        pred = preds[r["id"]][fitted.key(r)]
        if r["measure"] == "energy_per_token":
            values[r["id"]] = energy(r, pred, fitted,
                                     fitted.static.get(r["hardware"], load_device(r["hardware"]).static_power_w),
                                     fitted.dynamic.get(r["hardware"], 1.0))
        else:
            values[r["id"]] = pred[0]
    print_table(rows, values, args.markdown)
    print("fitted per device: matrix_memory_efficiency " + ", ".join(f"{k} {v}" for k, v in fitted.mme.items())
          + "; unoverlapped_fraction " + ", ".join(f"{k} {v:g}" for k, v in fitted.unoverlapped.items())
          + "; static_power_w " + ", ".join(f"{k} {v:.0f}" for k, v in fitted.static.items())
          + "; dynamic energy x " + ", ".join(f"{k} {v:g}" for k, v in fitted.dynamic.items())
          + "; weight_only_efficiency " + ", ".join(f"{d} {w} {v}" for (d, w), v in fitted.woe.items()))
    print("fitted per runtime: " + ", ".join(f"{k} " + " ".join(f"{name} {v:g}" for name, v in host)
                                             for k, host in fitted.host.items())
          + "".join(f"; {k} per-sequence time draws {READINGS[v]}" for k, v in fitted.busy.items()))
    print_medians(rows, values)
    if args.errors:
        write_errors(args.errors, rows, values)
    return 0


def write_errors(path: str, rows: list[dict], values: dict) -> None:
    """Every row's measured and predicted figure (``values``, by row id) in the row's own unit
    (s, tok/s or J/token), with its split, group columns and metric family (`FAMILIES`): the
    per-row predictions docs/validation.md's published-rows section is computed from (6 significant
    digits; tests/test_accuracy_published.py recomputes the section from them)."""
    import io

    from dispatchprof.results.files import write_atomic

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "split", "model", "hardware", "tp", "runtime", "family", "metric", "measured", "dispatchprof"])
    for r in rows:
        w.writerow([r["id"], r["split"], r["model"], r["hardware"], r["tp"], r["runtime"], FAMILIES[r["measure"]],
                    r["measure"], f"{float(r['value']):.6g}", f"{values[r['id']]:.6g}"])
    write_atomic(path, buf.getvalue())


def print_table(rows: list[dict], values: dict, markdown: bool) -> None:
    """Every row: measured, predicted (``values``, by row id) and the error."""
    from tabulate import tabulate

    table = [[r["id"], r["split"], r["model"], r["hardware"], int(r["tp"]), r["runtime"], r["weight_dtype"],
              r["batch"], r["prompt_len"], r["output_len"], r["measure"], f"{float(r['value']):.4g}",
              f"{values[r['id']]:.4g}", f"{error(float(r['value']), values[r['id']]):+.1%}"] for r in rows]
    print(tabulate(table, ["id", "split", "model", "device", "tp", "runtime", "weights", "batch", "prompt", "output",
                           "metric", "measured", "predicted", "error"], "github" if markdown else "simple"))
    print()


def print_medians(rows: list[dict], values: dict) -> None:
    """The median |error| of each split, of each metric family on the held-out rows, and of each
    device and runtime over all rows."""
    errs: dict[str, list[float]] = {"fit": [], "held-out": []}
    families: dict[str, list[float]] = {}
    for r in rows:
        e = abs(error(float(r["value"]), values[r["id"]]))
        errs[r["split"]].append(e)
        if r["split"] == "held-out":
            families.setdefault(FAMILIES[r["measure"]], []).append(e)
    for split in ("fit", "held-out"):
        if errs[split]:
            print(f"median |error| on {len(errs[split])} {split} rows: {statistics.median(errs[split]):.1%}")
    for fam, v in sorted(families.items()):
        print(f"  held-out {fam}: median |error| {statistics.median(v):.1%} over {len(v)} rows")
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["hardware"], r["runtime"]), []).append(abs(error(float(r["value"]), values[r["id"]])))
    for (hardware, runtime), v in sorted(groups.items()):
        print(f"  all {hardware} {runtime}: median |error| {statistics.median(v):.1%} over {len(v)} rows")


if __name__ == "__main__":
    sys.exit(main())
