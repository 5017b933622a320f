"""Per-request latencies and their summary, defined as serving benchmarks report them.

Per request (seconds), as ``vllm bench serve`` defines them (vllm/benchmarks/serve.py):
TTFT = first token - the time the request was sent; end-to-end (E2E) = last token - sent;
TPOT = (E2E - TTFT) / (output_tokens - 1), the mean gap after the first token (a request of one
output token has none and is left out of TPOT's statistics, as there); ITL = every gap between
two consecutive tokens of a request (a step that emits several tokens, under speculative
decoding, is one gap), pooled over all requests.

Summary: mean, median, P90 and P99 of each (`Latency`; percentiles by linear interpolation
between order statistics, numpy's default); warm-up requests (the first ``warmup`` sent) are
left out of every statistic and of the span. Throughput is over the span from the first measured
request's send to the last measured finish: requests/s, output tokens/s, total tokens/s, and
output tokens/s per GPU (over replicas x tensor-parallel devices). Goodput = requests per second
that met every SLO given (TTFT and TPOT). Energy per output token (of the whole run, warm-up
included, as the energy is); with a price, US dollars per
million output tokens = GPUs * price per GPU-hour * span / 3600 / output tokens * 1e6.
SLOs are durations with a unit: "200ms", "0.2s", "500us".
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

import numpy as np

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|ns)\s*$")
_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def parse_duration(text: str, what: str = "duration") -> float:
    """'200ms' -> 0.2 (seconds); a number without a unit is refused."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"{what} needs a number with a unit (s, ms, us, ns) such as 200ms, got {text!r}")
    return float(m.group(1)) * _SCALE[m.group(2)]


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) by linear interpolation; 0 for no values."""
    return weighted_percentile(sorted((v, 1) for v in values), p)


def weighted_percentile(pairs: Sequence[tuple[float, int]], p: float) -> float:
    """The p-th percentile of the values ``pairs`` = sorted (value, how many times) stand for,
    exactly as `percentile` of the expanded list; 0 for none."""
    values, ends = _ordered(pairs, presorted=True)
    return _percentile(values, ends, p)


class Gaps:
    """Inter-token gaps as a multiset: each distinct gap (seconds) with how many tokens had it.
    The tokens of one step that follow a token of the step before share one gap, so a run of
    thousands of clients keeps about one entry per step, not one per token (hundreds of
    millions). Iterating gives (seconds, how many) per distinct gap; `table` gives them as one
    array, whose percentiles are those of the expanded gaps (the mean, a sum of products, equal
    to rounding)."""

    __slots__ = ("_count",)

    def __init__(self, pairs: Iterable[tuple[float, int]] = ()) -> None:
        self._count: dict[float, int] = {}
        self.extend(pairs)

    def append(self, pair: tuple[float, int]) -> None:
        value, n = pair
        self._count[value] = self._count.get(value, 0) + n

    def extend(self, pairs: Iterable[tuple[float, int]]) -> None:
        count = self._count
        for value, n in pairs:
            count[value] = count.get(value, 0) + n

    def __iter__(self):
        return iter(self._count.items())

    def __len__(self) -> int:
        """Distinct gaps held."""
        return len(self._count)

    def table(self) -> np.ndarray:
        """Every distinct gap as a row (seconds, how many) of a float64 array."""
        return np.array(list(self._count.items()), dtype=np.float64).reshape(-1, 2)

    @staticmethod
    def joined(parts: Iterable[Gaps]) -> Gaps:
        """One Gaps of all of ``parts``' gaps."""
        out = Gaps()
        for part in parts:
            out.extend(part)
        return out


