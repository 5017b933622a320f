"""Bytes the simulation moved, beside the bytes as counted.

The count's bytes (docs/counting.md) are in the tensors' own dtypes: a bf16 model's weights move
2 bytes per element. A simulation may store the weights narrower (``weight_dtype``: a parameter
read moves elements * bits / 8 bytes, so a 64 -> 128 linear's weight at int4 moves
64 * 128 / 2 = 4,096 bytes), store the KV cache narrower (``kv_dtype``), remove traffic its runtime
fused or wrote in place (compiled, serving), and give each device of a tensor-parallel group its
share. What it moved is each op's memory traffic, the numerator of its memory time
(dispatchprof.sim.timing.OpTiming.traffic_bytes); this module sums it per phase, per module and
per operator, and says under which dtypes and runtime (`simulated_as`). Units: bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from dispatchprof import units
from dispatchprof.results.profile import roll_up
from dispatchprof.sim.device import dtype_key
from dispatchprof.sim.quantization import label
from dispatchprof.sim.simulate import SimTotals, Simulation


def moved_bytes(sim: Simulation, records: Iterable[int] | None = None, phase: str | None = None) -> float:
    """Bytes ``sim`` moved to and from memory over its ops (those of ``records``, record indices,
    if given; of one ``phase`` if given)."""
    ops = sim.ops if records is None else (sim.ops[i] for i in records)
    return sum(t.traffic_bytes for t in ops if phase is None or sim.records[t.record].phase == phase)


def bytes_by_scope(sim: Simulation) -> dict[str, float]:
    """Inclusive bytes moved per module scope (the scope and its subtree) over ``sim.ops``."""
    own: dict[str, float] = dict.fromkeys(sim.parents, 0.0)
    for t in sim.ops:
        scope = sim.records[t.record].scope
        own[scope] = own.get(scope, 0.0) + t.traffic_bytes
    return roll_up(own, sim.parents)


@dataclass(frozen=True)
class ScopeSim:
    """A module's simulated totals and the bytes its ops moved (adds with ``+``, as the module
    tree's folded blocks need)."""

    totals: SimTotals
    traffic_bytes: float = 0.0

    @property
    def time_s(self) -> float:
        return self.totals.time_s

    @property
    def energy_j(self) -> float:
        return self.totals.energy_j

    @property
    def dynamic_j(self) -> float:
        return self.totals.dynamic_j

    def __add__(self, o: ScopeSim) -> ScopeSim:
        return ScopeSim(self.totals + o.totals, self.traffic_bytes + o.traffic_bytes)


def scope_rows(sim: Simulation) -> dict[str, ScopeSim]:
    """Per module scope: `ScopeSim` of its subtree (``sim.by_module()`` with the bytes moved)."""
    moved = bytes_by_scope(sim)
    return {name: ScopeSim(t, moved.get(name, 0.0)) for name, t in sim.by_module().items()}


def counted_dtype(sim: Simulation) -> str:
    """The model's dtype as counted: that of the first op that reads parameters ("bf16"), else of
    the first op ("" for no op)."""
    first = next((r for r in sim.records if r.param_elements), sim.records[0] if sim.records else None)
    return dtype_key(first.dtype) if first is not None else ""


def weights_dtype(sim: Simulation) -> str:
    """The dtype the simulation stored the weights in: its ``weight_dtype``, else as counted."""
    return label(sim.weight_dtype) or counted_dtype(sim)


def kv_dtype(sim: Simulation) -> str:
    """The dtype the simulation stored the KV cache in: its ``kv_dtype``, else as counted."""
    return sim.runtime.kv_dtype or counted_dtype(sim)


def simulated_as(sim: Simulation) -> str:
    """Under what the bytes were moved: 'weights int4, KV cache fp8, runtime serving' (and a
    tensor-parallel group's 'tp 2: one device's share')."""
    text = f"weights {weights_dtype(sim)}, KV cache {kv_dtype(sim)}, runtime {sim.runtime.runtime}"
    return text + (f", tp {sim.tp}: one device's share" if sim.tp > 1 else "")


def bytes_dict(sim: Simulation, counted_bytes: int, phase: str | None = None) -> dict[str, Any]:
    """JSON-ready: the bytes ``sim`` moved (of one ``phase`` if given) beside ``counted_bytes``, with
    the dtypes and the runtime they were moved under."""
    return {"bytes": moved_bytes(sim, phase=phase), "counted_bytes": counted_bytes,
            "weight_dtype": weights_dtype(sim), "kv_dtype": kv_dtype(sim),
            "runtime": sim.runtime.runtime, "tp": sim.tp}


def moved_lines(moved: dict[str, dict[str, dict[str, Any]]]) -> str:
    """'Bytes moved as simulated on NAME, ... (weights int4, KV cache bf16, runtime eager): prefill X
    (counted Y), last decode step ...' from `bytes_dict` entries per scenario ({"prefill": ...,
    "last_decode_step": ...}, as a generation's JSON saves them), one line per distinct figure
    (scenarios that moved the same bytes share a line)."""
    lines: dict[str, list[str]] = {}
    for name, parts in moved.items():
        pre = parts["prefill"]
        text = (f"(weights {pre['weight_dtype']}, KV cache {pre['kv_dtype']}, runtime {pre['runtime']}"
                + (f", tp {pre['tp']}: one device's share" if pre["tp"] > 1 else "")
                + f"): prefill {units.nbytes(pre['bytes'])} (counted {units.nbytes(pre['counted_bytes'])})")
        last = parts.get("last_decode_step")
        if last:
            text += (f", last decode step {units.nbytes(last['bytes'])} "
                     f"(counted {units.nbytes(last['counted_bytes'])})")
        lines.setdefault(text, []).append(name)
    return "\n".join(f"Bytes moved as simulated on {', '.join(names)} {text}" for text, names in lines.items())

