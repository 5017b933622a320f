"""Serving engines as data: the scheduler defaults and host costs of vLLM, SGLang and
TensorRT-LLM at named versions, read from ``engines.yaml`` beside this file.

A preset holds what an engine decides on its own when a benchmark starts it with its defaults:

- ``policy`` (`dispatchprof.serving.scheduler`): ``mixed`` or ``prefill_first``;
- ``max_seqs``, ``max_batched_tokens``, ``chunked_prefill``, ``block_size`` (KV tokens per block),
  ``memory_utilization`` and ``memory_of``: the KV cache gets capacity x utilization - weights
  (``total``: vLLM, SGLang) or (capacity - weights) x utilization (``free``: TensorRT-LLM's
  share of the memory left after loading), ``reserve_output`` (admission reserves a request's
  whole KV cache);
- ``cuda_graph_sizes``: the batch sizes captured as CUDA graphs; a step of T tokens with
  T <= the largest runs the graph of the next size up, so its GEMMs compute the padded tokens
  (``cuda_graph_steps``: ``any`` step, or ``decode`` steps only);
- ``step_host_us`` and ``sequence_host_us``: the engine's host work per step and per sequence of
  a step (scheduling, input preparation, sampling, detokenising), and ``overlap_host``: whether
  that work overlaps the previous step's GPU work (step time = max(host, device)) or precedes it
  (host + device); an engine that overlaps it also plans each step while the one before runs, so a
  request arriving during a step joins the step after the next (``SchedulerConfig.plan_ahead``);
  ``linear_attention_overlap``: whether that overlap stays on for a model with linear-attention
  layers (Qwen3.5's gated delta-nets: SGLang's default mamba radix cache turns its overlap
  scheduler off; `dispatchprof.serving.serve.ServingSetup.overlaps` applies it);
- ``state_pool``, ``state_memory_ratio``, ``state_slots_per_seq``: where the per-sequence states of
  a model with linear-attention layers live (`dispatchprof.serving.state_memory`: ``shared`` with
  the KV blocks, a ``split`` pool of ratio / (1 + ratio) of the cache memory holding
  slots-per-sequence states per running sequence, or ``reserved`` for max_seqs sequences);
- ``eager_kernel_host_us``: the host time to issue each kernel of a step that runs without a CUDA
  graph (`EnginePreset.graphed`: a step carrying a prompt where only decode steps are captured, or
  more tokens than the largest captured size): the model's forward is then Python issuing its
  kernels one by one while the GPU runs them, so such a step takes at least kernels x this
  (`EnginePreset.step_s`);
- ``prefix_caching``: whether the engine caches prompt prefixes by default;
- ``batch_wait_steps`` and ``batch_wait_tokens_ratio``: TensorRT-LLM's batch waiting (scheduler
  rule 4, `dispatchprof.serving.scheduler`): prompts are held back for up to that many steps
  until a step holds that share of ``max_batched_tokens`` (0: off).

``memory_rules`` change figures on devices with at least ``min_memory_gib`` of memory, unless the
device's name contains ``unless_name_contains`` (vLLM picks larger batches on 70 GiB GPUs other
than the A100). Every figure names its source in ``sources``: the engine's code or docs
at that version, or the rows it was fitted on. Loading is strict: an unknown engine, version or
field, or a figure without a source, raises `EngineError` naming the file, engine, version and field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

from dispatchprof.results.files import read_text
from dispatchprof.serving.scheduler import POLICIES
from dispatchprof.serving.state_memory import STATE_POOLS, StatePool

ENGINES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engines.yaml")
GRAPH_STEPS = ("any", "decode")
MEMORY_OF = ("total", "free")
GIB = 1024 ** 3


class EngineError(ValueError):
    """An unknown engine or version, or a malformed engine file."""


@dataclass(frozen=True)
class EnginePreset:
    """One engine at one version, resolved for one device (units in the names)."""

    engine: str
    version: str
    policy: str
    max_seqs: int
    max_batched_tokens: int
    chunked_prefill: bool
    block_size: int
    memory_utilization: float
    memory_of: str
    reserve_output: bool
    cuda_graph_sizes: tuple[int, ...]
    cuda_graph_steps: str
    step_host_us: float
    sequence_host_us: float
    overlap_host: bool
    linear_attention_overlap: bool
    prefix_caching: bool
    eager_kernel_host_us: float
    state_pool: str
    state_memory_ratio: float
    state_slots_per_seq: int
    batch_wait_steps: int
    batch_wait_tokens_ratio: float
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"

    @property
    def states(self) -> StatePool:
        """Where this engine keeps linear-attention states (`dispatchprof.serving.state_memory`)."""
        return StatePool(self.state_pool, self.state_memory_ratio, self.state_slots_per_seq)

    def padded_tokens(self, tokens: int, decode_only: bool) -> int:
        """Tokens a step of ``tokens`` runs through its CUDA graph: the smallest captured size
        >= tokens, or ``tokens`` itself when no graph runs the step."""
        if not self.cuda_graph_sizes or not self.graphed(tokens, decode_only):
            return tokens
        return next(s for s in self.cuda_graph_sizes if s >= tokens)

    def graphed(self, tokens: int, decode_only: bool) -> bool:
        """Whether a step of ``tokens`` runs as a CUDA graph: a captured kind of step (any step, or
        decode steps only) of at most the largest captured size (any size where none is listed)."""
        if self.cuda_graph_steps == "decode" and not decode_only:
            return False
        return not self.cuda_graph_sizes or tokens <= self.cuda_graph_sizes[-1]

    def host_s(self, sequences: int) -> float:
        """Host seconds of a step of ``sequences`` sequences."""
        return (self.step_host_us + sequences * self.sequence_host_us) * 1e-6

    def step_s(self, device_s: float, sequences: int, eager_kernels: int = 0, overlap: bool | None = None) -> float:
        """Step time from the device's time and the host's (module docstring): a step that issues
        ``eager_kernels`` kernels one by one (not graphed) takes at least that many times
        eager_kernel_host_us, as the device runs them while the host issues the next. ``overlap``
        (None: ``overlap_host``) says whether the host's work overlaps the device's."""
        host = self.host_s(sequences)
        device_s = max(device_s, eager_kernels * self.eager_kernel_host_us * 1e-6)
        return max(host, device_s) if (self.overlap_host if overlap is None else overlap) else host + device_s


_TYPES: dict[str, tuple[type, ...]] = {
    "policy": (str,), "max_seqs": (int,), "max_batched_tokens": (int,), "chunked_prefill": (bool,),
    "block_size": (int,), "memory_utilization": (int, float), "memory_of": (str,), "reserve_output": (bool,),
    "cuda_graph_sizes": (list,), "cuda_graph_steps": (str,), "step_host_us": (int, float),
    "sequence_host_us": (int, float), "overlap_host": (bool,), "linear_attention_overlap": (bool,),
    "prefix_caching": (bool,), "eager_kernel_host_us": (int, float), "state_pool": (str,),
    "state_memory_ratio": (int, float), "state_slots_per_seq": (int,), "batch_wait_steps": (int,),
    "batch_wait_tokens_ratio": (int, float),
}


def _check(value: Any, name: str, where: str) -> Any:
    """The value of field ``name`` checked against its type and range."""
    types = _TYPES[name]
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        raise EngineError(f"{where}: {name} must be {' or '.join(t.__name__ for t in types)}, got {value!r}")
    problem = None
    if name in ("max_seqs", "max_batched_tokens", "block_size", "state_slots_per_seq") and value < 1:
        problem = "must be >= 1"
    elif name == "memory_utilization" and not 0 < value <= 1:
        problem = "must be in (0, 1]"
    elif name in ("step_host_us", "sequence_host_us", "eager_kernel_host_us") and not 0 <= value < 1e6:
        problem = "must be in [0, 1e6) microseconds"
    elif name == "batch_wait_steps" and value < 0:
        problem = "must be >= 0"
    elif name == "batch_wait_tokens_ratio" and not 0 <= value <= 1:
        problem = "must be in [0, 1]"
    elif name == "state_memory_ratio" and not 0 <= value < 100:
        problem = "must be in [0, 100)"
    elif name == "state_pool" and value not in STATE_POOLS:
        problem = f"must be one of {', '.join(STATE_POOLS)}"
    elif name == "policy" and value not in POLICIES:
        problem = f"must be one of {', '.join(POLICIES)}"
    elif name == "memory_of" and value not in MEMORY_OF:
        problem = f"must be one of {', '.join(MEMORY_OF)}"
    elif name == "cuda_graph_steps" and value not in GRAPH_STEPS:
        problem = f"must be one of {', '.join(GRAPH_STEPS)}"
    elif name == "cuda_graph_sizes":
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in value) or value != sorted(set(value)):
            problem = "must be whole numbers >= 1 in increasing order"
        value = tuple(value)
    if problem:
        raise EngineError(f"{where}: {name} {problem}, got {value!r}")
    return value


def _merge(base: dict, over: dict, where: str) -> dict:
    out = dict(base)
    for key, value in over.items():
        if key == "sources":
            out["sources"] = {**base.get("sources", {}), **value}
        elif key == "memory_rules":
            out[key] = value
        elif key not in _TYPES:
            raise EngineError(f"{where}: unknown field {key!r}; allowed: {', '.join(sorted(_TYPES))}, "
                              f"memory_rules, sources")
        else:
            out[key] = value
    return out


def load_engines(path: str | None = None) -> dict[str, dict]:
    """An engine file (the bundled one when None, read once): engine -> {"default": version,
    "versions": {version: fields}} with every version's fields merged over the engine's
    ``defaults`` and checked, its memory rules parsed as (GiB, name exception, fields)."""
    return _bundled() if path is None else _read(path)


@lru_cache(maxsize=1)
def _bundled() -> dict[str, dict]:
    return _read(ENGINES_FILE)


def _read(path: str) -> dict[str, dict]:
    data = yaml.safe_load(read_text(path, "engine preset file", EngineError))
    if not isinstance(data, dict) or not isinstance(data.get("engines"), dict):
        raise EngineError(f"{path}: expected a mapping with 'engines'")
    out = {}
    for name, spec in data["engines"].items():
        where = f"{path}: engine {name}"
        if not isinstance(spec, dict) or not isinstance(spec.get("versions"), dict) or not spec["versions"]:
            raise EngineError(f"{where}: needs 'versions' (version -> fields)")
        unknown = set(spec) - {"defaults", "versions", "default_version", "source"}
        if unknown:
            raise EngineError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        versions = {}
        for version, fields in spec["versions"].items():
            vwhere = f"{where} {version}"
            merged = _merge(_merge({}, spec.get("defaults") or {}, where), fields or {}, vwhere)
            missing = sorted(set(_TYPES) - set(merged))
            if missing:
                raise EngineError(f"{vwhere}: missing {', '.join(missing)}")
            unsourced = sorted(k for k in _TYPES if k not in merged.get("sources", {}))
            if unsourced:
                raise EngineError(f"{vwhere}: no source for {', '.join(unsourced)}")
            for key in _TYPES:
                merged[key] = _check(merged[key], key, vwhere)
            try:
                StatePool(merged["state_pool"], merged["state_memory_ratio"], merged["state_slots_per_seq"])
            except ValueError as e:
                raise EngineError(f"{vwhere}: {e}") from None
            merged["memory_rules"] = [_memory_rule(rule, vwhere) for rule in merged.get("memory_rules") or []]
            versions[str(version)] = merged
        default = str(spec.get("default_version", next(iter(versions))))
        if default not in versions:
            raise EngineError(f"{where}: default_version {default!r} is not one of its versions")
        out[str(name)] = {"default": default, "versions": versions}
    return out


_RULE_KEYS = {"min_memory_gib", "unless_name_contains"}


def _memory_rule(rule: Any, where: str) -> tuple[float, str, dict]:
    """A memory rule: {min_memory_gib: G, unless_name_contains: TEXT (optional), FIELD: value, ...}."""
    if not isinstance(rule, dict) or not isinstance(rule.get("min_memory_gib"), (int, float)):
        raise EngineError(f"{where}: a memory rule needs min_memory_gib and the fields it sets")
    unknown = set(rule) - set(_TYPES) - _RULE_KEYS
    if unknown:
        raise EngineError(f"{where}: memory rule field {sorted(unknown)[0]!r} is not an engine field")
    fields = {k: _check(v, k, where) for k, v in rule.items() if k in _TYPES}
    return float(rule["min_memory_gib"]), str(rule.get("unless_name_contains", "")).lower(), fields


def engine_names(path: str | None = None) -> list[str]:
    """'engine VERSION' for every bundled preset."""
    return [f"{e} {v}" for e, spec in load_engines(path).items() for v in spec["versions"]]


def engine_preset(engine: str, version: str | None = None, *, memory_bytes: float | None = None,
                  device_name: str = "", path: str | None = None) -> EnginePreset:
    """The preset of ``engine`` at ``version`` (its default version when None) on a device named
    ``device_name`` with ``memory_bytes`` (None: no memory rule applies)."""
    engines = load_engines(path)
    if engine not in engines:
        raise EngineError(f"unknown engine {engine!r}; known: {', '.join(engines)}")
    spec = engines[engine]
    version = spec["default"] if version is None else str(version)
    if version not in spec["versions"]:
        raise EngineError(f"{engine} has no preset for version {version!r}; known: {', '.join(spec['versions'])}")
    fields = dict(spec["versions"][version])
    for gib, unless, values in fields.pop("memory_rules"):
        if memory_bytes is not None and memory_bytes >= gib * GIB and not (unless and unless in device_name.lower()):
            fields.update(values)
    sources = fields.pop("sources", {})
    return EnginePreset(engine, version, sources=sources, **fields)


__all__ = ["EngineError", "EnginePreset", "engine_names", "engine_preset", "load_engines"]