def _ordered(pairs: Iterable[tuple[float, int]] | Gaps, presorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The values of (value, how many times) ``pairs`` in ascending order, and per value the
    index after its last copy in the expanded list (the cumulated counts)."""
    if isinstance(pairs, Gaps):
        table = pairs.table()
    else:
        table = np.array([(v, w) for v, w in pairs], dtype=np.float64).reshape(-1, 2)
    if not presorted:
        table = table[np.lexsort((table[:, 1], table[:, 0]))]
    return table[:, 0], np.cumsum(table[:, 1].astype(np.int64))


def _percentile(values: np.ndarray, ends: np.ndarray, p: float) -> float:
    """`weighted_percentile` of `_ordered`'s arrays."""
    total = int(ends[-1]) if len(ends) else 0
    if not total:
        return 0.0
    pos = (total - 1) * p / 100
    lo = math.floor(pos)
    low = float(values[np.searchsorted(ends, lo, side="right")])           # the lo-th order statistic
    high = float(values[np.searchsorted(ends, min(lo + 1, total - 1), side="right")])
    return low + (high - low) * (pos - lo)


@dataclass(frozen=True, slots=True)
class Latency:
    """Mean, median, P90 and P99 of a latency (seconds)."""

    mean: float
    median: float
    p90: float
    p99: float

    @staticmethod
    def of(values: Iterable[float]) -> Latency:
        return Latency.of_counts([(v, 1) for v in values])

    @staticmethod
    def of_counts(pairs: Iterable[tuple[float, int]] | Gaps) -> Latency:
        """From (value, how many times) pairs (a step's gap, shared by the sequences it served)."""
        values, ends = _ordered(pairs)
        total = int(ends[-1]) if len(ends) else 0
        # the products summed one after another in ascending order (cumsum, not numpy's pairwise sum)
        mean = float(np.cumsum(values * np.diff(ends, prepend=0))[-1]) / total if total else 0.0
        return Latency(mean, *(_percentile(values, ends, p) for p in (50, 90, 99)))


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One served request (seconds; ``arrival_s`` is when it was sent)."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    preemptions: int
    replica: int
    cached_tokens: int = 0
    warmup: bool = False


@dataclass(frozen=True)
class ServingSummary:
    """What a serving simulation adds up to (units in the names)."""

    requests: int
    warmup_requests: int
    span_s: float
    requests_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    total_tokens_per_s: float
    ttft_s: Latency
    tpot_s: Latency
    itl_s: Latency
    e2e_s: Latency
    goodput_requests_per_s: float | None
    slo_attainment: float | None
    preemptions: int
    kv_blocks: int
    kv_peak_fraction: float
    energy_j: float
    energy_per_token_j: float
    usd_per_million_tokens: float | None
    gpus: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


def request_results(seqs: Sequence, warmup: int = 0) -> list[RequestResult]:
    """RequestResults of finished engine states, in their order; the first ``warmup`` sent are
    marked as warm-up."""
    out = []
    for s in seqs:
        r = s.request
        tpot = (s.finish_s - s.first_token_s) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        out.append(RequestResult(s.sent_s, r.prompt_tokens, r.output_tokens, s.first_token_s - s.sent_s,
                                 tpot, s.finish_s - s.sent_s, s.preemptions, s.replica, s.cached,
                                 s.send_order < warmup))
    return out


def summarize(results: Sequence[RequestResult], gaps: Iterable[tuple[float, int]] | Gaps, *, kv_blocks: int,
              kv_peak: float, preemptions: int, energy_j: float, gpus: int, slo_ttft_s: float | None = None,
              slo_tpot_s: float | None = None, price_usd_per_h: float | None = None) -> ServingSummary:
    """The summary of the module docstring over the results not marked warm-up; ``gaps`` are the
    measured requests' inter-token gaps as (seconds, how many); ``price_usd_per_h`` per GPU."""
    measured = [r for r in results if not r.warmup]
    if not measured:
        raise ValueError(f"all {len(results)} requests are warm-up: nothing is left to measure")
    start = min(r.arrival_s for r in measured)
    span = max(r.arrival_s + r.e2e_s for r in measured) - start
    out_tokens = sum(r.output_tokens for r in measured)
    all_tokens = out_tokens + sum(r.prompt_tokens for r in measured)
    per_s = (lambda n: n / span) if span > 0 else (lambda n: 0.0)
    goodput = attainment = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        good = sum(1 for r in measured if (slo_ttft_s is None or r.ttft_s <= slo_ttft_s)
                   and (slo_tpot_s is None or r.tpot_s <= slo_tpot_s))
        goodput, attainment = per_s(good), good / len(measured)
    usd = None if price_usd_per_h is None else gpus * price_usd_per_h * span / 3600 / out_tokens * 1e6
    return ServingSummary(
        len(measured), len(results) - len(measured), span, per_s(len(measured)), per_s(out_tokens),
        per_s(out_tokens) / gpus, per_s(all_tokens), Latency.of(r.ttft_s for r in measured),
        Latency.of(r.tpot_s for r in measured if r.output_tokens > 1), Latency.of_counts(gaps),
        Latency.of(r.e2e_s for r in measured), goodput, attainment, preemptions, kv_blocks, kv_peak, energy_j,
        energy_j / sum(r.output_tokens for r in results), usd, gpus)
