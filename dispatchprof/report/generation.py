"""Tables and CSV of a generation (prefill + decode): rows first, then tabulate.

`generation_summary` renders the per-phase counts (as counted: bytes in the tensors' own dtypes,
whatever ``weight_dtype`` the time was simulated with) and, per simulated device, the runtime and
tensor-parallel degree it was simulated under, time to first token, time per output token, tokens/s,
energy per token (the whole group's, split into static and dynamic energy) and the memory footprint
against the device's capacity, then what each runtime fused or removed. Its lossless JSON form
lives with the result (dispatchprof.results.generation).
"""

from __future__ import annotations

import csv
import io

from dispatchprof import units
from dispatchprof.report.render import printable, render
from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.generation import DeviceGeneration, GenerationProfile


def generation_summary(g: GenerationProfile, *, model: str = "", fmt: str = "simple") -> str:
    """The phase table and the device table of a generation (the model name shown `printable`)."""
    model = printable(model)
    title = (f"{model + ': ' if model else ''}batch {g.batch}, prompt {g.prompt_len} tokens, "
             f"{g.new_tokens} new tokens (prefill + {g.new_tokens - 1} decode steps; "
             f"{g.steps_counted} decode steps counted, the rest summed exactly)" if g.new_tokens > 1 else
             f"{model + ': ' if model else ''}batch {g.batch}, prompt {g.prompt_len} tokens, 1 new token "
             f"(the prefill only: no decode step)")
    phases = [["prefill", units.si(g.prefill_totals.flops), units.si(g.prefill_totals.macs),
               units.nbytes(g.prefill_totals.bytes), str(g.tokens["prefill"])],
              ["decode (all steps)", units.si(g.decode_totals.flops), units.si(g.decode_totals.macs),
               units.nbytes(g.decode_totals.bytes), str(g.tokens["decode"])]]
    text = title + "\n\n" + render(phases, ["phase", "FLOPs (ADD+MULT)", "MACs", "bytes moved (as counted)",
                                             "tokens"], fmt)
    text += (f"\n\nKV cache after the last token: {units.nbytes(g.kv_cache_bytes)}; weights "
             f"{units.nbytes(g.weights_bytes)}; peak activations {units.nbytes(g.activations_peak_bytes)}")
    if g.devices:
        decodes = g.new_tokens > 1          # one new token: no decode step, TPOT and decode rate are "-"
        rows = [[d.name, units.seconds(d.ttft_s),
                 f"{units.seconds(d.tpot_first_s)} / {units.seconds(d.tpot_mean_s)} / {units.seconds(d.tpot_last_s)}"
                 if decodes else "-",
                 f"{d.tokens_per_s:,.1f}", f"{d.decode_tokens_per_s:,.1f}" if decodes else "-",
                 units.joules(d.energy_per_token_j),
                 units.percent(d.prefill.memory_bound_s + d.decode.memory_bound_s, d.total_time_s),
                 _fits(d.capacity),
                 units.percent(d.prefill.static_j + d.decode.static_j, d.prefill.energy_j + d.decode.energy_j),
                 f"{d.runtime}, tp {d.tp}"] for d in g.devices.values()]
        text += "\n\n" + render(rows, ["device", "TTFT", "TPOT first / mean / last", "tokens/s", "decode tokens/s",
                                       "energy/token (group)", "memory-bound", "memory footprint (one device)",
                                       "static energy", "runtime"], fmt)
        text += "\n" + "\n".join(c.message for d in g.devices.values() for c in d.capacity)
        text += "\n" + "\n".join(_runtime_note(d) for d in g.devices.values())
    return text


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


def generation_csv(g: GenerationProfile) -> str:
    """One row per simulated device (raw units) with the phase counts repeated."""
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
                       d.energy_per_token_j, max(c.required_bytes for c in d.capacity),
                       d.capacity[0].capacity_bytes, d.runtime, d.tp, d.prefill.static_j + d.decode.static_j,
                       d.prefill.energy_j + d.decode.energy_j - d.prefill.static_j - d.decode.static_j]
                      if d else [""] * 13)])
    return out.getvalue()
