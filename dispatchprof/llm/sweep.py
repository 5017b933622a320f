"""Sweeps: every combination of models, devices, batch sizes, prompt lengths and new-token
counts, in parallel.

Each model is one task: it builds the model once and fits its shape-generic stream
(dispatchprof.llm.shape_generic: a few counts, checked at a held-out shape), then answers every
(batch, prompt_len, new_tokens) of the sweep from the stream's exact polynomials; so a sweep runs
one task per model and returns ``models x batches x prompt_lens x new_tokens x devices`` rows.
A decoder's shapes are simulated all at once by the vector simulator, every decode step summed
(dispatchprof.llm.sweep_vector) where the options allow it (eager, no tp); otherwise, and for
encoders and encoder-decoders, each shape's evaluated profile is simulated (`run_shape`). Shapes
outside the stream's region (lengths under 32 tokens, a MoE model's batch sizes that are not
multiples of its `batch_step`), and every shape of a model whose fit failed, are counted
directly; a failed fit's reason comes back as a warning. Tasks go to any
``concurrent.futures.Executor``: a local process pool by default, or, for a cluster, a Dask
client's ``get_executor()``; the task function and its arguments are plain picklable values
(device names or YAML paths). A combination that does not fit
in a device's memory is kept, with ``fits=False``.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import math
import multiprocessing
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from dispatchprof.llm.catalog import load_config
from dispatchprof.llm.forward import generates, model_kind, profile_forward
from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.models import MODEL_DTYPES, build_model
from dispatchprof.llm.shape_generic import DecoderStream, ForwardStream
from dispatchprof.llm.sweep_vector import decoder_rows
from dispatchprof.report.sweep import mark_known_energy, mark_pareto
from dispatchprof.results.sweep import SweepRow
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.runtime import check_runtime



@dataclass(frozen=True)
class Shape:
    """One task of a sweep: what is counted once."""

    model: str
    batch: int
    prompt_len: int
    new_tokens: int


#: Model shapes one sweep may count: far above a useful grid, low enough to catch a typo (each shape
#: is counted once, seconds to minutes: 4,096 of them already take hours).
MAX_TASKS = 4096


def check_sweep_size(models: Sequence[str], batches: Sequence[int], prompt_lens: Sequence[int],
                     new_tokens: Sequence[int]) -> int:
    """The number of model shapes of a sweep, computed from the lengths before anything is built;
    above `MAX_TASKS` raises ValueError with the reason."""
    tasks = math.prod(map(len, (models, batches, prompt_lens, new_tokens)))
    if tasks > MAX_TASKS:
        raise ValueError(f"the sweep has {tasks:,} model shapes ({len(models)} models x {len(batches)} batch sizes x "
                         f"{len(prompt_lens)} prompt lengths x {len(new_tokens)} new-token counts); at most "
                         f"{MAX_TASKS:,}, since each is counted once and 4,096 already take hours (split it)")
    return tasks


def shapes(models: Sequence[str], batches: Sequence[int], prompt_lens: Sequence[int],
           new_tokens: Sequence[int]) -> list[Shape]:
    """Every combination, in the order of the arguments (models outermost)."""
    return [Shape(*c) for c in itertools.product(models, batches, prompt_lens, new_tokens)]


def run_model(model_name: str, todo: Sequence[Shape], devices: Sequence[str], dtype: str = "bf16",
              weight_dtype: str | None = None, bound: bool = False, runtime: str = "eager"
              ) -> tuple[list[list[SweepRow]], list[str]]:
    """One task: build ``model_name`` once, fit its stream, and give the rows of every shape of
    ``todo`` (one list per shape, one row per device), with the reasons a regime was counted
    directly."""
    import torch

    torch.set_num_threads(1)            # tasks run side by side: one thread each
    scenarios = scenarios_of(list(devices))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(model_name, dtype=MODEL_DTYPES[dtype])
        decoder = generates(model)
        stream = DecoderStream(model) if decoder else ForwardStream(model, model_kind(model) == "encoder-decoder")
        fast, _ = decoder_rows(stream, todo, scenarios, dtype, weight_dtype, bound, runtime) if decoder else ({}, "")
        rows = [fast[k] if k in fast else run_shape(s, scenarios, dtype, weight_dtype, bound, runtime, model=model,
                                                    stream=stream) for k, s in enumerate(todo)]
    return rows, [f"{model_name}: every shape counted directly ({stream.reason})"] if stream.reason else []


def run_shape(shape: Shape, devices: Any, dtype: str = "bf16", weight_dtype: str | None = None,
              bound: bool = False, runtime: str = "eager", *, model: Any = None,
              stream: DecoderStream | ForwardStream | None = None) -> list[SweepRow]:
    """Profile one shape and simulate it on every device: one row per device. ``model`` (built
    from ``shape.model`` when None) and its ``stream`` (none: counted directly) as in `run_model`."""
    if model is None:
        import torch

        torch.set_num_threads(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build_model(shape.model, dtype=MODEL_DTYPES[dtype])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not generates(model):
            return _forward_rows(model, shape, devices, dtype, weight_dtype, bound, runtime, stream)
        g = profile_generation(model, shape.batch, shape.prompt_len, shape.new_tokens, devices=devices,
                               weight_dtype=weight_dtype, bound=bound, runtime=runtime, stream=stream)
    rows = []
    for d in g.devices.values():
        caps = [c for c in d.capacity if c.capacity_bytes is not None]
        fits = None if not caps else all(c.fits for c in caps)
        rows.append(SweepRow(shape.model, d.name, "decoder", dtype, shape.batch, shape.prompt_len, shape.new_tokens,
                             d.total_time_s, d.prefill.energy_j + d.decode.energy_j, d.tokens_per_s,
                             d.energy_per_token_j, d.ttft_s, d.tpot_mean_s if shape.new_tokens > 1 else None,
                             max(c.required_bytes for c in d.capacity),
                             sum(c.capacity_bytes for c in caps) if caps else None, fits, runtime=runtime))
    return rows


def _forward_rows(model, shape: Shape, devices, dtype, weight_dtype, bound, runtime, stream) -> list[SweepRow]:
    f = profile_forward(model, shape.batch, shape.prompt_len, shape.new_tokens, devices=devices,
                        weight_dtype=weight_dtype, bound=bound, runtime=runtime, stream=stream)
    rows = []
    for name, sim in f.simulations.items():
        t = sim.total
        rows.append(SweepRow(shape.model, name, f.kind, dtype, shape.batch, shape.prompt_len, shape.new_tokens,
                             t.time_s, t.energy_j, f.tokens / t.time_s if t.time_s else 0.0,
                             t.energy_j / f.tokens, None, None, None, None, sim.fits(), runtime=runtime))
    return rows


def default_executor(tasks: int) -> cf.Executor:
    """A process pool of min(tasks, CPUs) workers, started with 'spawn' (safe with torch's threads)."""
    workers = max(1, min(tasks, os.cpu_count() or 1))
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def sweep(models: Sequence[str], devices: Sequence[str], batches: Sequence[int] = (1,),
          prompt_lens: Sequence[int] = (128,), new_tokens: Sequence[int] = (32,), *, dtype: str = "bf16",
          weight_dtype: str | None = None, bound: bool = False, executor: cf.Executor | None = None,
          progress: Callable[[int, int], None] | None = None, runtime: str = "eager") -> list[SweepRow]:
    """Every combination (see the module docstring); rows ordered as `shapes` then devices,
    with each device's Pareto front marked. ``executor``: any concurrent.futures.Executor (a
    process pool of this machine by default, shut down at the end; one given is left open).
    ``progress(done, total)`` is called as tasks finish."""
    if not models or not devices:
        raise ValueError("sweep() needs at least one model and one device")
    if dtype not in MODEL_DTYPES:
        raise ValueError(f"sweep(dtype=...) must be one of {tuple(MODEL_DTYPES)}, got {dtype!r}")
    check_runtime(runtime)
    check_sweep_size(models, batches, prompt_lens, new_tokens)
    scenarios_of(list(devices))                          # unknown devices and bad YAML fail here, at once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in dict.fromkeys(models):
            load_config(m)                               # so do bad model names and configs
    todo = shapes(models, batches, prompt_lens, new_tokens)
    per_model = {m: [k for k, s in enumerate(todo) if s.model == m] for m in dict.fromkeys(models)}
    own = executor is None
    pool = default_executor(len(per_model)) if own else executor
    results: dict[int, list[SweepRow]] = {}
    try:
        futures = {pool.submit(run_model, m, [todo[k] for k in ks], list(devices), dtype, weight_dtype, bound,
                               runtime): m for m, ks in per_model.items()}
        for fut in cf.as_completed(futures):
            rows, reasons = fut.result()
            results.update(zip(per_model[futures[fut]], rows))
            for reason in reasons:
                warnings.warn(f"dispatchprof sweep: {reason}", stacklevel=2)
            if progress is not None:
                progress(len(results), len(todo))
    finally:
        if own:
            pool.shutdown(cancel_futures=True)
    rows = [r for k in range(len(todo)) for r in results[k]]
    scenarios = scenarios_of(list(devices))
    return mark_pareto(mark_known_energy(rows, {n: scenarios[n].devices for n in scenarios}))


__all__ = ["Shape", "SweepRow", "run_model", "run_shape", "shapes", "sweep"]
