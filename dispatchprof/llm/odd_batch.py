"""A mixture-of-experts decoder's fit at one batch size that balanced routing does not split evenly
(Mixtral's batch 1, 2, 3, 5, ...), so that its decode steps come from polynomials too.

Under balanced routing (dispatchprof.llm.models.balanced_split) a pass of T tokens sends T k
token-expert pairs to E experts, T k / E each where E divides T k. At batch b the decode step's
own T = b is fixed: its records (the step's MoE with its idle experts, attention over the cache,
the cache append) are the same op stream at every cache length n, and their numbers polynomials
in n. The setup prefill before it (T = b n) splits evenly only where n is a multiple of
s_b = E / gcd(E, b k), and elsewhere as a floor. So `fit_batch` fits the count at batch b with n
as the only variable on lengths that are multiples of s_b (the decoder grid 32, 64, 128, checked
at the multiple of s_b at or above 200): there the whole count (prefill and step) is exact, as in
dispatchprof.llm.shape_generic. It then counts n = that held-out length + 1, not a multiple of
s_b, and compares the step's own records (from the step's first record: op, scope, counts,
bytes, shapes, producers) and the KV bytes after the step with the polynomials: where they agree,
the step's records are answered at every n of the region (`BatchFit.steps_everywhere`), the
profile as a whole only at multiples of s_b.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

from dispatchprof.count.generic import GenericFit, GenericProfile, Sizes, fit_generic
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import OpRecord


@dataclass(frozen=True)
class BatchFit:
    """Fits (decode step, prefill) at one batch size: whole profiles at lengths that are multiples
    of ``modulus``; the step's own records at every length of the region where ``steps_everywhere``."""

    step: GenericFit
    prefill: GenericFit
    modulus: int
    steps_everywhere: bool
    reason: str = ""            # why the steps are not answered at every length ('' when they are)


def modulus(batch: int, experts: int, top_k: int) -> int:
    """s_b = E / gcd(E, b k): the lengths n whose b n k prefill pairs split evenly over E experts
    are its multiples."""
    return experts // math.gcd(experts, batch * top_k)


def fit_batch(count: Callable[[int, int], tuple[Profile, tuple[int, ...], Profile, tuple[int, ...], int]],
              batch: int, experts: int, top_k: int, high: int | None, lengths: tuple[int, ...],
              held_length: int) -> BatchFit:
    """The fits at ``batch`` (module docstring) on the grid ``lengths``, held out at the multiple of
    s_b at or above ``held_length``. ``count(batch, n)`` gives (decode-step profile with its setup
    prefill, its extras (step start, KV per layer after the prefill, after the step), prefill
    profile, its extras (KV per layer), step start)."""
    s = modulus(batch, experts, top_k)
    if any(n % s for n in lengths):
        reason = f"lengths {lengths} are not all multiples of {s}"
        none = GenericFit(None, reason)
        return BatchFit(none, none, s, False, reason)
    held = -(-held_length // s) * s
    snapshots: dict[Sizes, tuple[Profile, tuple[int, ...]]] = {}

    def count_step(sizes: Sizes) -> tuple[Profile, tuple[int, ...]]:
        step, extra, prefill, prefill_extra, _ = count(*sizes)
        snapshots[sizes] = (prefill, prefill_extra)
        return step, extra

    args = (("batch", "n"), ((batch,), lengths), (batch, held), (batch, lengths[0]), (batch, high))
    step = fit_generic(count_step, *args)
    prefill = fit_generic(lambda sz: snapshots[sz], *args) if step.profile else step
    if step.profile is None or prefill.profile is None:
        reason = (step.reason or prefill.reason)
        return BatchFit(GenericFit(None, reason, step.counts), prefill, s, False, reason)
    if high is not None and held + 1 > high:
        return BatchFit(step, prefill, s, False, f"{held + 1} lies above the window")
    profile, extra, _, _, start = count(batch, held + 1)
    wrong = step_mismatch(step.profile, profile, extra, start, (batch, held + 1))
    return BatchFit(step, prefill, s, not wrong, wrong)


def step_records(fit: GenericProfile, sizes: Sizes, start: int) -> tuple[tuple[OpRecord, ...], tuple[int, ...]]:
    """Records ``start`` .. of ``fit`` at ``sizes`` and its extra integers, with every one of their
    numbers exact (ArithmeticError where the polynomial is not an integer there); the records
    before ``start`` are not evaluated exactly."""
    numer = fit.numerators_at(sizes)
    d = fit.denominator
    own = fit.record_rows(start)
    for i in own:
        if numer[i] % d:
            raise ArithmeticError(i, f"value {i} of the fit is not an integer at {sizes}")
    profile, extra = fit.rebuild([a // d for a in numer])
    return profile.records[start:], extra


def step_mismatch(fit: GenericProfile, profile: Profile, extra: tuple[int, ...], start: int, sizes: Sizes) -> str:
    """'' when the step's own records (from ``start``) and the KV bytes after the step of a direct
    count (``profile``, ``extra``) equal ``fit``'s at ``sizes``, else what differs."""
    plain = lambda rs: [dataclasses.replace(r, inputs=tuple((p, b) for p, b, _ in r.inputs), host_loops=0.0)  # noqa
                        for r in rs]
    if len(profile.records) != len(fit.template.records):
        return f"the count at {sizes} runs {len(profile.records)} records, the fit {len(fit.template.records)}"
    try:
        records, got_extra = step_records(fit, sizes, start)
    except ArithmeticError as e:
        return f"the fit is not an integer at {sizes}: {e.args[-1]}"
    layers = (len(extra) - 1) // 2
    if plain(records) != plain(profile.records[start:]):
        k = next(i for i, (a, b) in enumerate(zip(plain(records), plain(profile.records[start:]))) if a != b)
        return f"the step's record {start + k} at {sizes} differs from the fit"
    if got_extra[1 + layers:] != extra[1 + layers:]:
        return f"the KV bytes after the step at {sizes} differ from the fit"
    return ""


__all__ = ["BatchFit", "fit_batch", "modulus", "step_mismatch", "step_records"]
