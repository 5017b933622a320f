"""Predict measured serving benchmarks with the shipped defaults, beside AIConfigurator.

Rows: every row of AIConfigurator's silicon sample (the measured serving benchmarks its wheel ships,
read from the installed package in .venv-validation: scripts/setup_validation.sh) that dispatchprof
expresses (`serving_rows.aic_rows`; the others are counted by reason). Each row is simulated as its
benchmark ran it, with nothing fitted: ``dispatchprof serve MODEL --device D --tp N --engine E
--concurrency C`` with the row's lengths and weight dtype, the bundled preset of its engine's
version (its max batch set to the row's ``batch_size``, its step budget as AIConfigurator's
generator sets it for the benchmark: `serving_rows.benchmark_figures`; a row with attention data
parallelism or pipeline stages as ``--ep --dp-attention --pp``, `serving_rows.parallel_of`), ``serving_rows.ROUNDS``
requests per client from a burst (AIConfigurator's benchmark template; the first
``serving_rows.SIMULATED_ROUNDS`` simulated, `closed_loop_means`); the predicted mean TTFT and
mean TPOT are compared with the measured ones. A disaggregated row runs ``simulate_disaggregated``
(``serve --prefill-replicas P --decode-replicas D --decode-tp Td --kv-link L``), each side on the
counted model of its tp under its engine's preset with the figures the benchmark set for that side
(`predict_disagg_row`).
AIConfigurator's own estimate of each row (``cli_estimate``, in .venv-validation:
scripts/aic_estimate.py) runs in the same run. Beside them: TensorRT-LLM's published offline
throughput rows and the sim-to-real vLLM runs under open-loop load (`serving_rows.sim2real_rows`:
TTFT and E2E mean, P90 and P99, mean TPOT).

The split (fit / held-out) is fixed by each row's id (`serving_rows.split_of`). The table gives
median |error| per metric over the held-out rows, per engine and per device, for dispatchprof and
for AIConfigurator over the rows both predict.

    python scripts/validate_serving.py [--cache FILE] [--jobs N] [--limit N] [--markdown]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import itertools
import json
import multiprocessing
import os
import pickle
import re
import statistics
import subprocess
import sys
import time
import warnings

import inferencemax_servers
import prediction_cache
from aic_env import AIC_PYTHON, aic_path
import serving_rows
from serving_rows import ServingRow, aic_rows, published_rows, sim2real_rows

from dispatchprof.serving import Request, generate_requests, prepare_serving, simulate_serving
from dispatchprof.llm.models import build_model
from dispatchprof.serving.engines import engine_preset
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.serving.serve_disagg import simulate_disaggregated

ROOT = prediction_cache.ROOT
METRICS = (("ttft_mean", "TTFT mean"), ("ttft_p90", "TTFT P90"), ("ttft_p99", "TTFT P99"), ("tpot_mean", "TPOT mean"),
           ("e2e_mean", "E2E mean"), ("e2e_p90", "E2E P90"), ("e2e_p99", "E2E P99"),
           ("output_tokens_per_s", "throughput"))
#: Files a count does not depend on: the event loops (aggregated and disaggregated), the engine
#: presets, what they read and render.
NOT_COUNTING = tuple(f"dispatchprof/serving/{name}" for name in (
    "engine.py", "scheduler.py", "disagg.py", "serve_disagg.py", "engines.py", "engines.yaml", "metrics.py",
    "requests.py", "datasets.py", "render.py")) + tuple(f"dispatchprof/cli/{name}" for name in os.listdir(os.path.join(ROOT, "dispatchprof", "cli")))
#: Files no serving prediction reads: the training simulator (dispatchprof.train; only the CLI's
#: ``train`` command imports it), so a refit of its factors keeps the counted setups and predictions.
TRAINING = tuple(f"dispatchprof/train/{name}" for name in os.listdir(os.path.join(ROOT, "dispatchprof", "train")))
#: The version of the counting code: the library less `NOT_COUNTING` and `TRAINING`.
COUNT_VERSION = prediction_cache.code_version((), skip=NOT_COUNTING + TRAINING)


def silicon_sample(python: str) -> str:
    """The path of silicon_sample.csv in the validation environment's aiconfigurator-core."""
    return aic_path(python, "systems", "silicon_sample.csv")


