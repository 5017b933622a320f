"""Serving results for people and files: the summary table (one row per run, such as one per
request rate), CSV (raw units), the KV-use timeline CSV, and the plot (latency CDFs, and
throughput against request rate when several rates ran). Nothing here prints."""

from __future__ import annotations

import csv
import io
import os
import textwrap
from typing import Sequence

from dispatchprof.report.render import render
from dispatchprof.results.files import write_atomic
from dispatchprof.serving.serve import ServingResult
from dispatchprof.units import seconds

#: (header, summary field) of the latencies in the summary table, in order.
_LATENCIES = (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s"), ("E2E", "e2e_s"))
#: (header suffix, Latency field) of the statistics the table shows of each latency.
_STATISTICS = (("mean", "mean"), ("p50", "median"), ("p99", "p99"))
#: Throughput and cost headers of the summary table.
_THROUGHPUT = ("req/s", "out tok/s", "tok/s/GPU")
_COST = ("goodput req/s", "SLO met", "preempt", "KV peak", "J/token", "$/Mtok")


def summary_rows(runs: Sequence[tuple[str, ServingResult]]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of every summary column: one row per (label, result)."""
    headers = ["run", *_THROUGHPUT]
    headers += [f"{name} {stat}" for name, _ in _LATENCIES for stat, _ in _STATISTICS]
    headers += list(_COST)
    rows = []
    for label, r in runs:
        s = r.summary
        row = [label, f"{s.requests_per_s:.2f}", f"{s.output_tokens_per_s:.1f}", f"{s.output_tokens_per_s_per_gpu:.1f}"]
        row += [seconds(getattr(getattr(s, key), field)) for _, key in _LATENCIES for _, field in _STATISTICS]
        row += ["-" if s.goodput_requests_per_s is None else f"{s.goodput_requests_per_s:.2f}",
                "-" if s.slo_attainment is None else f"{100 * s.slo_attainment:.1f}%",
                str(s.preemptions), f"{100 * s.kv_peak_fraction:.1f}%", f"{s.energy_per_token_j:.4g}",
                "-" if s.usd_per_million_tokens is None else f"{s.usd_per_million_tokens:.3f}"]
        rows.append(row)
    return headers, rows


def summary_table(runs: Sequence[tuple[str, ServingResult]], fmt: str = "simple") -> str:
    """The setup line, then the summary in tables narrow enough for a terminal: throughput, SLO
    and cost; TTFT and TPOT; ITL and E2E with the preemptions and the KV cache's peak use (each
    latency with its mean, p50 and p99)."""
    headers, rows = summary_rows(runs)
    first = runs[0][1]
    c = first.config
    engine = f" under {first.engine}" if first.engine else ""
    head = (f"Serving on {first.device} x {first.replicas} replica(s){engine}: max {c.max_seqs} sequences, "
            f"{c.max_batched_tokens} tokens per step, chunked prefill {'on' if c.chunked_prefill else 'off'}, "
            f"{c.num_blocks} KV blocks of {c.block_size} tokens per replica")
    if c.state_blocks:
        head += f" (+ {c.state_blocks} per sequence for its linear-attention states)"
    if c.decode_q > 1:
        head += f", speculative decoding: {c.decode_q - 1} draft tokens, {c.decode_gain:.3f} tokens per step"
    if first.layout:
        head += f"; layout per replica: {first.layout}"
    if first.disaggregated is not None:
        d = first.disaggregated
        head += (f"; disaggregated: {d.prefill_replicas} prefill + {d.decode_replicas} decode replica(s), KV over "
                 f"{d.kv_link} (the scheduler figures are the decode side's)")
    latency = [[f"{name} {stat}" for name, _ in pair for stat, _ in _STATISTICS]
               for pair in (_LATENCIES[:2], _LATENCIES[2:])]
    groups = [["run", *_THROUGHPUT, *_COST[:2], *_COST[4:]], ["run", *latency[0]], ["run", *latency[1], *_COST[2:4]]]
    tables = [render([[row[headers.index(h)] for h in group] for row in rows], group, fmt) for group in groups]
    if any(r.disaggregated is not None for _, r in runs):
        tables.append(render(disagg_rows(runs), list(_DISAGG), fmt))
    return "\n".join(textwrap.wrap(head, 100)) + "\n" + "\n\n".join(tables) + "\n"


#: Headers of the disaggregated table: KV transfer, each side's (P: prefill, D: decode) queueing
#: (mean, p99) and utilisation.
_DISAGG = ("run", "KV xfer", "xfer p99", "P queue", "P q p99", "D queue", "D q p99", "P util", "D util")


def disagg_rows(runs: Sequence[tuple[str, ServingResult]]) -> list[list[str]]:
    """One row per disaggregated run (`_DISAGG`)."""
    rows = []
    for label, r in runs:
        d = r.disaggregated
        if d is None:
            continue
        rows.append([label, seconds(d.transfer_s.mean), seconds(d.transfer_s.p99), seconds(d.prefill_queue_s.mean),
                     seconds(d.prefill_queue_s.p99), seconds(d.decode_queue_s.mean), seconds(d.decode_queue_s.p99),
                     f"{100 * d.prefill_utilization:.1f}%", f"{100 * d.decode_utilization:.1f}%"])
    return rows


def summary_csv(runs: Sequence[tuple[str, ServingResult]]) -> str:
    """One row per run, every summary field in raw units (seconds, J, USD)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    flat = [(label, _flatten(r.summary.to_dict() if r.disaggregated is None else
                             {**r.summary.to_dict(), "disaggregated": r.disaggregated.to_dict()}))
            for label, r in runs]
    w.writerow(["run", *flat[0][1]])
    for label, values in flat:
        w.writerow([label, *("" if v is None else v for v in values.values())])
    return out.getvalue()


def requests_csv(result: ServingResult) -> str:
    """One row per request, in trace order (seconds)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    rows = result.to_dict()["requests"]
    w.writerow(list(rows[0]))
    for row in rows:
        w.writerow(list(row.values()))
    return out.getvalue()


def timeline_csv(result: ServingResult) -> str:
    """KV use and preemptions over time: one row per step (or run of decode steps) per replica."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["replica", "time_s", "kv_blocks_used", "kv_fraction", "running", "waiting", "preemptions"])
    for i, timeline in enumerate(result.timelines):
        for t, used, running, waiting, pre in timeline:
            w.writerow([i, t, used, used / result.config.num_blocks, running, waiting, pre])
    return out.getvalue()


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}_"))
        else:
            out[prefix + k] = v
    return out


