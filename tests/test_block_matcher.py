"""BlockMatcher (dispatchprof.serving.block_matcher) gives difflib's longest matches and opcodes
without junk: by hand, and against difflib itself on random and expert-like sequences."""

import difflib
import random

from dispatchprof.serving.block_matcher import BlockMatcher


def test_longest_match_by_hand():
    """"ab" and "cd" are both two long: the earlier in a wins; of "ab" twice in b, the earlier."""
    assert tuple(BlockMatcher("abxcd", "abycd").find_longest_match()) == (0, 0, 2)
    assert tuple(BlockMatcher("ab", "xabab").find_longest_match()) == (0, 1, 2)
    assert tuple(BlockMatcher("ab", "xabab").find_longest_match(0, 2, 2, 5)) == (0, 3, 2)   # "ab" at b[3:5]
    assert tuple(BlockMatcher("abc", "xyz").find_longest_match()) == (0, 0, 0)
    assert tuple(BlockMatcher("abc", "xyz").find_longest_match(1, 3, 2, 3)) == (1, 2, 0)
    assert BlockMatcher("abxcd", "abycd").get_opcodes() == [("equal", 0, 2, 0, 2), ("replace", 2, 3, 2, 3),
                                                           ("equal", 3, 5, 3, 5)]


def _same(a, b, rng, regions=5):
    ours, theirs = BlockMatcher(a, b), difflib.SequenceMatcher(None, a, b, autojunk=False)
    assert ours.get_opcodes() == theirs.get_opcodes(), (a, b)
    for _ in range(regions):
        alo, blo = rng.randint(0, len(a)), rng.randint(0, len(b))
        ahi, bhi = rng.randint(alo, len(a)), rng.randint(blo, len(b))
        assert ours.find_longest_match(alo, ahi, blo, bhi) == theirs.find_longest_match(alo, ahi, blo, bhi), \
            (a, b, alo, ahi, blo, bhi)


def test_random_sequences_match_difflib():
    """Short sequences over 2 to 5 symbols (many ties), b a noisy copy of a or unrelated."""
    rng = random.Random(7)
    for _ in range(2000):
        symbols = rng.randint(1, 4)
        a = [rng.randint(0, symbols) for _ in range(rng.randint(0, 40))]
        if rng.random() < 0.5:
            b = [x if rng.random() < 0.8 else rng.randint(0, symbols) for x in a]
            b += [rng.randint(0, symbols) for _ in range(rng.randint(0, 5))]
        else:
            b = [rng.randint(0, symbols) for _ in range(rng.randint(0, 40))]
        _same(a, b, rng)


def test_expert_like_streams_match_difflib():
    """Layers of a router, many experts' identical ops and an attention op that differs between
    the two streams in some layers (the shape of a mixture-of-experts model's multi-token and
    decode streams)."""
    rng = random.Random(3)
    for _ in range(20):
        a, b = [], []
        for layer in range(rng.randint(1, 6)):
            experts = [("mm", layer), ("silu", layer), ("mm", layer), ("index_add", layer)] * rng.randint(1, 12)
            a += [("router", layer), ("clone", layer) if rng.random() < 0.7 else ("view", layer)] + experts
            b += [("router", layer), ("view", layer)] + experts
        _same(a, b, rng, regions=20)
