"""Gaps (dispatchprof.serving.metrics): each distinct gap held once with its count; the statistics
those of the expanded list of gaps (percentiles exactly, the mean to rounding)."""

import random
from collections import Counter

import pytest

from dispatchprof.serving.metrics import Gaps, Latency, percentile


def expanded(pairs):
    return sorted(v for v, n in pairs for _ in range(n))


def test_equal_gaps_share_one_entry_and_statistics_are_the_expanded_lists():
    rng = random.Random(5)
    pairs = [(rng.choice((0.004, 0.0045, rng.random() / 100)), rng.choice((1, 1, 1, 7, 32))) for _ in range(5000)]
    gaps = Gaps()
    gaps.extend(pairs[:2500])
    for pair in pairs[2500:]:
        gaps.append(pair)
    totals = Counter()
    for v, n in pairs:
        totals[v] += n
    assert dict(gaps) == dict(totals) and len(gaps) == len(totals) < len(pairs)
    assert sorted(map(tuple, gaps.table().tolist())) == sorted((v, float(n)) for v, n in totals.items())
    values = expanded(pairs)
    latency = Latency.of_counts(gaps)
    assert (latency.median, latency.p90, latency.p99) == tuple(percentile(values, p) for p in (50, 90, 99))
    assert latency.mean == pytest.approx(sum(values) / len(values), rel=1e-12)
    halves = Gaps.joined([Gaps(pairs[:1000]), Gaps(pairs[1000:])])
    assert dict(halves) == dict(gaps) and Latency.of_counts(halves) == latency


def test_by_hand():
    """Gaps 1, 1, 2 (one token each) and 4 x 3 tokens: 6 gaps, sorted 1 1 2 4 4 4; mean 16 / 6;
    median between the 3rd and 4th (2 and 4) = 3; P90 at position 4.5 = 4."""
    gaps = Gaps([(1.0, 1), (4.0, 3), (1.0, 1), (2.0, 1)])
    assert sorted(gaps) == [(1.0, 2), (2.0, 1), (4.0, 3)]
    latency = Latency.of_counts(gaps)
    assert (latency.mean, latency.median, latency.p90) == (16 / 6, 3.0, 4.0)
    assert Latency.of_counts(Gaps()) == Latency(0.0, 0.0, 0.0, 0.0)
