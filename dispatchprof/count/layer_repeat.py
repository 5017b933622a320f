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

**Every few layers** (``period`` p > 1): a decoder whose layer kinds repeat every p layers
(gpt-oss and Gemma-2 alternate sliding and global attention, p = 2; Qwen3.5 runs three gated
delta-nets then one attention layer, p = 4; Gemma-3 five local then one global, p = 6) repeats
the block of p layers first .. first + p - 1 from counts with n >= first + p and n + p layers
(the longer holds two blocks and the same r < p layers after them as the full model, whose depth
is then n plus a multiple of p). Every rule above holds with a layer replaced by a block:
the block's records are emitted once per copy c, layer j as layer j + c p (D / p + 1 copies for
D = layers - m); the layers after the first block move up by D; a record moved by s layers reads
its producers s layers on; a host input of a copy is fresh unless layer j and layer j + p read the
same storage there. Whole-model quantities are v_longer + (D / p)(v_longer - v_shorter); a layer i
>= first, at offset o = (i - first) mod p of block b = (i - first) div p, is v_longer(first + o) +
b (v_longer(first + o + p) - v_longer(first + o)) + (D / p)(v_longer(first + o) - v_shorter(first +
o)). Checked: each pass runs layers 0 .. m - 1 once each in order, nothing between them; layer j
>= first + p runs the records of layer first + (j - first) mod p; layer first - 1 as many records
as layer first + p - 1. p = 1 is the rule above.
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


def per_layer_after(longer: Sequence[int], shorter: Sequence[int], layers: int, first: int,
                    period: int = 1) -> tuple[int, ...]:
    """`per_layer` with the block of ``period`` layers from ``first`` >= 1 the one that repeats
    (module docstring, "After a prefix" and "Every few layers"): m = len(longer) >= first + 2
    period values, m - period in ``shorter``, ``layers`` >= m - period with layers - m a multiple
    of ``period``."""
    m, p = len(longer), period
    if first < 1 or p < 1 or m < first + 2 * p or len(shorter) != m - p or layers < m - p or (layers - m) % p:
        raise LayerRepeatError(f"per-layer values repeated from layer {first} need {first + 2 * p} or more layers in "
                               f"the longer count, {p} fewer in the shorter and a depth of at least the shorter's "
                               f"by whole blocks of {p}; got {m}, {len(shorter)}, {layers}")
    units = (layers - m) // p

    def value(i: int) -> int:
        if i < first:
            return longer[i] + units * (longer[i] - shorter[i])
        block, a = (i - first) // p, first + (i - first) % p
        return longer[a] + block * (longer[a + p] - longer[a]) + units * (longer[a] - shorter[a])
    return tuple(value(i) for i in range(layers))


def repeat_layers(shorter: Profile, longer: Profile, container: str, layers: int) -> Profile:
    """The profile of the model with ``layers`` layers (>= 2) from counts with n and n + 1
    layers (module docstring); raises `LayerRepeatError` where the layers are not repeatable."""
    return repeat_layers_after(shorter, longer, container, layers, 1)


