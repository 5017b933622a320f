"""Tables and CSV of a generation (prefill + decode): rows first, then tabulate.

`generation_summary` renders the per-phase counts (as counted: bytes in the tensors' own dtypes,
whatever ``weight_dtype`` the time was simulated with; tokens fed in and generated) and, per
simulated device, two tables that fit 100 columns: speed (time to first token, time per output
token, tokens/s, the memory-bound share) and energy (per generated token, split into static and
dynamic; UNKNOWN where the profile has no sourced static power, or for the total and dynamic
parts, no sourced energy per operation or per bit: dispatchprof.report.unknowns), the runtime and tensor-parallel
degree, and the memory footprint against the device's capacity; then the notes (capacity, unknown
figures, what each runtime fused or removed) and what the labels mean. Its lossless JSON form
lives with the result (dispatchprof.results.generation).
"""

from __future__ import annotations

import csv
import io
from typing import Mapping, Sequence

from dispatchprof import units
from dispatchprof.errors import DeviceProfileError
from dispatchprof.report.pim_notes import pim_time_note
from dispatchprof.report.render import printable, render, wrap
from dispatchprof.report.unknowns import energy_cell, known_energy
from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.generation import DeviceGeneration, GenerationProfile
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.device import Device
from dispatchprof.sim.unknowns import unknown_figures, unknown_note


#: What the device tables' group and unit labels mean (printed under them).
DEVICE_NOTES = ("TTFT: time to first token; TPOT: time per output token (decode step); tokens/s: generated tokens "
                "over the whole run; mem-bound: share of the time in memory-bound ops; "
                "energy/token: joules of the whole run (every device of a tensor-parallel group, static + dynamic) "
                "per generated token; static = static power x time, dynamic = per-FLOP and per-bit energy; "
                "memory footprint: weights + KV cache + peak activations on one device against its capacity.")


def generation_summary(g: GenerationProfile, *, model: str = "", fmt: str = "simple",
                       devices: Mapping[str, Sequence[Device]] | None = None) -> str:
    """The phase table and, per simulated scenario, a speed table and an energy and memory table
    (each under 100 columns), then the notes: capacity, figures a profile could not source
    (``devices``: scenario name -> its devices; by default the bundled device of that name),
    and what each runtime changed. The model name is shown `printable`."""
    model = printable(model)
    title = (f"{model + ': ' if model else ''}batch {g.batch}, prompt {g.prompt_len} tokens, "
             f"{g.new_tokens} new tokens (prefill + {g.new_tokens - 1} decode steps; "
             f"{g.steps_counted} decode steps counted, the rest summed exactly)" if g.new_tokens > 1 else
             f"{model + ': ' if model else ''}batch {g.batch}, prompt {g.prompt_len} tokens, 1 new token "
             f"(the prefill only: no decode step)")
    fed = {"prefill": g.batch * g.prompt_len, "decode": g.batch * (g.new_tokens - 1)}
    phases = [[name, units.si(t.flops), units.si(t.macs), units.nbytes(t.bytes), f"{fed[key]:,}",
               f"{g.tokens[key]:,}"]
              for name, key, t in (("prefill", "prefill", g.prefill_totals),
                                   ("decode (all)", "decode", g.decode_totals))]
    text = wrap(title) + "\n\n" + render(phases, ["phase", "FLOPs (ADD+MULT)", "MACs", "bytes moved (as counted)",
                                             "tokens in", "tokens out"], fmt)
    text += "\n\n" + wrap(f"KV cache after the last token: {units.nbytes(g.kv_cache_bytes)}; weights "
                          f"{_weights(g)}; peak activations {units.nbytes(g.activations_peak_bytes)}")
    if g.devices:
        text += "\n\n" + _speed_table(g, fmt) + "\n\n" + _energy_table(g, fmt, devices)
        notes = [c.message for d in g.devices.values() for c in d.capacity]
        notes += [n for name in g.devices for n in _unknown_notes(name, devices) if n]
        notes += [_runtime_note(d) for d in g.devices.values()]
        notes += [n for d in g.devices.values() if (n := pim_time_note(d, _scenario_devices(d.name, devices)))]
        text += "\n" + wrap("\n".join(notes) + "\n" + DEVICE_NOTES)
    return text


def _weights(g: GenerationProfile) -> str:
    """The weights' bytes; under a placement over several devices (the first scenario's), their
    total and each device's share."""
    first = next(iter(g.devices.values()), None)
    checks = first.capacity if first is not None else ()
    if len(checks) < 2:
        return units.nbytes(g.weights_bytes)
    shares = ", ".join(f"{c.device} {units.nbytes(c.weights_bytes)}" for c in checks)
    return f"{units.nbytes(sum(c.weights_bytes for c in checks))} in all ({first.name}: {shares})"


def _speed_table(g: GenerationProfile, fmt: str) -> str:
    """Time to first token, time per output token, rates and the memory-bound share, per scenario."""
    decodes = g.new_tokens > 1          # one new token: no decode step, TPOT and decode rate are "-"
    rows = [[d.name, units.seconds(d.ttft_s), units.seconds(d.tpot_mean_s) if decodes else "-",
             f"{units.seconds(d.tpot_first_s)} .. {units.seconds(d.tpot_last_s)}" if decodes else "-",
             f"{d.tokens_per_s:,.1f}", f"{d.decode_tokens_per_s:,.1f}" if decodes else "-",
             units.percent(d.prefill.memory_bound_s + d.decode.memory_bound_s, d.total_time_s)]
            for d in g.devices.values()]
    return render(rows, ["device", "TTFT", "TPOT mean", "TPOT first .. last", "tokens/s", "decode tok/s",
                         "mem-bound"], fmt)


