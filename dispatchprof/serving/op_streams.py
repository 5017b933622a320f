"""The one op stream of a model's counted steps, with the ops that run only in multi-token steps.

Some models run ops only when a sequence has more than one new token (DeepSeek-V3's, Kimi-K2's and
gpt-oss's attention output: a ``reshape`` that is a view for one token and a copy, ``aten.clone``,
for more). The counted steps then form two streams: decode steps (q = 1) and multi-token steps
(q > 1), the first a subsequence of the second. Rules: all decode steps have one stream, all
multi-token steps one, and the decode stream is the multi-token one with ops left out (in order);
else the model's steps are not one op stream and the serving cost model refuses it (ValueError).
Where both streams are equal, every step must have it. The fit (`dispatchprof.serving.fit`) takes
the positions this module finds.
"""

from __future__ import annotations

from typing import Sequence

from dispatchprof.serving.counting import CountedStep


def one_op_stream(steps: Sequence[CountedStep]) -> tuple[tuple, dict[int, list[int]], set[int]]:
    """The op stream of the multi-token steps (keys), per step (by id) the index of each stream op
    in its own ops (-1: absent), and the stream positions of ops only in multi-token steps. Every
    decode step must have one stream, every multi-token step one, the first a subsequence of the
    second (module docstring); else the model's steps are not one op stream."""
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
        return first.keys, {id(s): same for s in steps}, set()
    full, part = multi[0].keys, single[0].keys
    positions, j = [], 0
    for i, key in enumerate(full):            # the decode stream in order within the multi-token one
        if j < len(part) and part[j] == key:
            positions.append(j)
            j += 1
        else:
            positions.append(-1)
    if j != len(part):
        raise refuse(single[0], multi[0])
    same = list(range(len(full)))
    index_of = {id(s): (same if s.q > 1 else positions) for s in steps}
    return full, index_of, {i for i, p in enumerate(positions) if p < 0}


def first_difference(keys: Sequence[tuple[str, str, str]], other: Sequence[tuple[str, str, str]]) -> str:
    """Where two op streams (keys: op, scope, dtype) first part, as " (first at op k: OP in SCOPE
    against OP in SCOPE)", '' where they do not."""
    k = next((i for i, (a, b) in enumerate(zip(keys, other)) if a != b), min(len(keys), len(other)))
    if k == len(keys) == len(other):
        return ""

    def at(stream: Sequence[tuple[str, str, str]]) -> str:
        return f"{stream[k][0]} in {stream[k][1] or '(the root)'}" if k < len(stream) else "the stream's end"
    return f" (first at op {k}: {at(keys)} against {at(other)})"