def repeat_layers_after(shorter: Profile, longer: Profile, container: str, layers: int, first: int,
                        period: int = 1) -> Profile:
    """`repeat_layers` with the block of ``period`` layers from ``first`` >= 1 the one that
    repeats, the layers before it kept (module docstring, "After a prefix" and "Every few
    layers"): counts with n >= first + period and n + period layers, ``layers`` >= n with
    layers - n a multiple of ``period``; raises `LayerRepeatError` where the layers from ``first``
    on do not repeat."""
    n_short, m, p = _depth(shorter, container), _depth(longer, container), period
    block = f"layer {first}" if p == 1 else f"layers {first} .. {first + p - 1}"
    if first < 1 or p < 1:
        raise LayerRepeatError(f"the repeated block must start at layer 1 or later and hold 1 or more layers, got "
                               f"{first} and {p}")
    if m != n_short + p or n_short < first + p:
        raise LayerRepeatError(f"repeating {block} needs counts with n >= {first + p} and n + {p} layers under "
                               f"{container!r}; got {n_short} and {m}")
    if layers < n_short or (layers - m) % p:
        raise LayerRepeatError(f"layers must be >= {n_short}" + (f" and {n_short} plus a multiple of {p}" if p > 1
                                                                 else "") + f", got {layers}")
    for prof in (shorter, longer):
        if prof.unknown:
            raise LayerRepeatError(f"unknown ops ({', '.join(u.op for u in prof.unknown)}): not repeated")
    _check_identical(longer.records, container, m, first, p)
    down = _records(longer.records, container, m, n_short, first, p)
    if _plain(down) != _plain(shorter.records):
        k = next((i for i, (a, b) in enumerate(zip(_plain(down), _plain(shorter.records))) if a != b),
                 min(len(down), len(shorter.records)))
        raise LayerRepeatError(f"the {n_short}-layer count is not the {m}-layer count less {p} layer"
                               f"{'s' if p > 1 else ''}: record {k} of {len(shorter.records)} differs")
    scopes = _scopes(shorter, longer, container, m, layers, first, p)
    units = (layers - m) // p
    if [op for op, _ in shorter.zero_cost_calls] != [op for op, _ in longer.zero_cost_calls] or \
            [ph for ph, _ in shorter.phase_peaks] != [ph for ph, _ in longer.phase_peaks]:
        raise LayerRepeatError(f"the {n_short}- and {m}-layer counts list different zero-cost ops or phases")
    line = lambda a, b: b + units * (b - a)                             # noqa: E731
    return dataclasses.replace(
        longer, records=tuple(_records(longer.records, container, m, layers, first, p)), scopes=scopes,
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


def _check_identical(records: Sequence[OpRecord], container: str, m: int, first: int, period: int = 1) -> None:
    """Each pass runs the layers 0 .. m - 1 in order with no record between them; each layer j >=
    first + period runs the records of layer first + (j - first) mod period (producers relative to
    the layer); layer first - 1 as many as the block's last."""
    layer, pos, _ = _positions(records, container)
    runs = [j for k, j in enumerate(layer) if k == 0 or j != layer[k - 1]]
    passes = [[]]
    for j in runs:
        if j is None:
            passes.append([])
        else:
            passes[-1].append(j)
    if any(seen != list(range(m)) for seen in passes if seen):
        raise LayerRepeatError(f"a pass does not run the layers under {container!r} once each in order with no "
                               f"record between them: not repeated")
    blocks: dict[int, list] = {j: [] for j in range(m)}
    for k, r in enumerate(records):
        j = layer[k]
        if j is None:
            continue
        inputs = tuple(((p,) if p < 0 or layer[p] is None else (layer[p] - j, pos[p]), b) for p, b, _ in r.inputs)
        blocks[j].append((r.op, renamed(r.scope, container, 0), r.phase, r.dtype, r.cost, r.causal, inputs,
                          r.param_bytes, r.param_elements, r.out_elements, r.shapes, r.host_calls))
    for j in range(first + period, m):
        same = first + (j - first) % period
        if blocks[j] != blocks[same]:
            k = next((i for i, (a, b) in enumerate(zip(blocks[j], blocks[same])) if a != b),
                     min(len(blocks[j]), len(blocks[same])))
            raise LayerRepeatError(f"layer {j} under {container!r} differs from layer {same} at its record {k}: the "
                                   f"layers are not identical" + (f" every {period}" if period > 1 else ""))
    last = first + period - 1
    if len(blocks[first - 1]) != len(blocks[last]):
        raise LayerRepeatError(f"layer {first - 1} under {container!r} runs {len(blocks[first - 1])} records, layer "
                               f"{last} {len(blocks[last])}")


def _records(records: Sequence[OpRecord], container: str, m: int, layers: int, first: int = 1,
             period: int = 1) -> list[OpRecord]:
    """``records`` (of m layers) for ``layers`` layers, the block of ``period`` layers from
    ``first`` repeated (module docstring)."""
    layer, pos, where = _positions(records, container)
    p, d = period, layers - m
    copies = d // p + 1                        # the block becomes blocks 0 .. copies - 1 from layer first
    end = first + copies * p                   # the first layer after them (longer's layer first + p, moved)
    in_block = lambda j: j is not None and first <= j < first + p       # noqa: E731
    # emission order: (source index, target layer or None); a run of the block's records once per copy
    order: list[tuple[int, int | None]] = []
    run: list[int] = []
    for k, j in enumerate(layer + [None]):
        if in_block(j):
            run.append(k)
            continue
        if run:
            order += [(i, layer[i] + c * p) for c in range(copies) for i in run]
            run = []
        if k < len(records):
            order.append((k, None if j is None else (j if j < first else j + d)))
    new_index = {(k, t): i for i, (k, t) in enumerate(order)}

    def target(j: int, q: int) -> int:
        """New index of the record at position q of (new) layer j."""
        if 0 <= j < first:
            src = where[(j, q)]
        elif first <= j < end:
            src = where[(first + (j - first) % p, q)]
        elif end <= j < layers:
            src = where[(j - d, q)]
        else:
            raise LayerRepeatError(f"a producer falls in layer {j}, outside 0 .. {layers - 1}")
        return new_index[(src, j)]

    next_id = 1 + max((t for r in records for _, _, t in r.inputs), default=0)
    fresh: dict[tuple[int, int], int] = {}
    out = []
    for k, t in order:
        r, j = records[k], layer[k]
        shift = d if j is None else (0 if j < first else (t - j if in_block(j) else d))
        inputs = []
        for a, (q, b, tensor) in enumerate(r.inputs):
            if q >= 0 and layer[q] is not None:
                q = target(layer[q] + shift, pos[q])
            elif q >= 0:
                q = new_index[(q, None)]
            elif in_block(j) and t > j and not _shared(records, where, pos[k], a, tensor, j + p):
                tensor = fresh.setdefault((tensor, t), next_id + len(fresh))
            inputs.append((q, b, tensor))
        scope = r.scope if j is None or t == j else renamed(r.scope, container, t)
        out.append(_moved(r, scope, tuple(inputs)))
    return out


def _moved(r: OpRecord, scope: str, inputs: tuple) -> OpRecord:
    """``r`` with ``scope`` and ``inputs`` (dataclasses.replace, faster)."""
    values = list(_record_values(r))
    values[_SCOPE_AT], values[_INPUTS_AT] = scope, inputs
    return OpRecord(*values)


def _shared(records: Sequence[OpRecord], where: dict, q: int, a: int, tensor: int, after: int) -> bool:
    """Whether layer ``after``'s (the copied layer's next of its kind) record at position q reads the
    same storage as its input ``a``."""
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


def _scopes(shorter: Profile, longer: Profile, container: str, m: int, layers: int, first: int = 1,
            period: int = 1) -> tuple[Scope, ...]:
    """``longer``'s scopes for ``layers`` layers, quantities by the module docstring's rules."""
    p = period
    units = (layers - m) // p
    short = {s.name: s for s in shorter.scopes}
    names_down = [s.name for s in _scope_order(longer.scopes, container, m - p, first=first, period=p)]
    if [s.name for s in shorter.scopes] != names_down:
        raise LayerRepeatError(f"the scopes of the {m - p}-layer count are not those of the {m}-layer count "
                               f"less {p} layer{'s' if p > 1 else ''}")
    by_name = {s.name: s for s in longer.scopes}
    out = []
    for s, t in _scope_order(longer.scopes, container, layers, with_targets=True, first=first, period=p):
        j = layer_of(s.name, container)
        if j is None:
            values = {f: getattr(s, f) + units * (getattr(s, f) - getattr(short[s.name], f)) for f in _SCOPE_INTS}
            latency = max(0.0, s.latency_s + units * (s.latency_s - short[s.name].latency_s))
            out.append(dataclasses.replace(s, latency_s=latency, **values))
            continue
        block, base = (0, t) if t < first else ((t - first) // p, first + (t - first) % p)
        v0 = by_name[renamed(s.name, container, base)]
        v1 = by_name[renamed(s.name, container, base + p)] if t >= first else v0
        vs = short[renamed(s.name, container, base)]
        values = {f: getattr(v0, f) + units * (getattr(v0, f) - getattr(vs, f))
                  + block * (getattr(v1, f) - getattr(v0, f)) for f in _SCOPE_INTS}
        parent = s.parent if layer_of(s.parent or "", container) is None else renamed(s.parent, container, t)
        out.append(dataclasses.replace(v0, name=renamed(s.name, container, t), parent=parent, **values))
    return tuple(out)


def _scope_order(scopes: Sequence[Scope], container: str, layers: int, with_targets: bool = False,
                 first: int = 1, period: int = 1) -> list:
    """Scopes of m layers in order for ``layers`` layers: the block's run repeated (as `_records`);
    with targets: (source scope, target layer or None)."""
    m = 1 + max(layer_of(s.name, container) or 0 for s in scopes)
    p, d = period, layers - m
    copies = d // p + 1
    order: list = []
    run: list[Scope] = []
    for s in list(scopes) + [None]:
        j = None if s is None else layer_of(s.name, container)
        if j is not None and first <= j < first + p:
            run.append(s)
            continue
        if run:
            order += [(r, layer_of(r.name, container) + c * p) for c in range(copies) for r in run]
            run = []
        if s is not None:
            order.append((s, None if j is None else (j if j < first else j + d)))
    if with_targets:
        return order
    return [dataclasses.replace(s, name=s.name if t is None or t == layer_of(s.name, container)
                                else renamed(s.name, container, t)) for s, t in order]


__all__ = ["LayerRepeatError", "layer_of", "per_layer", "per_layer_after", "renamed", "repeat_layers",
           "repeat_layers_after"]