def _energy_table(g: GenerationProfile, fmt: str, devices: Mapping[str, Sequence[Device]] | None) -> str:
    """Energy per generated token split into static and dynamic, the runtime, and the footprint."""
    rows = []
    for d in g.devices.values():
        tokens = g.batch * g.new_tokens
        static = d.prefill.static_j + d.decode.static_j
        dynamic = d.prefill.energy_j + d.decode.energy_j - static
        static_known = "static_power_w" not in _unknown_fields(d.name, devices)
        scenario = _scenario_devices(d.name, devices)
        rows.append([d.name, energy_cell(d.energy_per_token_j, scenario),
                     units.joules(static * d.tp / tokens) if static_known else "UNKNOWN",
                     energy_cell(dynamic * d.tp / tokens, scenario), f"{d.runtime}, tp {d.tp}", _fits(d.capacity)])
    return render(rows, ["device", "energy/token", "static/token", "dynamic/token", "runtime",
                         "memory footprint"], fmt)


def _scenario_devices(name: str, devices: Mapping[str, Sequence[Device]] | None) -> Sequence[Device]:
    """The devices of scenario ``name``: from ``devices``, else the bundled device of that name (none
    for a placement or a device not bundled)."""
    if devices is not None:
        return devices.get(name, ())
    try:
        return (load_device(name),)
    except (DeviceProfileError, OSError, ValueError):
        return ()


#: The lookup above under a public name (dispatchprof.report.generation_json reads it).
scenario_devices = _scenario_devices


def _unknown_fields(name: str, devices: Mapping[str, Sequence[Device]] | None) -> set[str]:
    return {f for dev in _scenario_devices(name, devices) for f in unknown_figures(dev)}


def _unknown_notes(name: str, devices: Mapping[str, Sequence[Device]] | None) -> list[str]:
    return [unknown_note(dev) for dev in _scenario_devices(name, devices)]


def _runtime_note(d: DeviceGeneration) -> str:
    """What the runtime changed, and how a tensor-parallel group's figures read."""
    note = f"{d.name}: {d.runtime_changes or 'runtime ' + d.runtime} (prefill)"
    if d.tp > 1:
        note += (f"; tp {d.tp}: times are one device's (all {d.tp} run the same split ops), energy/token is the "
                 f"group's ({units.joules(d.energy_per_token_j / d.tp)} per device), the footprint one device's share")
    return note


def _fits(checks: tuple[CapacityCheck, ...]) -> str:
    states = [c.fits for c in checks]
    if False in states:
        return "OVER capacity"
    return "fits" if all(states) else "capacity unknown"


def generation_csv(g: GenerationProfile, devices: Mapping[str, Sequence[Device]] | None = None) -> str:
    """One row per simulated device (raw units) with the phase counts repeated. An energy the
    scenario's profiles could not source (``devices`` as in `generation_summary`) is an empty cell,
    never 0: ``energy_per_token_j`` when the dynamic or the static part is unknown, ``static_j`` and
    ``dynamic_j`` each when theirs is (dispatchprof.sim.energy_known)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["device", "batch", "prompt_len", "new_tokens", "prefill_flops", "prefill_macs", "decode_flops",
                "decode_macs", "kv_cache_bytes", "ttft_s", "tpot_first_s", "tpot_mean_s", "tpot_last_s",
                "tokens_per_s", "decode_tokens_per_s", "energy_per_token_j", "required_bytes", "capacity_bytes",
                "runtime", "tp", "static_j", "dynamic_j"])
    for d in g.devices.values() or [None]:
        w.writerow([d.name if d else "", g.batch, g.prompt_len, g.new_tokens, g.prefill_totals.flops,
                    g.prefill_totals.macs, g.decode_totals.flops, g.decode_totals.macs, g.kv_cache_bytes,
                    *([d.ttft_s, d.tpot_first_s, d.tpot_mean_s, d.tpot_last_s, d.tokens_per_s, d.decode_tokens_per_s,
                       *_energy_numbers(d, devices)[:1], max(c.required_bytes for c in d.capacity),
                       d.capacity[0].capacity_bytes, d.runtime, d.tp, *_energy_numbers(d, devices)[1:]]
                      if d else [""] * 13)])
    return out.getvalue()


def _energy_numbers(d: DeviceGeneration, devices: Mapping[str, Sequence[Device]] | None) -> list[float | str]:
    """[energy per token, static J, dynamic J] of ``d``, each "" (an empty CSV cell) where unknown."""
    known = known_energy(_scenario_devices(d.name, devices))
    static = d.prefill.static_j + d.decode.static_j
    values = ((d.energy_per_token_j, known.total), (static, known.static),
              (d.prefill.energy_j + d.decode.energy_j - static, known.dynamic))
    return [v if ok else "" for v, ok in values]
