"""Shape-generic profiles: one op stream whose every number is an exact polynomial in the sizes.

A transformer runs the same ops, in the same module scopes and order, for every batch size and
sequence length of one regime; only the numbers change: each op's counts, bytes, element counts
and tensor dimensions, each scope's ACT/CACHE/PEAK, the KV cache's bytes. Within the regime each
of them is a polynomial of low degree in the sizes (a linear layer's MACs are ``B * n * K * N``,
prefill attention's scores ``B * H * n * n * E``). `fit_generic` counts a profile at the points of
a grid (``degree + 1`` values per size: 2 batch sizes x 3 lengths for degrees (1, 2)), checks that
every point ran the identical op stream (the guard: op names, scopes, phases, dtypes, which
tensor produced each input, tensor ranks), solves each number's polynomial exactly (rational
Lagrange interpolation, one common denominator) and checks it at a held-out point outside the
grid. `GenericProfile.evaluate(sizes)` then gives the profile of any shape of the region without
counting, in exact integers; ``save``/``load`` keep it in a JSON file, so that a saved count
answers new shapes without the model.

Not functions of the shape, taken from the first grid point (the template): measured host time
(``host_loops``, ``latency_s``, ``phase_wall``) and tensor identities (storage ids: the
allocator reuses addresses differently from one count to the next, even at the same shape, so
they are no part of the guard; which record produced each input is).

Peaks of live bytes (a scope's PEAK, each phase's peak, the profile's) are maxima over the
moments of a count, and which moment holds the maximum can change with the shape (a decode step's
peak is its logits at short cache lengths and the grown KV tensors at long ones). Such a peak can
fail the held-out check while everything else passes: the fit is still used, and
``GenericProfile.inexact`` names those peaks, whose value is then the polynomial's (rounded down).
Peaks are therefore approximations away from the grid points, even those that passed the check
(their moment may move between the held-out point and another shape); counts, bytes, shapes,
the other scope quantities and so simulated times are exact.
A model whose op stream depends on the sizes inside the grid (data-dependent control flow, a
one-token query path) gets a `GenericFit` with ``profile=None`` and the reason; callers count
directly there.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np

from dispatchprof.results.files import read_json, write_atomic
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import COUNT_FIELDS, OpRecord, UnknownOp
from op_formulas.cost import Cost

Sizes = tuple[int, ...]
#: Counts one shape: sizes -> (profile, extra integers such as KV bytes per layer).
CountFn = Callable[[Sizes], tuple[Profile, tuple[int, ...]]]

#: The file schema of a saved `GenericProfile`.
SCHEMA = "dispatchprof.generic"
_SCOPE_INTS = ("calls", "params", "params_bytes", "params_self", "params_self_bytes", "buffers", "buffers_bytes",
               "act", "act_bytes", "cache", "peak_bytes")


def _flatten(profile: Profile, extra: Sequence[int]) -> tuple[tuple, list[int]]:
    """(structure key, every shape-dependent integer in a fixed order) of a profile."""
    key: list = []
    values: list[int] = []
    for r in profile.records:
        cost = [getattr(r.cost, f) for f in COUNT_FIELDS]
        inputs = tuple(p for p, _, _ in r.inputs)
        key.append((r.op, r.scope, r.phase, r.dtype, r.causal, tuple(v is None for v in cost), inputs,
                    tuple(len(s) for s in r.shapes)))
        values += [v for v in cost if v is not None]
        values += [r.param_bytes, r.param_elements, r.out_elements, r.host_calls]
        values += [d for s in r.shapes for d in s]
        values += [b for _, b, _ in r.inputs]
    for s in profile.scopes:
        key.append((s.name, s.module_type, s.parent))
        values += [getattr(s, f) for f in _SCOPE_INTS]
    for u in profile.unknown:
        key.append((u.op, u.scopes, u.reason))
        values.append(u.calls)
    key.append(tuple(op for op, _ in profile.zero_cost_calls))
    values += [n for _, n in profile.zero_cost_calls]
    key.append(tuple(ph for ph, _ in profile.phase_peaks))
    values += [n for _, n in profile.phase_peaks] + [profile.peak_bytes]
    key.append(len(extra))
    values += list(extra)
    return tuple(key), values


def _rebuild(template: Profile, values: Sequence[int], n_extra: int) -> tuple[Profile, tuple[int, ...]]:
    """The inverse of `_flatten` on ``template``'s structure."""
    it = iter(values)
    take = lambda n: [next(it) for _ in range(n)]                       # noqa: E731
    records = []
    for r in template.records:
        cost = [None if getattr(r.cost, f) is None else next(it) for f in COUNT_FIELDS]
        pb, pe, oe, hc = take(4)
        shapes = tuple(tuple(take(len(s))) for s in r.shapes)
        inputs = tuple((p, next(it), t) for p, _, t in r.inputs)
        records.append(OpRecord(r.op, r.scope, r.phase, r.dtype, Cost(*cost), r.causal, inputs, pb, pe, oe, shapes,
                                r.host_loops, hc))
    scopes = tuple(dataclasses.replace(s, **dict(zip(_SCOPE_INTS, take(len(_SCOPE_INTS))))) for s in template.scopes)
    unknown = tuple(UnknownOp(u.op, next(it), u.scopes, u.reason) for u in template.unknown)
    zero = tuple((op, next(it)) for op, _ in template.zero_cost_calls)
    peaks = tuple((ph, next(it)) for ph, _ in template.phase_peaks)
    peak = next(it)
    extra = tuple(take(n_extra))
    return dataclasses.replace(template, records=tuple(records), scopes=scopes, unknown=unknown, zero_cost_calls=zero,
                               phase_peaks=peaks, peak_bytes=peak), extra