def plot_serving(runs: Sequence[tuple[float | None, ServingResult]], path: str | os.PathLike) -> str:
    """Latency CDFs (TTFT, TPOT, end-to-end) of every run, and output throughput against request
    rate when several runs have a rate. Needs matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the serving plot needs matplotlib: pip install 'dispatchprof[plot]'") from None
    rates = [rate for rate, _ in runs if rate is not None]
    panels = 4 if len(rates) > 1 else 3
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.6))
    for ax, (name, key) in zip(axes, (_LATENCIES[0], _LATENCIES[1], _LATENCIES[3])):
        for rate, r in runs:
            values = sorted(getattr(q, key) for q in r.requests)
            n = len(values)
            ax.step(values, [(i + 1) / n for i in range(n)], where="post",
                    label="trace" if rate is None else f"{rate:g} req/s")
        ax.set_xlabel(f"{name} (s)")
        ax.set_ylabel("fraction of requests")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    if panels == 4:
        ax = axes[3]
        ax.plot(rates, [r.summary.output_tokens_per_s for rate, r in runs if rate is not None], "o-")
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel("output tokens/s")
        ax.grid(alpha=0.3)
    fig.suptitle(f"Serving on {runs[0][1].device}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return write_atomic(path, buf.getvalue())          # the one safe writer (regular files, atomic)
