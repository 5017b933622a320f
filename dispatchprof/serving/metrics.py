"""Per-request latencies and their summary: percentiles, throughput, goodput, KV use, cost.

Per request (seconds): TTFT = first token - arrival; TPOT = (finish - first token) /
(output_tokens - 1), 0 for a single output token; end-to-end = finish - arrival.

Summary: percentiles by linear interpolation between order statistics (numpy's default);
throughput over the span from the first arrival to the last finish; goodput = requests per
second that met every SLO given (TTFT and TPOT); energy per output token; and, with a price,
US dollars per million output tokens = replicas * price per hour * span / 3600 / output tokens * 1e6.
SLOs are durations with a unit: "200ms", "0.2s", "500us".
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Sequence

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|ns)\s*$")
_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
PERCENTILES = (50, 90, 99)


def parse_duration(text: str, what: str = "duration") -> float:
    """'200ms' -> 0.2 (seconds); a number without a unit is refused."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"{what} needs a number with a unit (s, ms, us, ns) such as 200ms, got {text!r}")
    return float(m.group(1)) * _SCALE[m.group(2)]


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    v = sorted(values)
    pos = (len(v) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One served request (seconds)."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    preemptions: int
    replica: int


@dataclass(frozen=True)
class ServingSummary:
    """What a serving simulation adds up to (units in the names; percentiles as {50: s, ...})."""

    requests: int
    span_s: float
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    ttft_s: dict
    tpot_s: dict
    e2e_s: dict
    ttft_mean_s: float
    tpot_mean_s: float
    goodput_requests_per_s: float | None
    slo_attainment: float | None
    preemptions: int
    kv_blocks: int
    kv_peak_fraction: float
    energy_j: float
    energy_per_token_j: float
    usd_per_million_tokens: float | None

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("ttft_s", "tpot_s", "e2e_s"):
            d[key] = {f"p{p}": v for p, v in d[key].items()}
        return d


def request_results(seqs: Sequence) -> list[RequestResult]:
    """RequestResults of finished engine states, in their order."""
    out = []
    for s in seqs:
        r = s.request
        tpot = (s.finish_s - s.first_token_s) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        out.append(RequestResult(r.arrival_s, r.prompt_tokens, r.output_tokens, s.first_token_s - r.arrival_s,
                                 tpot, s.finish_s - r.arrival_s, s.preemptions, s.replica))
    return out


def summarize(results: Sequence[RequestResult], finish_s: Sequence[float], *, kv_blocks: int, kv_peak: float,
              preemptions: int, energy_j: float, replicas: int, slo_ttft_s: float | None = None,
              slo_tpot_s: float | None = None, price_usd_per_h: float | None = None) -> ServingSummary:
    """The summary of the module docstring."""
    start = min(r.arrival_s for r in results)
    span = max(finish_s) - start
    out_tokens = sum(r.output_tokens for r in results)
    all_tokens = out_tokens + sum(r.prompt_tokens for r in results)
    per_s = (lambda n: n / span) if span > 0 else (lambda n: 0.0)
    goodput = attainment = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        good = sum(1 for r in results if (slo_ttft_s is None or r.ttft_s <= slo_ttft_s)
                   and (slo_tpot_s is None or r.tpot_s <= slo_tpot_s))
        goodput, attainment = per_s(good), good / len(results)
    usd = None if price_usd_per_h is None else replicas * price_usd_per_h * span / 3600 / out_tokens * 1e6

    def pct(values: list[float]) -> dict:
        return {p: percentile(values, p) for p in PERCENTILES}

    ttft, tpot = [r.ttft_s for r in results], [r.tpot_s for r in results]
    return ServingSummary(len(results), span, per_s(len(results)), per_s(out_tokens), per_s(all_tokens),
                          pct(ttft), pct(tpot), pct([r.e2e_s for r in results]), sum(ttft) / len(ttft),
                          sum(tpot) / len(tpot), goodput, attainment, preemptions, kv_blocks, kv_peak, energy_j,
                          energy_j / out_tokens, usd)