def _inverse_vandermonde(points: Sequence[int]) -> list[list[Fraction]]:
    """M such that coefficients (x^0, x^1, ...) = M @ values at ``points`` (exact)."""
    n = len(points)
    a = [[Fraction(p) ** j for j in range(n)] + [Fraction(int(i == r)) for i in range(n)] for r, p in enumerate(points)]
    for c in range(n):                                                  # Gauss-Jordan on [V | I]
        piv = next(r for r in range(c, n) if a[r][c] != 0)
        a[c], a[piv] = a[piv], a[c]
        a[c] = [x / a[c][c] for x in a[c]]
        for r in range(n):
            if r != c and a[r][c] != 0:
                f = a[r][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [row[n:] for row in a]


@dataclass(frozen=True)
class GenericProfile:
    """A profile as exact polynomials in ``variables`` (see the module docstring): value =
    (sum over monomials m of numerators[field, m] * m(sizes)) / denominator, integer at every
    integer point of the region ``low[i] <= sizes[i] <= high[i]`` (None: unbounded)."""

    variables: tuple[str, ...]
    degrees: tuple[int, ...]
    low: tuple[int, ...]
    high: tuple[int | None, ...]
    template: Profile
    n_extra: int
    numerators: np.ndarray          # (fields, monomials), int64 or object (Python ints)
    denominator: int
    checked_at: Sizes               # the held-out point
    inexact: tuple[str, ...] = ()   # peaks the held-out check found not polynomial (approximate)
    inexact_index: frozenset[int] = frozenset()   # their positions among the values

    def covers(self, sizes: Sizes) -> bool:
        """True when ``sizes`` lie in the region the fit holds for."""
        return all(lo <= s and (hi is None or s <= hi) for s, lo, hi in zip(sizes, self.low, self.high))

    def values(self, sizes: Sizes) -> list[int]:
        """Every shape-dependent integer at ``sizes`` (exact; the ``inexact`` ones rounded down)."""
        d = self.denominator
        out = self.numerators_at(sizes)
        if d != 1:
            bad = next((i for i, a in enumerate(out) if a % d and i not in self.inexact_index), None)
            if bad is not None:
                raise ArithmeticError(bad, f"the fitted polynomial of value {bad} is not an integer at {sizes}")
            out = [a // d for a in out]
        return out

    def numerators_at(self, sizes: Sizes) -> list[int]:
        """denominator x every value at ``sizes`` (exact integers)."""
        if len(sizes) != len(self.variables) or not self.covers(sizes):
            raise ValueError(f"sizes {sizes} for {self.variables} lie outside the fitted region "
                             f"{list(zip(self.low, self.high))}")
        mono = [math.prod(s ** e for s, e in zip(sizes, exps))
                for exps in itertools.product(*(range(d + 1) for d in self.degrees))]
        bound = np.abs(self.numerators.astype(np.float64)) @ np.asarray(mono, dtype=np.float64)
        if self.numerators.dtype == np.int64 and bound.max(initial=0.0) < 2.0 ** 62:
            acc = self.numerators @ np.asarray(mono, dtype=np.int64)
        else:
            acc = self.numerators.astype(object) @ np.asarray(mono, dtype=object)
        return [int(a) for a in acc]

    def evaluate(self, sizes: Sizes) -> tuple[Profile, tuple[int, ...]]:
        """The profile (and the extra integers) a direct count at ``sizes`` gives."""
        return _rebuild(self.template, self.values(sizes), self.n_extra)

    def rebuild(self, values: Sequence[int]) -> tuple[Profile, tuple[int, ...]]:
        """The profile and extra integers of ``values`` (one per row, the order of `values`)."""
        return _rebuild(self.template, values, self.n_extra)

    def record_rows(self, start: int = 0) -> list[int]:
        """Rows of `values` that hold the numbers of records ``start`` .. (`record_layout`), then
        the rows of the extra integers."""
        rows: list[int] = []
        for cost, pb, pe, oe, hc, shapes, inputs in record_layout(self.template)[start:]:
            rows += [c for c in cost if c is not None] + [pb, pe, oe, hc] + [d for s in shapes for d in s]
            rows += list(inputs)
        tail = tail_rows(self.template, self.n_extra)
        return rows + [tail[f"extra {k}"] for k in range(self.n_extra)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (schema "dispatchprof.generic", version 1): the template profile's own
        file form (`Profile.to_dict`) and the polynomials as exact integers."""
        return {"schema": SCHEMA, "version": 1, "variables": list(self.variables), "degrees": list(self.degrees),
                "low": list(self.low), "high": list(self.high), "n_extra": self.n_extra,
                "denominator": self.denominator, "numerators": [[int(c) for c in row] for row in self.numerators],
                "checked_at": list(self.checked_at), "inexact": list(self.inexact),
                "inexact_index": sorted(self.inexact_index), "template": self.template.to_dict()}

    @staticmethod
    def from_dict(data: Any, where: str = "generic profile") -> GenericProfile:
        """The inverse of `to_dict`; a wrong schema or shape raises ValueError naming ``where``."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("version") != 1:
            raise ValueError(f"{where}: not a dispatchprof generic profile (expected \"schema\": \"{SCHEMA}\", "
                             f"version 1)")
        try:
            rows = data["numerators"]
            big = any(abs(c) >= 2 ** 62 for row in rows for c in row)
            width = math.prod(d + 1 for d in data["degrees"])
            arr = np.array(rows, dtype=object if big else np.int64).reshape(len(rows), width)
            return GenericProfile(tuple(data["variables"]), tuple(data["degrees"]), tuple(data["low"]),
                                  tuple(data["high"]), Profile.from_dict(data["template"], where), data["n_extra"],
                                  arr, data["denominator"], tuple(data["checked_at"]), tuple(data["inexact"]),
                                  frozenset(data["inexact_index"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: malformed generic profile ({type(e).__name__}: {e})") from None

    def save(self, path: str | os.PathLike) -> str:
        """Write this generic profile as JSON (atomically): a saved count that answers new shapes
        without the model."""
        return write_atomic(path, json.dumps(self.to_dict(), separators=(",", ":")))

    @staticmethod
    def load(path: str | os.PathLike) -> GenericProfile:
        """Read a file written by `save`."""
        return GenericProfile.from_dict(read_json(path, "generic profile"), os.fspath(path))


def record_layout(template: Profile) -> list[tuple]:
    """Where each record's numbers lie among `GenericProfile.values` (the order of `_flatten`):
    per record (cost rows, one per COUNT_FIELDS, None where the field is None; param_bytes row;
    param_elements row; out_elements row; host_calls row; per tensor shape its dimensions' rows;
    each input's bytes row)."""
    out, k = [], 0
    for r in template.records:
        cost = []
        for f in COUNT_FIELDS:
            if getattr(r.cost, f) is None:
                cost.append(None)
            else:
                cost.append(k)
                k += 1
        pb, pe, oe, hc = k, k + 1, k + 2, k + 3
        k += 4
        shapes = []
        for s in r.shapes:
            shapes.append(tuple(range(k, k + len(s))))
            k += len(s)
        inputs = tuple(range(k, k + len(r.inputs)))
        k += len(r.inputs)
        out.append((tuple(cost), pb, pe, oe, hc, tuple(shapes), inputs))
    return out


def tail_rows(template: Profile, n_extra: int) -> dict[str, int]:
    """Rows of the values after the records and scopes: "phase peak NAME" per phase, "peak bytes",
    and "extra K" for each extra integer (the order of `_flatten`)."""
    n = sum(sum(getattr(r.cost, f) is not None for f in COUNT_FIELDS) + 4 + sum(map(len, r.shapes)) + len(r.inputs)
            for r in template.records)
    n += len(template.scopes) * len(_SCOPE_INTS) + len(template.unknown) + len(template.zero_cost_calls)
    rows = {f"phase peak {ph}": n + k for k, (ph, _) in enumerate(template.phase_peaks)}
    n += len(template.phase_peaks)
    rows["peak bytes"] = n
    rows.update({f"extra {k}": n + 1 + k for k in range(n_extra)})
    return rows


class ShapeValues:
    """A `GenericProfile`'s values at S shapes at once, by row (``rows(index)``: one float64 array
    of S values per row, the nearest integer: exact below 2**53), for simulating
    many shapes together (dispatchprof.sim.vector). ``sizes``: (S, variables) integers inside the
    region."""

    def __init__(self, fit: GenericProfile, sizes: np.ndarray, ids: Sequence[int] | None = None) -> None:
        sizes = np.asarray(sizes, dtype=np.int64).reshape(-1, len(fit.variables))
        lo, hi = sizes.min(axis=0).tolist(), sizes.max(axis=0).tolist()
        if not (fit.covers(tuple(lo)) and fit.covers(tuple(hi))):
            raise ValueError(f"sizes from {lo} to {hi} lie outside the fitted region "
                             f"{list(zip(fit.low, fit.high))}")
        self.fit, self.sizes, self.count = fit, sizes, len(sizes)
        exps = list(itertools.product(*(range(d + 1) for d in fit.degrees)))
        self._monomials = np.array([np.prod(sizes.astype(np.float64) ** np.array(e, dtype=np.float64), axis=1)
                                    for e in exps])                    # (monomials, S)
        self._ids = row_ids(fit) if ids is None else ids      # `row_ids`, a list (indexed per row)
        self._rows: dict[int, np.ndarray] = {}
        varying = [a != b for a, b in zip(lo, hi)]
        # monomials of the sizes that change across the shapes; a row with none is one number
        self._varying = np.array([any(e and v for e, v in zip(exps_, varying)) for exps_ in exps])
        self._fixed = [math.prod(x ** e for x, e in zip(lo, exps_)) for exps_ in exps]
        self._flat: np.ndarray | None = None           # per row: no varying monomial (`fixed`)

    def rows(self, index) -> np.ndarray:
        """Values ``index`` at every shape (see the class docstring); each row computed once."""
        index = list(index)
        todo = [r for r in dict.fromkeys(index) if r not in self._rows]
        numer = self.fit.numerators
        flat = [r for r in todo if not numer[r][self._varying].any()]
        for r in flat:                      # the same value at every shape: a read-only broadcast
            value = sum(int(c) * m for c, m in zip(numer[r], self._fixed)) / self.fit.denominator
            self._rows[r] = np.broadcast_to(np.float64(round(value)), (self.count,))
        todo = [r for r in todo if r not in self._rows]
        if todo:
            # (S x monomials) @ (monomials x rows), then rows first: BLAS runs this shape in one
            # thread, where (rows x monomials) @ (monomials x S) took 6x longer on a loaded machine
            values = np.ascontiguousarray((self._monomials.T @ self.fit.numerators[todo].astype(np.float64).T).T)
            if self.fit.denominator != 1:
                values = np.rint(values / self.fit.denominator)
            self._rows.update(zip(todo, values))
        return [self._rows[r] for r in index]

    def key(self, row: int) -> int:
        """The row's polynomial, as an id (`row_ids`: equal for rows that are the same function)."""
        return self._ids[row]

    def fixed(self, row: int) -> int | None:
        """The row's value (as `rows` gives it) when it is the same at every one of these shapes (no
        monomial of a size that changes among them has a coefficient), else None."""
        if self._flat is None:                   # every row at once: no coefficient on a varying monomial
            self._flat = ~(self.fit.numerators[:, self._varying] != 0).any(axis=1)
        if not self._flat[row]:
            return None
        return int(self.rows([row])[0][0])

    def constant(self, row: int) -> int | None:
        """The row's value when no monomial but the constant one has a coefficient, else None."""
        coeffs = self.fit.numerators[row]
        if any(int(c) for c in coeffs[1:]):
            return None
        return int(coeffs[0]) // self.fit.denominator


def row_ids(fit: GenericProfile) -> list[int]:
    """One integer per value of ``fit``, equal for values with the same polynomial (numbered in
    order of first appearance). int64 rows are told apart by their bytes, one dictionary look-up
    each (np.unique over rows sorted them: 27x slower on Mixtral-8x7B's 108,732 rows)."""
    seen: dict[object, int] = {}
    if fit.numerators.dtype != object:
        arr = np.ascontiguousarray(fit.numerators)
        keys = arr.view(np.dtype((np.void, arr.dtype.itemsize * arr.shape[1]))).reshape(-1).tolist()
        return [seen.setdefault(k, len(seen)) for k in keys]
    return [seen.setdefault(tuple(int(c) for c in row), len(seen)) for row in fit.numerators]


@dataclass(frozen=True)
class GenericFit:
    """The result of `fit_generic`: the generic profile, or None and why (count directly)."""

    profile: GenericProfile | None
    reason: str = ""
    counts: int = 0                 # direct counts the fit took
    differs: tuple[int, ...] | None = None   # the grid point whose op stream differs from the first's


def fit_generic(count: CountFn, variables: Sequence[str], grid: Sequence[Sequence[int]], held_out: Sizes,
                low: Sequence[int], high: Sequence[int | None]) -> GenericFit:
    """Count at every point of ``grid`` (one list of values per variable; degree = len - 1),
    fit, and check at ``held_out`` (see the module docstring)."""
    points = list(itertools.product(*grid))
    keys, rows, template, n_extra = None, [], None, 0
    for k, p in enumerate(points):
        profile, extra = count(p)
        key, values = _flatten(profile, extra)
        if keys is None:
            keys, template, n_extra = key, profile, len(extra)
        elif key != keys:
            return GenericFit(None, f"the op stream at {dict(zip(variables, p))} differs from the one at "
                                    f"{dict(zip(variables, points[0]))}: {_first_difference(keys, key)}", k + 1,
                              tuple(p))
        rows.append(values)
    degrees = tuple(len(g) - 1 for g in grid)
    inverses = [_inverse_vandermonde(g) for g in grid]
    # coefficient of monomial `exps` = sum over grid points `idx` of prod_i inv_i[e_i][idx_i] * value(idx)
    monos = list(itertools.product(*(range(d + 1) for d in degrees)))
    idxs = list(itertools.product(*(range(d + 1) for d in degrees)))
    weights = [[math.prod((inv[e][i] for inv, e, i in zip(inverses, exps, idx)), start=Fraction(1)) for idx in idxs]
               for exps in monos]
    denominator = math.lcm(*(w.denominator for row in weights for w in row))
    wint = [[int(w * denominator) for w in row] for row in weights]
    arr, g = _numerators(wint, rows, denominator)
    fit = GenericProfile(tuple(variables), degrees, tuple(low), tuple(high), template, n_extra, arr,
                         denominator // g, tuple(held_out))
    profile, extra = count(tuple(held_out))
    key, want = _flatten(profile, extra)
    if key != keys:
        return GenericFit(None, f"the op stream at the held-out point {dict(zip(variables, held_out))} differs: "
                                f"{_first_difference(keys, key)}", len(points) + 1)
    got = fit.numerators_at(tuple(held_out))
    wrong = [i for i, (a, b) in enumerate(zip(got, want)) if a != b * fit.denominator]
    names = _field_names(template)
    inexact = tuple(names[i] if i < len(names) else f"extra value {i - len(names)}" for i in wrong)
    strict = [i for i, n in zip(wrong, inexact) if not _is_peak(n)]
    if wrong and not strict:
        return GenericFit(dataclasses.replace(fit, inexact=inexact, inexact_index=frozenset(wrong)), "",
                          len(points) + 1)
    if wrong:
        i = strict[0]
        return GenericFit(None, f"{_field_name(template, i)} at the held-out point {dict(zip(variables, held_out))} "
                                f"is {want[i]}, the fit gives {Fraction(got[i], fit.denominator)}: not a polynomial "
                                f"of degrees {degrees}", len(points) + 1)
    return GenericFit(fit, "", len(points) + 1)


def _numerators(wint: list[list[int]], rows: list[list[int]], denominator: int) -> tuple[np.ndarray, int]:
    """(numerators (fields, monomials) = the integer weights ``wint`` (monomials, points) applied to
    every field's values at the points ``rows`` (points, fields), divided by g; g = their gcd with
    ``denominator``), in int64 where no sum can reach 2**62, else in Python integers (both exact)."""
    try:
        values = np.array(rows, dtype=np.int64)                        # (points, fields)
    except OverflowError:
        values = None
    wmax = max((abs(w) for row in wint for w in row), default=0)
    if values is not None and values.size and \
            float(np.abs(values.astype(np.float64)).max()) * wmax * len(rows) < 2.0 ** 62:
        numer = (np.array(wint, dtype=np.int64) @ values).T           # (fields, monomials), exact
        g = math.gcd(denominator, int(np.gcd.reduce(numer, axis=None)))
        return numer // g, g
    numer = [[sum(w * v for w, v in zip(wrow, field)) for wrow in wint] for field in zip(*rows)]
    g = math.gcd(denominator, *(c for row in numer for c in row))
    numer = [[c // g for c in row] for row in numer]
    big = max((abs(c) for row in numer for c in row), default=0) >= 2 ** 62
    return np.array(numer, dtype=object if big else np.int64).reshape(len(numer), len(wint)), g


def _is_peak(name: str) -> bool:
    """A peak of live bytes (a scope's PEAK, a phase's or the profile's peak): a maximum over the
    moments of a count, allowed to miss the held-out check (module docstring)."""
    return name.endswith(" peak_bytes") or name.startswith("phase peak ") or name == "peak bytes"


def _field_name(profile: Profile, index: int) -> str:
    """What value ``index`` of `_flatten` is, in words (for error messages)."""
    names = _field_names(profile)
    return names[index] if index < len(names) else f"extra value {index - len(names)}"


def _field_names(profile: Profile) -> list[str]:
    """Every value of `_flatten` but the extra integers, in words."""
    names: list[str] = []
    for k, r in enumerate(profile.records):
        where = f"record {k} ({r.op} in {r.scope or 'the root'})"
        names += [f"{where} {f}" for f in COUNT_FIELDS if getattr(r.cost, f) is not None]
        names += [f"{where} {f}" for f in ("param_bytes", "param_elements", "out_elements", "host_calls")]
        names += [f"{where} shape" for s in r.shapes for _ in s] + [f"{where} input bytes" for _ in r.inputs]
    for sc in profile.scopes:
        names += [f"scope {sc.name or 'root'} {f}" for f in _SCOPE_INTS]
    names += [f"unknown op {u.op} calls" for u in profile.unknown]
    names += [f"zero-cost {op} calls" for op, _ in profile.zero_cost_calls]
    names += [f"phase peak {ph}" for ph, _ in profile.phase_peaks] + ["peak bytes"]
    return names


def _first_difference(a: tuple, b: tuple) -> str:
    """Where two structure keys first differ, in words."""
    if len(a) != len(b):
        return f"{len(a)} entries (ops, scopes, ...) against {len(b)}"
    i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    return f"entry {i}: {a[i]!r:.120} against {b[i]!r:.120}"


__all__ = ["CountFn", "GenericFit", "GenericProfile", "ShapeValues", "Sizes", "fit_generic", "record_layout",
           "row_ids", "tail_rows"]