def counted_setup(r: ServingRow, folder: str | None, counts=None):
    """The counted model of a row's `ServingRow.setup_key` (host costs left to the engine preset),
    kept in ``folder`` as a pickle stamped with the counting code's version: what engines.yaml
    says does not change a count, so a preset change re-simulates without counting again.
    ``counts`` (a `CountMemo` of the row's model) shares one count among setups of other tp."""
    path = None
    if folder:
        path = setup_path(r, folder)
        if os.path.exists(path):
            with open(path, "rb") as f:
                return pickle.load(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = prepare_serving(r.model if counts is None else counts.model, r.device, weight_dtype=r.weight_dtype,
                                kv_dtype=r.kv_dtype, runtime="serving", tp=r.tp, engine=r.engine,
                                engine_version=r.engine_version, ep=r.ep, dp_attention=r.dp_attention,
                                pp=r.pp, counts=counts)
    if path:
        os.makedirs(folder, exist_ok=True)
        prediction_cache.save_bytes(pickle.dumps(setup), path)
    return setup


def predict_disagg_group(rows: list[ServingRow], folder: str | None, memo: CountMemo | LazyMemo | None = None,
                         setups: dict | None = None) -> dict[str, dict]:
    """Disaggregated rows of one model, device and dtypes: each side's setup (`ServingRow.side_rows`)
    counted once for every tp (one `CountMemo`, a `LazyMemo`'s built when a side is first counted)
    and kept in ``setups`` (side setup key -> setup; pass one dict to share them over calls)."""
    lazy = memo if isinstance(memo, LazyMemo) else LazyMemo(rows[0].model, memo)
    setups = {} if setups is None else setups
    out = {}
    for r in rows:
        try:
            sides = []
            for side in r.side_rows():
                if side.setup_key not in setups:
                    counted = folder and os.path.exists(setup_path(side, folder))
                    setups[side.setup_key] = counted_setup(side, folder, None if counted else lazy.get())
                sides.append(setups[side.setup_key])
        except ValueError as e:
            out[r.id] = {"error": str(e)}
            continue
        out[r.id] = predict_disagg_row(r, *sides)
    return out


def predict_row(r: ServingRow, setup, **figures) -> dict:
    """One row on a counted setup, under its engine's preset on its device (``figures`` replace
    the preset's). Without chunked prefill, a prompt that does not fit in the step budget beside
    the other clients' decodes would have run alone, one request at a time, which a row's
    measured TPOT (growing with its clients) shows it did not: such a row is simulated with
    chunked prefill."""
    capacity = setup.capacity_bytes
    preset = engine_preset(r.engine, r.engine_version, memory_bytes=capacity, device_name=setup.device)
    preset = dataclasses.replace(preset, **{**r.engine_figures, **figures})
    chunked = preset.chunked_prefill or r.prompt_len + (r.concurrency or 1) - 1 > preset.max_batched_tokens
    try:
        result = simulate_serving(dataclasses.replace(setup, engine=preset), requests_of(r), concurrency=r.concurrency,
                                  max_seqs=r.max_seqs, chunked_prefill=chunked, prefix_hit=r.prefix_hit)
    except ValueError as e:
        return {"error": str(e)}
    s = result.summary
    if r.rounds:
        return closed_loop_means(result.requests, r.concurrency, r.rounds)
    return {"ttft_mean": s.ttft_s.mean, "ttft_p90": s.ttft_s.p90, "ttft_p99": s.ttft_s.p99, "tpot_mean": s.tpot_s.mean,
            "e2e_mean": s.e2e_s.mean, "e2e_p90": s.e2e_s.p90, "e2e_p99": s.e2e_s.p99,
            "output_tokens_per_s": s.output_tokens_per_s}


def predict_disagg_row(r: ServingRow, prefill, decode) -> dict:
    """A disaggregated row on the counted setups of its two sides (`ServingRow.side_rows`): each
    side under its engine's preset with its batch limit and the figures its benchmark set, chunked
    as `predict_row` decides for a side of that many sequences (a decode side's budget of one token
    per sequence chunks a prompt it recomputes after a preemption)."""
    setups = []
    for setup, side in zip((prefill, decode), r.side_rows()):
        preset = engine_preset(r.engine, r.engine_version, memory_bytes=setup.capacity_bytes, device_name=setup.device)
        preset = dataclasses.replace(preset, max_seqs=side.max_seqs, **side.engine_figures)
        chunked = preset.chunked_prefill or r.prompt_len + side.max_seqs - 1 > preset.max_batched_tokens
        setups.append(dataclasses.replace(setup, engine=dataclasses.replace(preset, chunked_prefill=chunked)))
    try:
        result = simulate_disaggregated(*setups, requests_of(r), prefill_replicas=r.disagg.prefill.workers,
                                        decode_replicas=r.disagg.decode.workers, kv_link=r.disagg.kv_link,
                                        concurrency=r.concurrency)
    except ValueError as e:
        return {"error": str(e)}
    return closed_loop_means(result.requests, r.concurrency, r.rounds)


def closed_loop_means(requests, clients: int, rounds: int) -> dict:
    """Mean TTFT and TPOT of a benchmark of ``rounds`` requests per client from a simulation of
    fewer rounds: the requests in send order, ``clients`` per round. The last simulated round is
    the benchmark's last: no request follows it, so its decodes run without the next round's
    prefills beside them. The round before it stands for every round not simulated (the schedule
    has settled by then, `serving_rows.SIMULATED_ROUNDS`)."""
    ordered = sorted(requests, key=lambda q: q.arrival_s)
    simulated = len(ordered) // clients
    out = {}
    for metric, field in (("ttft_mean", "ttft_s"), ("tpot_mean", "tpot_s")):
        means = [statistics.mean(getattr(q, field) for q in ordered[k * clients:(k + 1) * clients])
                 for k in range(simulated)]
        steady = means[-2] if simulated > 1 else means[-1]
        out[metric] = (sum(means) + (rounds - simulated) * steady) / rounds
    return out


def requests_of(r: ServingRow) -> list[Request]:
    """A row's requests: its stages one after another at a constant rate each, or all at 0 (their
    lengths drawn as vLLM's benchmark_serving.py draws them where ``range_ratio`` < 1: `random_lengths`)."""
    if r.range_ratio < 1:
        return [Request(0.0, prompt, output) for prompt, output in zip(*random_lengths(r))]
    if not r.stages:
        return [Request(0.0, r.prompt_len, r.output_len)] * r.num_requests
    out, start = [], 0.0
    for rate, seconds in r.stages:
        out += [dataclasses.replace(q, arrival_s=start + q.arrival_s)
                for q in generate_requests(rate, round(rate * seconds), r.prompt_len, r.output_len, arrivals="fixed")]
        start += seconds
    return out


def random_lengths(r: ServingRow, seed: int = 0) -> tuple[list[int], list[int]]:
    """Prompt and output lengths of a row's requests as benchmark_serving.py's random dataset draws
    them after ``np.random.seed(seed)`` (its --seed, 0 unless set): every prompt length, then every
    output length, uniform over [int(range_ratio x length), length] (`serving_rows`, InferenceMAX's runs)."""
    import numpy as np
    rng = np.random.RandomState(seed)
    return tuple([int(n) for n in rng.randint(int(length * r.range_ratio), length + 1, size=r.num_requests)]
                 for length in (r.prompt_len, r.output_len))


def architecture(model: str) -> str:
    """A key shared by the catalog models of one architecture (DeepSeek-R1 and -V3 have one config):
    their counts are the same (`CountMemo`)."""
    from dispatchprof.llm.catalog import load_config
    try:
        return json.dumps(load_config(model).to_dict(), sort_keys=True, default=str)
    except (KeyError, ValueError):
        return model


class LazyMemo:
    """A `CountMemo` of ``model`` built when a setup is first counted (a setup kept in --setups needs
    none), or the one given."""

    def __init__(self, model: str, memo: CountMemo | None = None) -> None:
        self.name, self._memo = model, memo

    def get(self) -> CountMemo:
        if self._memo is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._memo = CountMemo(build_model(self.name, generator=True))
        return self._memo


def _groups_of_architecture(task: tuple):
    """(row id -> prediction, group label, seconds, CPU seconds) per group of one architecture, one
    `CountMemo` among them: its chains are counted once for every device, tp, dtype and layout."""
    groups, folder = task
    memo = LazyMemo(groups[0][0].model)
    for rows in groups:
        start, cpu = time.perf_counter(), time.process_time()
        label = "/".join(str(v) for v in rows[0].setup_key)
        if rows[0].disagg is not None:           # one row at a time (a row of thousands of clients takes minutes)
            sides: dict = {}
            for r in rows:
                yield predict_disagg_group([r], folder, memo, sides), r.id, \
                    time.perf_counter() - start, time.process_time() - cpu
                start, cpu = time.perf_counter(), time.process_time()
            continue
        counted = folder and os.path.exists(setup_path(rows[0], folder))
        try:                                     # one row at a time: a slow group keeps the rows it did
            setup = counted_setup(rows[0], folder, None if counted else memo.get())
        except ValueError as e:
            yield {r.id: {"error": str(e)} for r in rows}, label, time.perf_counter() - start, time.process_time() - cpu
            continue
        yield {}, f"{label} counted", time.perf_counter() - start, time.process_time() - cpu
        for r in rows:
            start, cpu = time.perf_counter(), time.process_time()
            yield {r.id: predict_row(r, setup)}, r.id, time.perf_counter() - start, time.process_time() - cpu


def _architecture_task(task: tuple) -> list:
    return list(_groups_of_architecture(task))


def setup_path(r: ServingRow, folder: str) -> str:
    """Where `counted_setup` keeps the counted model of ``r``."""
    return os.path.join(folder, "-".join(str(v) for v in r.setup_key) + f"-{COUNT_VERSION}.pickle")


def predict_all(rows: list[ServingRow], cache: dict, path: str | None, jobs: int,
                setups: str | None = None) -> dict[str, dict]:
    """dispatchprof's prediction of every row (from ``cache`` where it has it): the rows of one
    counted model (`ServingRow.setup_key`) together, the groups of one architecture in one task
    sharing one `CountMemo` (a count does not depend on the device, tp, dtypes or layout), tasks in
    ``jobs`` processes; the cache is saved to ``path`` after every group (one process) or task."""
    todo = collections.defaultdict(list)
    for r in rows:
        if r.id not in cache:
            todo[r.setup_key].append(r)
    arches = collections.defaultdict(list)
    for g in sorted(todo.values(), key=len, reverse=True):
        arches[architecture(g[0].model)].append(g)
    tasks = [(g, setups) for g in sorted(arches.values(), key=lambda gs: -sum(map(len, gs)))]
    start, k = time.perf_counter(), 0
    if jobs > 1 and len(tasks) > 1:
        done = (out for outs in _map(_architecture_task, tasks, jobs) for out in outs)
    else:
        done = (out for task in tasks for out in _groups_of_architecture(task))
    for out, label, seconds, cpu in done:
        k += len(out)
        cache.update(out)
        if path and out:
            prediction_cache.save_cache(cache, path)
        print(f"  {k}/{sum(map(len, todo.values()))} rows of {len(todo)} counted models "
              f"({time.perf_counter() - start:.0f} s; {label}: {seconds:.0f} s, {cpu:.0f} CPU s)", file=sys.stderr)
    return {r.id: cache[r.id] for r in rows}


def _map(fn, items: list, jobs: int):
    """``fn`` over ``items``, in ``jobs`` forked processes (results as they come) or in this one."""
    if jobs > 1 and len(items) > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            yield from pool.imap_unordered(fn, items)
    else:
        yield from map(fn, items)


#: The host figures ``--fit-hosts`` tries for each engine (microseconds), every pair.
HOST_GRID = {"step_host_us": (100, 300), "sequence_host_us": (0, 10, 40)}
#: The eager issue time per kernel ``--fit-eager`` tries for each engine (microseconds), the rest as shipped.
EAGER_GRID = {"eager_kernel_host_us": (0, 10, 20, 30, 40, 60, 80)}


def _fit_task(task: tuple) -> dict[str, dict]:
    rows, folder, grid = task
    setup = counted_setup(rows[0], folder)
    points = list(itertools.product(*grid.values()))
    return {r.id: {point: predict_row(r, setup, **dict(zip(grid, point))) for point in points} for r in rows}


def fit_hosts(rows: list[ServingRow], folder: str | None, jobs: int, most: int,
              grid: dict[str, tuple] = HOST_GRID) -> dict[str, tuple]:
    """Each engine's point of ``grid`` (engine figure -> values tried, every combination) with the
    least mean error over its fit rows (at most ``most`` of them, in id order; a row's error is the
    mean of its metrics' |error|, capped at 1): engine -> (point, mean error, rows, every point's mean error)."""
    chosen = collections.defaultdict(list)
    for r in sorted(rows, key=lambda r: r.id):
        if r.split == "fit" and len(chosen[r.engine]) < most:
            chosen[r.engine].append(r)
    groups = collections.defaultdict(list)
    for members in chosen.values():
        for r in members:
            groups[r.setup_key].append(r)
    preds: dict[str, dict] = {}
    for out in _map(_fit_task, [(g, folder, grid) for g in groups.values()], jobs):
        preds.update(out)
    best = {}
    for engine, members in chosen.items():
        def objective(point: tuple) -> float:
            errs = []
            for r in members:
                p = preds[r.id][point]
                errs.append(min(1.0, statistics.mean(abs(error(p[m], v)) for m, v in r.measured.items())
                                if "error" not in p else 1.0))
            return statistics.mean(errs)
        errors = {pt: objective(pt) for pt in sorted(preds[members[0].id])}
        point = min(errors, key=lambda pt: (errors[pt], pt))
        best[engine] = (point, errors[point], len(members), errors)
    return best


def aic_predictions(rows: list[ServingRow], python: str) -> dict[str, dict]:
    """AIConfigurator's estimate of every row (scripts/aic_estimate.py in the validation environment)."""
    lines = "".join(json.dumps(r.raw) + "\n" for r in rows if r.source.startswith("aiconfigurator"))
    script = os.path.join(ROOT, "scripts", "aic_estimate.py")
    out = subprocess.run([python, script], input=lines, capture_output=True, text=True, check=True)
    preds = {}
    for line in out.stdout.splitlines():
        d = json.loads(line)
        preds[d["id"]] = ({"error": d["error"]} if "error" in d else
                          {"ttft_mean": d["ttft_ms"] / 1e3, "tpot_mean": d["tpot_ms"] / 1e3})
    return preds


def error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def median_abs(values: list[float]) -> str:
    return f"{100 * statistics.median(abs(v) for v in values):.1f}%" if values else "-"


def table(rows: list[ServingRow], ours: dict, theirs: dict, markdown: bool) -> str:
    """Median |error| per group and metric: dispatchprof over the rows it predicts, then both tools
    over the rows both predict (AIConfigurator estimates the silicon-sample rows)."""
    groups: dict[str, list[ServingRow]] = collections.OrderedDict()
    groups["held-out"] = [r for r in rows if r.split == "held-out"]
    for key in ("engine", "device", "model", "layout", "source"):
        for value in sorted({getattr(r, key) for r in rows}):
            groups[f"held-out, {value}"] = [r for r in groups["held-out"] if getattr(r, key) == value]
    groups["fit"] = [r for r in rows if r.split == "fit"]
    head = ["group", "metric", "rows", "dispatchprof", "both", "dispatchprof", "AIConfigurator"]
    lines = []
    for label, members in groups.items():
        for m, name in METRICS:
            measured = [r for r in members if m in r.measured]
            ok = [r for r in measured if m in ours[r.id]]
            both = [r for r in ok if m in theirs.get(r.id, {})]
            if not measured:
                continue
            lines.append([label, name, f"{len(ok)}/{len(measured)}",
                          median_abs([error(ours[r.id][m], r.measured[m]) for r in ok]), str(len(both)),
                          median_abs([error(ours[r.id][m], r.measured[m]) for r in both]),
                          median_abs([error(theirs[r.id][m], r.measured[m]) for r in both])])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        return "\n".join(out + ["| " + " | ".join(cells) + " |" for cells in lines])
    widths = [max(len(c) for c in col) for col in zip(head, *lines)]
    return "\n".join("  ".join(f"{c:<{w}}" if i < 2 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths)))
                     for cells in [head, *lines])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", help="JSON file of dispatchprof's predictions (read and extended)")
    p.add_argument("--setups", metavar="DIR", help="keep the counted models here (re-simulating skips counting)")
    p.add_argument("--jobs", type=int, default=1, help="processes simulating in parallel")
    p.add_argument("--limit", type=int, help="only the first N expressible silicon-sample rows (of those --match "
                                             "keeps; a quick look)")
    p.add_argument("--match", metavar="REGEX", help="only the rows whose id matches REGEX (re.search)")
    p.add_argument("--skip-models", metavar="NAME,...", default="",
                   help="leave out the rows of these catalog models (e.g. deepseek-r1,deepseek-v3,gpt-oss-120b)")
    p.add_argument("--aic-python", default=AIC_PYTHON, help="the validation environment's python")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--errors", metavar="FILE", help="write every row's errors to FILE (CSV)")
    p.add_argument("--cached-only", action="store_true",
                   help="only the rows --cache already predicts (tables of a run stopped part way)")
    p.add_argument("--fit-hosts", type=int, metavar="N",
                   help="fit each engine's host figures on at most N of its fit rows (HOST_GRID) and stop")
    p.add_argument("--fit-eager", type=int, metavar="N",
                   help="fit each engine's eager_kernel_host_us on at most N of its fit rows (EAGER_GRID) and stop")
    args = p.parse_args()
    rows, skipped = aic_rows(silicon_sample(args.aic_python))
    expressed = len(rows)
    try:
        wanted = re.compile(args.match or "")
    except re.error as e:
        p.error(f"--match: not a regular expression ({e})")
    skip = {name for name in args.skip_models.split(",") if name}
    rows = [r for r in rows if wanted.search(r.id) and r.model not in skip]  # --match, then --limit of those
    rows = rows[:args.limit] if args.limit else rows
    rows += [r for r in published_rows(os.path.join(ROOT, "scripts", "data", "published_serving.csv"))
             + sim2real_rows(os.path.join(ROOT, "scripts", "data", "sim2real.csv")) if wanted.search(r.id)]
    for most, grid in ((args.fit_hosts, HOST_GRID), (args.fit_eager, EAGER_GRID)):
        if most:
            for engine, (point, err, n, errors) in fit_hosts(rows, args.setups, args.jobs, most, grid).items():
                print(f"{engine}: " + ", ".join(f"{'/'.join(map(str, pt))}: {100 * e:.1f}%" for pt, e in errors.items()))
                figures = ", ".join(f"{name} {value}" for name, value in zip(grid, point))
                print(f"{engine}: {figures}: mean error {100 * err:.1f}% over {n} fit rows")
            return
    version = prediction_cache.code_version((counted_setup, _groups_of_architecture, predict_row,
                                             predict_disagg_group, predict_disagg_row, requests_of, random_lengths,
                                             closed_loop_means, serving_rows, inferencemax_servers), skip=TRAINING)
    cache = prediction_cache.load_cache(args.cache, version, "validate_serving.py")
    if args.cached_only:
        if not args.cache:
            p.error("--cached-only needs --cache FILE")
        rows = [r for r in rows if r.id in cache]
    start = time.perf_counter()
    ours = predict_all(rows, cache, args.cache, args.jobs, args.setups)
    theirs = aic_predictions(rows, args.aic_python)
    reasons = collections.Counter(s.reason for s in skipped)
    unpredicted = collections.Counter(ours[r.id]["error"].split(":")[0][:80] for r in rows if "error" in ours[r.id])
    print(f"AIConfigurator silicon sample: {expressed + len(skipped)} rows, {expressed} expressed; with TensorRT-LLM's "
          f"published rows and the sim-to-real runs {len(rows)} predicted here ({sum(r.split == 'fit' for r in rows)} fit, "
          f"{sum(r.split == 'held-out' for r in rows)} held-out); "
          f"as shipped, nothing fitted ({time.perf_counter() - start:.0f} s)")
    print(table(rows, ours, theirs, args.markdown))
    print("not expressed:")
    for reason, n in reasons.most_common():
        print(f"  {n:5d}  {reason}")
    if unpredicted:
        print("expressed, not predicted by dispatchprof:")
        for reason, n in unpredicted.most_common():
            print(f"  {n:5d}  {reason}")
    failed = collections.Counter(theirs[r.id]["error"][:80] for r in rows if "error" in theirs.get(r.id, {}))
    if failed:
        print("not predicted by AIConfigurator:")
        for reason, n in failed.most_common():
            print(f"  {n:5d}  {reason}")
    if args.errors:
        write_errors(args.errors, rows, ours, theirs)


def write_errors(path: str, rows: list[ServingRow], ours: dict, theirs: dict) -> None:
    """Every row's measured and predicted figures (ms) and errors."""
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "split", "engine", "device", "model", "tp", "weights", "isl", "osl", "concurrency", "metric",
                "measured", "dispatchprof", "aiconfigurator"])                     # ms, or output tokens/s
    for r in rows:
        for m, _ in METRICS:
            a, b = ours[r.id].get(m), theirs.get(r.id, {}).get(m)
            if m not in r.measured:
                continue
            scale = 1 if m == "output_tokens_per_s" else 1e3
            w.writerow([r.id, r.split, r.engine, r.device, r.model, r.tp, r.weight_dtype or "bf16", r.prompt_len,
                        r.output_len, r.concurrency or "", m, f"{scale * r.measured[m]:.4g}",
                        "" if a is None else f"{scale * a:.4g}", "" if b is None else f"{scale * b:.4g}"])
    from dispatchprof.results.files import write_atomic
    write_atomic(path, buf.getvalue())


if __name__ == "__main__":
    main()
