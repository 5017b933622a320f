"""Tables and CSV of a generation (prefill + decode): rows first, then tabulate.

`generation_summary` renders the per-phase counts and, per simulated device, time to first
token, time per output token, tokens/s, energy per token and the memory footprint against the
device's capacity. Its lossless JSON form lives with the result (dispatchprof.results.generation).
"""

from __future__ import annotations

import csv
import io

from dispatchprof import units
from dispatchprof.report.render import render
from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.generation import GenerationProfile


def generation_summary(g: GenerationProfile, *, model: str = "", fmt: str = "simple") -> str:
    """The phase table and the device table of a generation."""
    title = (f"{model + ': ' if model else ''}batch {g.batch}, prompt {g.prompt_len} tokens, "
             f"{g.new_tokens} new tokens (prefill + {g.new_tokens - 1} decode steps; "
             f"{g.steps_counted} decode steps counted, the rest summed exactly)" if g.new_tokens > 1 else
             f"{model + ': ' if model else ''}batch {g.batch}, prompt {g.prompt_len} tokens, 1 new token "
             f"(the prefill only: no decode step)")
    phases = [["prefill", units.si(g.prefill_totals.flops), units.si(g.prefill_totals.macs),
               units.nbytes(g.prefill_totals.bytes), str(g.tokens["prefill"])],
              ["decode (all steps)", units.si(g.decode_totals.flops), units.si(g.decode_totals.macs),
               units.nbytes(g.decode_totals.bytes), str(g.tokens["decode"])]]
    text = title + "\n\n" + render(phases, ["phase", "FLOPs (ADD+MULT)", "MACs", "bytes moved", "tokens"], fmt)
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
                 _fits(d.capacity)] for d in g.devices.values()]
        text += "\n\n" + render(rows, ["device", "TTFT", "TPOT first / mean / last", "tokens/s", "decode tokens/s",
                                       "energy/token", "memory-bound", "memory footprint"], fmt)
        text += "\n" + "\n".join(c.message for d in g.devices.values() for c in d.capacity)
    return text


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
                "tokens_per_s", "decode_tokens_per_s", "energy_per_token_j", "required_bytes", "capacity_bytes"])
    for d in g.devices.values() or [None]:
        w.writerow([d.name if d else "", g.batch, g.prompt_len, g.new_tokens, g.prefill_totals.flops,
                    g.prefill_totals.macs, g.decode_totals.flops, g.decode_totals.macs, g.kv_cache_bytes,
                    *([d.ttft_s, d.tpot_first_s, d.tpot_mean_s, d.tpot_last_s, d.tokens_per_s, d.decode_tokens_per_s,
                       d.energy_per_token_j, max(c.required_bytes for c in d.capacity),
                       d.capacity[0].capacity_bytes] if d else [""] * 9)])
    return out.getvalue()
