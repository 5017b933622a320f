"""The frozen result of a generation (a prefill and its decode steps), and its file format.

``dispatchprof.llm.generation.profile_generation`` fills it in; ``dispatchprof.report.generation``
renders it. The JSON form (`generation_to_dict` / `generation_from_dict`) is lossless for
everything the reports show: ``{"schema": "dispatchprof.generation", "version": 1, ...}``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from dispatchprof.results import frame
from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.energy_null import stand_ins
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import Totals
from dispatchprof.results.validate import check_generation_data, check_generation_totals

SCHEMA = "dispatchprof.generation"
VERSION = 1


@dataclass(frozen=True)
class PhaseTiming:
    """Simulated totals of a phase on one scenario."""

    time_s: float = 0.0
    energy_j: float = 0.0
    compute_bound_s: float = 0.0
    memory_bound_s: float = 0.0
    static_j: float = 0.0           # of energy_j: static power x time (the rest is dynamic)


@dataclass(frozen=True)
class DeviceGeneration:
    """What a generation costs on one scenario (a device or a placement)."""

    name: str
    ttft_s: float
    tpot_first_s: float
    tpot_mean_s: float
    tpot_last_s: float
    prefill: PhaseTiming
    decode: PhaseTiming
    tokens_per_s: float           # batch * new_tokens / (prefill + decode time)
    decode_tokens_per_s: float    # batch * (new_tokens - 1) / decode time
    energy_per_token_j: float     # the whole tensor-parallel group's energy / tokens
    capacity: tuple[CapacityCheck, ...]
    runtime: str = "eager"
    tp: int = 1                   # devices in the tensor-parallel group (figures above: one device)
    runtime_changes: str = ""     # what the runtime fused or removed (RuntimeChanges.describe)

    @property
    def total_time_s(self) -> float:
        return self.prefill.time_s + self.decode.time_s


@dataclass(frozen=True)
class GenerationProfile:
    """Counts per phase, KV cache, footprint, and per scenario the timings of one generation."""

    batch: int
    prompt_len: int
    new_tokens: int
    prefill: Profile
    prefill_totals: Totals
    decode_totals: Totals
    decode_by_scope: Mapping[str, Totals]
    kv_cache_bytes: int             # every layer's keys and values after the last token
    weights_bytes: int
    activations_peak_bytes: int
    devices: Mapping[str, DeviceGeneration]
    steps_counted: int
    last_step: Profile | None = field(default=None, repr=False)
    kv_cache_bytes_by_layer: tuple[int, ...] = ()   # KV (docs/counting.md) of each decoder layer

    @property
    def tokens(self) -> dict[str, int]:
        """Tokens produced per phase (for tokens/s): the prefill gives the first of each sequence."""
        return {"prefill": self.batch, "decode": self.batch * (self.new_tokens - 1)}

    def _repr_html_(self) -> str:
        return frame.generation_html(self)


def generation_to_dict(g: GenerationProfile, model: str = "") -> dict[str, Any]:
    """JSON-ready, lossless for everything the reports show."""
    return {"schema": SCHEMA, "version": VERSION, "model": model, "batch": g.batch, "prompt_len": g.prompt_len,
            "new_tokens": g.new_tokens, "prefill_totals": asdict(g.prefill_totals),
            "decode_totals": asdict(g.decode_totals),
            "decode_by_scope": {k: asdict(v) for k, v in g.decode_by_scope.items()},
            "kv_cache_bytes": g.kv_cache_bytes, "kv_cache_bytes_by_layer": list(g.kv_cache_bytes_by_layer),
            "weights_bytes": g.weights_bytes,
            "activations_peak_bytes": g.activations_peak_bytes, "steps_counted": g.steps_counted,
            "devices": {n: asdict(d) for n, d in g.devices.items()},
            "prefill_profile": g.prefill.to_dict()}


def generation_from_dict(data: dict[str, Any], where: str = "generation") -> tuple[GenerationProfile, str]:
    """The inverse of `generation_to_dict`: (profile, model name); every field is checked first
    (dispatchprof.results.validate)."""
    version = data.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise ValueError(f"{where}: generation schema version {version!r} is not supported: this dispatchprof "
                         f"reads version {VERSION}; a newer version needs a newer dispatchprof")
    if isinstance(data.get("devices"), dict):       # null energies (results.energy_null) -> their stand-ins
        data = {**data, "devices": {n: stand_ins(d) for n, d in data["devices"].items()}}
    check_generation_data(data, where)
    try:
        devices = {n: DeviceGeneration(
            d["name"], d["ttft_s"], d["tpot_first_s"], d["tpot_mean_s"], d["tpot_last_s"],
            PhaseTiming(**d["prefill"]), PhaseTiming(**d["decode"]), d["tokens_per_s"], d["decode_tokens_per_s"],
            d["energy_per_token_j"], tuple(CapacityCheck(**c) for c in d["capacity"]),
            d.get("runtime", "eager"), d.get("tp", 1), d.get("runtime_changes", ""))
            for n, d in data["devices"].items()}
        g = GenerationProfile(
            data["batch"], data["prompt_len"], data["new_tokens"], Profile.from_dict(data["prefill_profile"], where),
            Totals(**data["prefill_totals"]), Totals(**data["decode_totals"]),
            {k: Totals(**v) for k, v in data["decode_by_scope"].items()}, data["kv_cache_bytes"],
            data["weights_bytes"], data["activations_peak_bytes"], devices, data["steps_counted"],
            None, tuple(data["kv_cache_bytes_by_layer"]))
    except (KeyError, TypeError) as e:
        raise ValueError(f"{where}: malformed generation profile ({type(e).__name__}: {e})") from None
    check_generation_totals(g.prefill_totals, g.prefill.total(), g.decode_totals, g.decode_by_scope, where)
    return g, data.get("model", "")
