"""The one op stream of a model's counted steps: its ops, and those that run only in multi-token
steps or only in decode steps.

Some models run ops only when a sequence has more than one new token (DeepSeek-V3's, Kimi-K2's and
gpt-oss's attention output: a ``reshape`` that is a view for one token and a copy, ``aten.clone``,
for more), and a model may decode through ops its prefills do not run (multi-head latent attention
absorbed for decodes and expanded for prefills, `dispatchprof.llm.mla`). The counted steps then
form two streams: decode steps (q = 1) and multi-token steps (q > 1). Rules: all decode steps have
one stream, all multi-token steps one; where the decode stream is the multi-token one with ops left
out (in order), the multi-token stream is the stream and those ops run only in multi-token steps
(the first occurrence matched, in order); else the two streams are merged where they agree
(`difflib.SequenceMatcher`'s matching blocks without junk, in order, found in linear time by
`dispatchprof.serving.block_matcher`), every other op running only in the steps
of its own stream. Where both streams are equal, every step must have it. The fit
(`dispatchprof.serving.fit`) takes the positions this module finds.
"""

from __future__ import annotations

from typing import Sequence

from dispatchprof.serving.block_matcher import BlockMatcher
from dispatchprof.serving.counting import CountedStep


def one_op_stream(steps: Sequence[CountedStep]) -> tuple[tuple, dict[int, list[int]], set[int], set[int]]:
    """The op stream (keys), per step (by id) the index of each stream op in its own ops (-1:
    absent), and the stream positions of the ops only in multi-token steps and of those only in
    decode steps. Every decode step must have one stream, every multi-token step one (module
    docstring); else the model's steps are not one op stream."""
    def refuse(s: CountedStep, first: CountedStep) -> ValueError:
        return ValueError(f"the op stream of a step of {s.batch} x {s.q} tokens after {s.past} differs from that "
                          f"of {first.batch} x {first.q} after {first.past}{first_difference(s.keys, first.keys)}: "
                          f"this model's steps are not one op stream, which the serving cost model needs")

    single = [s for s in steps if s.q == 1]
    multi = [s for s in steps if s.q > 1]
    for group in (single, multi):
        for s in group[1:]:
            if s.keys != group[0].keys or any(len(s.ops[n]) != len(group[0].ops[n]) for n in group[0].ops):
                raise refuse(s, group[0])
    if not single or not multi or single[0].keys == multi[0].keys:
        first = steps[0]
        for s in steps[1:]:
            if s.keys != first.keys or any(len(s.ops[n]) != len(first.ops[n]) for n in first.ops):
                raise refuse(s, first)
        same = list(range(len(first.keys)))
        return first.keys, {id(s): same for s in steps}, set(), set()
    full, part = multi[0].keys, single[0].keys
    pairs = _subsequence(full, part) or _merged(full, part)
    stream = tuple(full[i] if i >= 0 else part[j] for i, j in pairs)
    in_multi, in_single = [i for i, _ in pairs], [j for _, j in pairs]
    index_of = {id(s): (in_multi if s.q > 1 else in_single) for s in steps}
    return (stream, index_of, {k for k, (_, j) in enumerate(pairs) if j < 0},
            {k for k, (i, _) in enumerate(pairs) if i < 0})


def _subsequence(full: Sequence, part: Sequence) -> list[tuple[int, int]] | None:
    """(index in ``full``, index in ``part`` or -1) per op of ``full`` where ``part`` is ``full``
    with ops left out (each matched at its first occurrence, in order); None where it is not."""
    pairs, j = [], 0
    for i, key in enumerate(full):
        if j < len(part) and part[j] == key:
            pairs.append((i, j))
            j += 1
        else:
            pairs.append((i, -1))
    return pairs if j == len(part) else None


def _merged(full: Sequence, part: Sequence) -> list[tuple[int, int]]:
    """Both streams in one order: (index in ``full`` or -1, index in ``part`` or -1) per op,
    ops matched where `difflib.SequenceMatcher` (without junk) finds them equal, the others of
    ``full`` then of ``part`` between them."""
    codes: dict = {}                            # ops as small integers: the same blocks, cheaper to hash
    a, b = ([codes.setdefault(key, len(codes)) for key in keys] for keys in (full, part))
    pairs: list[tuple[int, int]] = []
    for tag, a0, a1, b0, b1 in BlockMatcher(a, b).get_opcodes():
        if tag == "equal":
            pairs += zip(range(a0, a1), range(b0, b1))
        else:
            pairs += [(i, -1) for i in range(a0, a1)] + [(-1, j) for j in range(b0, b1)]
    return pairs


def first_difference(keys: Sequence[tuple[str, str, str]], other: Sequence[tuple[str, str, str]]) -> str:
    """Where two op streams (keys: op, scope, dtype) first part, as " (first at op k: OP in SCOPE
    against OP in SCOPE)", '' where they do not."""
    k = next((i for i, (a, b) in enumerate(zip(keys, other)) if a != b), min(len(keys), len(other)))
    if k == len(keys) == len(other):
        return ""

    def at(stream: Sequence[tuple[str, str, str]]) -> str:
        return f"{stream[k][0]} in {stream[k][1] or '(the root)'}" if k < len(stream) else "the stream's end"
    return f" (first at op {k}: {at(keys)} against {at(other)})"
