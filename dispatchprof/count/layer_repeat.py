"""A decoder's identical layers repeated: the profile of an L-layer model from counts of the same
model built with n and n + 1 layers (n >= 2), without counting the L layers.

A decoder runs its layers, identical modules, one after the other, so each pass over the model (a
prefill, a decode step) is a prefix, one block of ops per layer and a suffix. `repeat_layers(shorter,
longer, container, layers)` builds the profile a direct count of ``layers`` layers gives, from
``shorter`` (n layers) and ``longer`` (n + 1 layers), counted on the same inputs; ``container`` is
the module path of the layer list ("model.layers"), a layer's scope is ``container.i[...]``.
Writing m = n + 1 (``longer``'s layers) and D = layers - m:

- **Records.** Layer 1 of ``longer`` (a middle layer) is the block that repeats: after each run of
  its records, the run is repeated for the added layers 2 .. D + 1 (scope index set); ``longer``'s
  layers 2 .. m - 1 and the records after them keep their order, their layer index moved up by D.
  Every record keeps its numbers (counts, bytes, shapes, parameters, host calls). An input's
  producer moves with its record: a record moved by s layers (a copy of layer 1 as layer t: s =
  t - 1; layers >= 2 and the records outside the layers: s = D; layer 0: s = 0) that read the
  record at position q of layer j reads the record at position q of layer j + s; producers
  outside the layers are unchanged. A host input's storage id in a copy is fresh unless layers 1
  and 2 read the same storage there.
- **Per-layer scope quantities** (calls, parameters, ACT, CACHE, PEAK...) are bilinear in the
  layer index i and the depth: layer 0 is v_longer(0) + D (v_longer(0) - v_shorter(0)); layer i >= 1
  is v_longer(1) + (i - 1)(v_longer(2) - v_longer(1)) + D (v_longer(1) - v_shorter(1)) (a layer's
  PEAK holds the KV cache of the layers before it, and in a decode step of all of them).
- **Everything else that counts the whole model** (the scopes outside the layers, zero-cost calls,
  phase peaks, the peak) is linear in the depth: v_longer + D (v_longer - v_shorter). Measured
  times (host loops, scope latency, phase wall) are copied or extrapolated the same way (>= 0).

Checked before use, raising `LayerRepeatError` (the caller counts at full depth): the layers are
the container's children 0 .. n - 1 and 0 .. m - 1; layers 1 .. m - 1 of ``longer`` run the same
records (op, scope below the layer, phase, dtype, counts, bytes, shapes, producers relative to the
layer) and layer 0 as many; ``shorter`` equals ``longer`` taken down to n layers by this rule
(records, scopes, zero-cost op names); neither has unknown ops. Layers that alternate (sliding and
global attention) or change kind at some depth (dense then MoE) past the counted ones are not seen
by this check: a caller proves the result against a direct count of the full model once
(dispatchprof.llm.shape_generic does, at its held-out shape).

**After a prefix** (`repeat_layers_after(shorter, longer, container, layers, first)`): a decoder
whose first layers differ from the rest (DeepSeek-V3's 3 dense layers before 58 MoE ones) repeats
layer ``first`` >= 1 of ``longer`` instead of layer 1, with n >= first + 1: layers 0 .. first - 1
are kept as they are (the prefix and the first layer of the repeating kind, which reads the
prefix's output), copies of layer ``first`` become layers first .. first + D, the layers after it
move up by D. Every rule above holds with 1 replaced by ``first`` and 2 by first + 1: a layer
i < first is v_longer(i) + D (v_longer(i) - v_shorter(i)), a layer i >= first is v_longer(first) +
(i - first)(v_longer(first + 1) - v_longer(first)) + D (v_longer(first) - v_shorter(first)); the
check compares layers first .. m - 1 with each other and layer first - 1's record count with
layer first's. ``first`` = 1 is `repeat_layers`.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Sequence

from dispatchprof.results.profile import Profile
from dispatchprof.results.records import OpRecord, Scope

_SCOPE_INTS = ("calls", "params", "params_bytes", "params_self", "params_self_bytes", "buffers", "buffers_bytes",
               "act", "act_bytes", "cache", "peak_bytes")


#: OpRecord's fields in order: `_moved` and `_plain` read them all at once (a full-depth profile
#: has thousands of records; dataclasses.replace costs twice as much per record).
_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(OpRecord))
_record_values = operator.attrgetter(*_RECORD_FIELDS)
_SCOPE_AT, _INPUTS_AT, _HOST_LOOPS_AT = (_RECORD_FIELDS.index(f) for f in ("scope", "inputs", "host_loops"))


class LayerRepeatError(ValueError):
    """The two counts do not show identical, repeatable layers (the message says where)."""


def layer_of(scope: str, container: str) -> int | None:
    """The layer index of ``scope`` under ``container`` ("model.layers.3.mlp" -> 3), else None."""
    prefix = container + "."
    if not scope.startswith(prefix):
        return None
    head = scope[len(prefix):].split(".", 1)[0]
    return int(head) if head.isdigit() else None


def renamed(scope: str, container: str, index: int) -> str:
    """``scope`` of a layer moved to layer ``index``."""
    _, sep, tail = scope[len(container) + 1:].partition(".")
    return f"{container}.{index}{sep}{tail}"


def per_layer(longer: Sequence[int], shorter: Sequence[int], layers: int) -> tuple[int, ...]:
    """One integer per layer (KV bytes of each layer's cache) for ``layers`` layers, from its
    values with m = len(longer) >= 3 and m - 1 = len(shorter) layers, by the bilinear rule of the
    module docstring."""
    return per_layer_after(longer, shorter, layers, 1)


def per_layer_after(longer: Sequence[int], shorter: Sequence[int], layers: int, first: int) -> tuple[int, ...]:
    """`per_layer` with layer ``first`` >= 1 the one that repeats (module docstring, "After a
    prefix"): m = len(longer) >= first + 2 values, m - 1 in ``shorter``, ``layers`` >= first + 1."""
    m = len(longer)
    if first < 1 or m < first + 2 or len(shorter) != m - 1 or layers < first + 1:
        raise LayerRepeatError(f"per-layer values repeated from layer {first} need {first + 2} or more layers in the "
                               f"longer count and one fewer in the shorter, for {first + 1} or more layers; got "
                               f"{m}, {len(shorter)}, {layers}")
    d = layers - m
    kept = tuple(longer[i] + d * (longer[i] - shorter[i]) for i in range(first))
    return kept + tuple(longer[first] + (i - first) * (longer[first + 1] - longer[first])
                        + d * (longer[first] - shorter[first]) for i in range(first, layers))


def repeat_layers(shorter: Profile, longer: Profile, container: str, layers: int) -> Profile:
    """The profile of the model with ``layers`` layers (>= 2) from counts with n and n + 1
    layers (module docstring); raises `LayerRepeatError` where the layers are not repeatable."""
    return repeat_layers_after(shorter, longer, container, layers, 1)


def repeat_layers_after(shorter: Profile, longer: Profile, container: str, layers: int, first: int) -> Profile:
    """`repeat_layers` with layer ``first`` >= 1 the one that repeats, the layers before it kept
    (module docstring, "After a prefix"): counts with n >= first + 1 and n + 1 layers, ``layers``
    >= first + 1; raises `LayerRepeatError` where the layers from ``first`` on are not repeatable."""
    n_short, m = _depth(shorter, container), _depth(longer, container)
    if first < 1:
        raise LayerRepeatError(f"the repeated layer must be 1 or later, got {first}")
    if m != n_short + 1 or n_short < first + 1:
        raise LayerRepeatError(f"repeating layer {first} needs counts with n >= {first + 1} and n + 1 layers under "
                               f"{container!r}; got {n_short} and {m}")
    if layers < first + 1:
        raise LayerRepeatError(f"layers must be >= {first + 1}, got {layers}")
    for p in (shorter, longer):
        if p.unknown:
            raise LayerRepeatError(f"unknown ops ({', '.join(u.op for u in p.unknown)}): not repeated")
    _check_identical(longer.records, container, m, first)
    down = _records(longer.records, container, m, n_short, first)
    if _plain(down) != _plain(shorter.records):
        k = next((i for i, (a, b) in enumerate(zip(_plain(down), _plain(shorter.records))) if a != b),
                 min(len(down), len(shorter.records)))
        raise LayerRepeatError(f"the {n_short}-layer count is not the {m}-layer count less one layer: record {k} "
                               f"of {len(shorter.records)} differs")
    scopes = _scopes(shorter, longer, container, m, layers, first)
    d = layers - m
    if [op for op, _ in shorter.zero_cost_calls] != [op for op, _ in longer.zero_cost_calls] or \
            [ph for ph, _ in shorter.phase_peaks] != [ph for ph, _ in longer.phase_peaks]:
        raise LayerRepeatError(f"the {n_short}- and {m}-layer counts list different zero-cost ops or phases")
    line = lambda a, b: b + d * (b - a)                                 # noqa: E731
    return dataclasses.replace(
        longer, records=tuple(_records(longer.records, container, m, layers, first)), scopes=scopes,
        zero_cost_calls=tuple((op, line(a, b)) for (_, a), (op, b) in zip(shorter.zero_cost_calls,
                                                                           longer.zero_cost_calls)),
        phase_peaks=tuple((ph, line(a, b)) for (_, a), (ph, b) in zip(shorter.phase_peaks, longer.phase_peaks)),
        peak_bytes=line(shorter.peak_bytes, longer.peak_bytes),
        phase_wall=tuple((ph, max(0.0, line(a, b))) for (_, a), (ph, b) in zip(shorter.phase_wall, longer.phase_wall)))


def _depth(profile: Profile, container: str) -> int:
    """Layers under ``container`` (its children 0 .. k - 1, all of them present)."""
    found = {layer_of(s.name, container) for s in profile.scopes} - {None}
    if found != set(range(len(found))):
        raise LayerRepeatError(f"the layers under {container!r} are not numbered 0 .. {len(found) - 1}: "
                               f"{sorted(found)}")
    return len(found)


def _positions(records: Sequence[OpRecord], container: str) -> tuple[list[int | None], list[int], dict]:
    """Per record its layer and its position among that layer's records; (layer, position) -> index."""
    layer = [layer_of(r.scope, container) for r in records]
    seen: dict[int | None, int] = {}
    pos, where = [], {}
    for k, j in enumerate(layer):
        q = seen.get(j, 0)
        seen[j] = q + 1
        pos.append(q)
        if j is not None:
            where[(j, q)] = k
    return layer, pos, where


def _check_identical(records: Sequence[OpRecord], container: str, m: int, first: int) -> None:
    """Layers first .. m - 1 run the same records (producers relative to the layer); layer first - 1
    as many."""
    layer, pos, _ = _positions(records, container)
    blocks: dict[int, list] = {j: [] for j in range(m)}
    for k, r in enumerate(records):
        j = layer[k]
        if j is None:
            continue
        inputs = tuple(((p,) if p < 0 or layer[p] is None else (layer[p] - j, pos[p]), b) for p, b, _ in r.inputs)
        blocks[j].append((r.op, renamed(r.scope, container, 0), r.phase, r.dtype, r.cost, r.causal, inputs,
                          r.param_bytes, r.param_elements, r.out_elements, r.shapes, r.host_calls))
    for j in range(first + 1, m):
        if blocks[j] != blocks[first]:
            k = next((i for i, (a, b) in enumerate(zip(blocks[j], blocks[first])) if a != b),
                     min(len(blocks[j]), len(blocks[first])))
            raise LayerRepeatError(f"layer {j} under {container!r} differs from layer {first} at its record {k}: the "
                                   f"layers are not identical")
    if len(blocks[first - 1]) != len(blocks[first]):
        raise LayerRepeatError(f"layer {first - 1} under {container!r} runs {len(blocks[first - 1])} records, layer "
                               f"{first} {len(blocks[first])}")


def _records(records: Sequence[OpRecord], container: str, m: int, layers: int, first: int = 1) -> list[OpRecord]:
    """``records`` (of m layers) for ``layers`` layers, layer ``first`` repeated (module docstring)."""
    layer, pos, where = _positions(records, container)
    d = layers - m
    copies = range(first, first + d + 1)       # layer first's block becomes layers first .. first + d
    # emission order: (source index, target layer or None); a run of layer-first records once per copy
    order: list[tuple[int, int | None]] = []
    run: list[int] = []
    for k, j in enumerate(layer + [None]):
        if j == first:
            run.append(k)
            continue
        if run:
            order += [(i, t) for t in copies for i in run]
            run = []
        if k < len(records):
            order.append((k, None if j is None else (j if j < first else j + d)))
    new_index = {(k, t): i for i, (k, t) in enumerate(order)}

    def target(j: int, q: int) -> int:
        """New index of the record at position q of (new) layer j."""
        if 0 <= j < first or j in copies:
            src = where[(min(j, first), q)]
        elif first + d + 1 <= j < layers:
            src = where[(j - d, q)]
        else:
            raise LayerRepeatError(f"a producer falls in layer {j}, outside 0 .. {layers - 1}")
        return new_index[(src, j)]

    next_id = 1 + max((t for r in records for _, _, t in r.inputs), default=0)
    fresh: dict[tuple[int, int], int] = {}
    out = []
    for k, t in order:
        r, j = records[k], layer[k]
        shift = d if j is None else (0 if j < first else (t - first if j == first else d))
        inputs = []
        for a, (p, b, tensor) in enumerate(r.inputs):
            if p >= 0 and layer[p] is not None:
                p = target(layer[p] + shift, pos[p])
            elif p >= 0:
                p = new_index[(p, None)]
            elif j == first and t > first and not _shared(records, where, pos[k], a, tensor, first + 1):
                tensor = fresh.setdefault((tensor, t), next_id + len(fresh))
            inputs.append((p, b, tensor))
        scope = r.scope if j is None or t == j else renamed(r.scope, container, t)
        out.append(_moved(r, scope, tuple(inputs)))
    return out


def _moved(r: OpRecord, scope: str, inputs: tuple) -> OpRecord:
    """``r`` with ``scope`` and ``inputs`` (dataclasses.replace, faster)."""
    values = list(_record_values(r))
    values[_SCOPE_AT], values[_INPUTS_AT] = scope, inputs
    return OpRecord(*values)


def _shared(records: Sequence[OpRecord], where: dict, q: int, a: int, tensor: int, after: int = 2) -> bool:
    """Whether layer ``after``'s (the repeated layer's next) record at position q reads the same
    storage as its input ``a``."""
    other = where.get((after, q))
    return other is not None and len(records[other].inputs) > a and records[other].inputs[a][2] == tensor


def _plain(records: Sequence[OpRecord]) -> list[tuple]:
    """Records as tuples of their fields, without what a count measures (host time) or allocates
    (storage ids)."""
    out = []
    for r in records:
        values = list(_record_values(r))
        values[_INPUTS_AT] = tuple((p, b) for p, b, _ in r.inputs)
        values[_HOST_LOOPS_AT] = 0.0
        out.append(tuple(values))
    return out


def _scopes(shorter: Profile, longer: Profile, container: str, m: int, layers: int, first: int = 1) -> tuple[Scope, ...]:
    """``longer``'s scopes for ``layers`` layers, quantities by the module docstring's rules."""
    d = layers - m
    short = {s.name: s for s in shorter.scopes}
    names_down = [s.name for s in _scope_order(longer.scopes, container, m - 1, first=first)]
    if [s.name for s in shorter.scopes] != names_down:
        raise LayerRepeatError(f"the scopes of the {m - 1}-layer count are not those of the {m}-layer count "
                               f"less one layer")
    by_name = {s.name: s for s in longer.scopes}
    out = []
    for s, t in _scope_order(longer.scopes, container, layers, with_targets=True, first=first):
        j = layer_of(s.name, container)
        if j is None:
            values = {f: getattr(s, f) + d * (getattr(s, f) - getattr(short[s.name], f)) for f in _SCOPE_INTS}
            latency = max(0.0, s.latency_s + d * (s.latency_s - short[s.name].latency_s))
            out.append(dataclasses.replace(s, latency_s=latency, **values))
            continue
        base = min(t, first)
        v = [by_name[renamed(s.name, container, i)] for i in ((base, first + 1) if t >= first else (base, base))]
        vs = short[renamed(s.name, container, base)]
        values = {f: getattr(v[0], f) + d * (getattr(v[0], f) - getattr(vs, f))
                  + (t - first) * (getattr(v[1], f) - getattr(v[0], f)) * (t >= first) for f in _SCOPE_INTS}
        parent = s.parent if layer_of(s.parent or "", container) is None else renamed(s.parent, container, t)
        out.append(dataclasses.replace(v[0], name=renamed(s.name, container, t), parent=parent, **values))
    return tuple(out)


def _scope_order(scopes: Sequence[Scope], container: str, layers: int, with_targets: bool = False,
                 first: int = 1) -> list:
    """Scopes of m layers in order for ``layers`` layers: layer ``first``'s run repeated (as
    `_records`); with targets: (source scope, target layer or None)."""
    m = 1 + max(layer_of(s.name, container) or 0 for s in scopes)
    d = layers - m
    order: list = []
    run: list[Scope] = []
    for s in list(scopes) + [None]:
        j = None if s is None else layer_of(s.name, container)
        if j == first:
            run.append(s)
            continue
        if run:
            order += [(r, t) for t in range(first, first + d + 1) for r in run]
            run = []
        if s is not None:
            order.append((s, None if j is None else (j if j < first else j + d)))
    if with_targets:
        return order
    return [dataclasses.replace(s, name=s.name if t is None or t == layer_of(s.name, container)
                                else renamed(s.name, container, t)) for s, t in order]


__all__ = ["LayerRepeatError", "layer_of", "per_layer", "per_layer_after", "renamed", "repeat_layers",
           "repeat_layers_after"]
