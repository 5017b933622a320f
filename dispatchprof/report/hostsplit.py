"""The host time of one decode step, split: model Python / dispatch / launch, beside the device's
busy time (rows first, then text).

For a decode step of records R (the "decode" records of the generation's last counted step) on a
device d whose host is h (`Device.host_profile`), under the eager runtime:

    model Python = sum over R of host_loops * h.python_loop_ns      (measured here, scaled to h)
    dispatch     = |R| * h.dispatch_us + (sum over R of host_calls - |R|) * h.view_us   (kernels, views)
    launch       = |R| * h.launch_us                                 (every record is a kernel)
    device busy  = sum over R of OpTiming.time_s                     (the kernels back to back)

The step is host-bound when model Python + dispatch + launch exceeds the device's busy time (the
device then waits for the host). Compiled and serving steps are one graph launch: the model's
Python runs when the graph is captured, not per step.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from dispatchprof import units
from dispatchprof.results.generation import GenerationProfile
from dispatchprof.results.hosttime import host_by_module, host_totals
from dispatchprof.sim.placement import Scenarios
from dispatchprof.sim.simulate import simulate

_LAYER = re.compile(r"\.\d+(?=\.|$)")
#: Columns of the split's text (the report's width).
WIDTH = 100


@dataclass(frozen=True)
class HostSplit:
    """One device's decode-step host split (seconds; the host's name and the counting machine's
    measured model Python for reference)."""

    device: str
    host: str
    cpu: str
    measured_s: float       # the model's Python as measured on the counting machine
    model_s: float          # the same on the device's host
    dispatch_s: float
    launch_s: float
    device_s: float
    calls: int
    kernels: int
    top_modules: tuple[tuple[str, float], ...]   # (scope, layer indices as N; seconds on the host)

    @property
    def host_s(self) -> float:
        return self.model_s + self.dispatch_s + self.launch_s

    @property
    def host_bound(self) -> bool:
        return self.host_s > self.device_s


def decode_host_splits(g: GenerationProfile, scenarios: Scenarios, *, weight_dtype: str | None = None,
                       kv_dtype: str | None = None, top: int = 4) -> list[HostSplit]:
    """The split of the last counted decode step on every eager scenario whose device has a host
    profile and whose count carries measured host times (none otherwise)."""
    step = g.last_step
    if step is None:
        return []
    index = [i for i, r in enumerate(step.records) if r.phase == "decode"]
    records = [step.records[i] for i in index]
    if not records or not any(r.host_calls for r in records):
        return []
    out = []
    for name, gen in g.devices.items():
        placement = scenarios[name]
        device = placement.devices[0]
        host = device.host_profile()
        if gen.runtime != "eager" or host is None:
            continue
        sim = simulate(step, placement, weight_dtype=weight_dtype, name=name, runtime=gen.runtime, tp=gen.tp,
                       step_starts=(index[0],), kv_dtype=kv_dtype)
        totals = host_totals(records)
        groups: dict[str, float] = {}
        for scope, t in host_by_module(records).items():
            key = _LAYER.sub(".N", scope) or "(root)"
            groups[key] = groups.get(key, 0.0) + host.model_s(t.loops)
        ranked = tuple(sorted(groups.items(), key=lambda kv: -kv[1])[:top])
        out.append(HostSplit(name, host.name, host.cpu, step.host_seconds(totals.loops), host.model_s(totals.loops),
                             host.dispatch_s(totals.calls, len(records)), len(records) * host.launch_us * 1e-6,
                             sum(sim.ops[i].time_s for i in index), totals.calls, len(records), ranked))
    return out


def host_split_text(splits: list[HostSplit]) -> str:
    """One paragraph per device: the split, the bound, the top module scopes by model Python."""
    lines = []
    for s in splits:
        bound = "host-bound (the GPU waits for the host)" if s.host_bound else "device-bound"
        lines += textwrap.wrap(
            f"{s.device}: host per decode step {units.seconds(s.host_s)} on {s.host} ({s.cpu}) = model Python "
            f"{units.seconds(s.model_s)} (measured {units.seconds(s.measured_s)} on this machine) + dispatch "
            f"{units.seconds(s.dispatch_s)} ({s.calls:,} aten calls) + launch {units.seconds(s.launch_s)} "
            f"({s.kernels:,} kernels); device busy {units.seconds(s.device_s)}: {bound}", WIDTH,
            subsequent_indent="  ")
        if s.top_modules:
            lines += textwrap.wrap("model Python by module (per step, on the host): "
                                   + ", ".join(f"{scope} {units.seconds(t)}" for scope, t in s.top_modules), WIDTH,
                                   initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)
