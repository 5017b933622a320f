"""Gaps (dispatchprof.serving.metrics): single gaps packed as floats, the statistics those of the
same (seconds, how many) pairs held in a list, to the last bit."""

import random

from dispatchprof.serving.metrics import Gaps, Latency


def test_pairs_come_back_and_statistics_are_the_lists():
    rng = random.Random(5)
    pairs = [(rng.choice((0.004, 0.0045, rng.random() / 100)), rng.choice((1, 1, 1, 7, 32))) for _ in range(5000)]
    gaps = Gaps()
    gaps.extend(pairs[:2500])
    for pair in pairs[2500:]:
        gaps.append(pair)
    assert sorted(gaps) == sorted(pairs)
    assert sorted(map(tuple, gaps.table().tolist())) == sorted((v, float(n)) for v, n in pairs)
    assert Latency.of_counts(gaps) == Latency.of_counts(pairs)        # exact: the same sorted rows
    halves = Gaps.joined([Gaps(pairs[:1000]), Gaps(pairs[1000:])])
    assert Latency.of_counts(halves) == Latency.of_counts(pairs)


def test_by_hand():
    """Gaps 1, 1, 2 (one token each) and 4 x 3 tokens: 6 gaps, sorted 1 1 2 4 4 4; mean 16 / 6;
    median between the 3rd and 4th (2 and 4) = 3; P90 at position 4.5 = 4."""
    gaps = Gaps([(1.0, 1), (4.0, 3), (1.0, 1), (2.0, 1)])
    assert list(gaps) == [(1.0, 1), (1.0, 1), (2.0, 1), (4.0, 3)]
    latency = Latency.of_counts(gaps)
    assert (latency.mean, latency.median, latency.p90) == (16 / 6, 3.0, 4.0)
    assert Latency.of_counts(Gaps()) == Latency(0.0, 0.0, 0.0, 0.0)
