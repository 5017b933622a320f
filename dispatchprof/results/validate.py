"""Strict checks of a saved result read back from a file, before any frozen result is built.

A saved file is input like any other. Rules:

- every field has its type: a string where a name goes, a list of the written length where a row
  goes, a number where a count goes (a bool is not a number);
- every number is finite and non-negative (NaN, Infinity and -1 are refused), except a record
  input's producer index, which may also be HOST (-1) or UNRECORDED (-2);
- scope parents form no cycle (a scope may name itself, as the counter writes a recursive module);
- totals a file states agree exactly with the records they sum (`check_totals`): a generation's
  ``prefill_totals`` with its prefill profile's records, its ``decode_totals`` (every count, not
  the calls) with the sum of ``decode_by_scope``, a forward profile's ``totals`` with its
  profile's records. A disagreement is refused, never silently recomputed: it means the file was
  edited or is corrupt, and the reader could not tell which figure to trust. A plain profile (and
  so every rank file ``merge`` reads) states no totals: its totals are always its records' sums.

A problem raises ValueError naming the file and the field, in one line.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Callable, Mapping

from dispatchprof.results.records import (
    COUNT_FIELDS, HOST, PHASES, TOTALS_FIELDS, UNRECORDED, OpRecord, Scope, Totals,
)

_SCOPE_TEXT = 2            # name, module_type, then parent, then numbers
_RECORD_MIN = 5            # op, scope, phase, dtype, cost; the rest have defaults
_RECORD_MAX = len(fields(OpRecord))
_SCOPE_LEN = len(fields(Scope))
_GENERATION_NUMBERS = ("batch", "prompt_len", "new_tokens", "kv_cache_bytes", "weights_bytes",
                       "activations_peak_bytes", "steps_counted")
_DEVICE_NUMBERS = ("ttft_s", "tokens_per_s", "decode_tokens_per_s", "energy_per_token_j")
_DEVICE_OPTIONAL = ("tpot_first_s", "tpot_mean_s", "tpot_last_s")


class _Invalid(Exception):
    """A field that breaks a rule: where it is, and what it should be."""

    def __init__(self, field: str, expected: str, value: Any) -> None:
        super().__init__(field, expected, value)
        self.field, self.expected, self.value = field, expected, value


def check_profile_data(data: Mapping[str, Any], where: str) -> None:
    """Check the rows of a Profile's dict (``Profile.to_dict``) by the rules of this module."""
    _checked(where, _profile, data)


def check_generation_data(data: Mapping[str, Any], where: str) -> None:
    """Check a generation profile's dict (``generation_to_dict``) without its prefill profile."""
    _checked(where, _generation, data)


def _checked(where: str, check: Callable[[Any], None], data: Any) -> None:
    try:
        check(data)
    except _Invalid as e:
        shown = repr(e.value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ValueError(f"{where}: field {e.field} must be {e.expected}, got {shown}") from None


def check_totals(stated: Totals, summed: Totals, field: str, of: str, where: str,
                 names: tuple[str, ...] = TOTALS_FIELDS) -> None:
    """Refuse ``stated`` totals (the file's ``field``) that differ from ``summed`` (the sum of
    ``of``) in any of ``names``, naming the first such field and both values."""
    for name in names:
        a, b = getattr(stated, name), getattr(summed, name)
        if a != b:
            raise ValueError(f"{where}: field {field}.{name} = {a!r} but the {of} sum to {b!r}; a saved result's "
                             f"totals are the sums of its records (the file was edited or is corrupt)")


def check_generation_totals(prefill_totals: Totals, prefill_summed: Totals, decode_totals: Totals,
                            by_scope: Mapping[str, Totals], where: str) -> None:
    """A generation's stated totals against what they sum (rules above)."""
    check_totals(prefill_totals, prefill_summed, "prefill_totals", "prefill records", where)
    decode_summed = sum(by_scope.values(), Totals())
    check_totals(decode_totals, decode_summed, "decode_totals", "decode_by_scope rows", where, COUNT_FIELDS)


def _profile(data: Any) -> None:
    meta = data.get("meta")
    if meta is not None:
        index = _mapping(meta, "meta").get("process_index")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
            raise _Invalid("meta.process_index", "a whole number >= 0 (the process of a multi-process run)", index)
    for i, r in enumerate(_list(data.get("records"), "records")):
        _record(r, f"records[{i}]")
    names = {}
    for i, s in enumerate(_list(data.get("scopes"), "scopes")):
        row = _list(s, f"scopes[{i}]", _SCOPE_LEN - 1, _SCOPE_LEN)
        name = _text(row[0], f"scopes[{i}].name")
        _text(row[1], f"scopes[{i}].module_type")
        names[name] = None if row[2] is None else _text(row[2], f"scopes[{i}].parent")
        for j, v in enumerate(row[3:], 3):
            _number(v, f"scopes[{i}][{j}]")
    _acyclic(names)
    for i, u in enumerate(_list(data.get("unknown"), "unknown")):
        row = _list(u, f"unknown[{i}]", 4, 4)
        _text(row[0], f"unknown[{i}].op")
        _number(row[1], f"unknown[{i}].calls")
        for s in _list(row[2], f"unknown[{i}].scopes"):
            _text(s, f"unknown[{i}].scopes")
        _text(row[3], f"unknown[{i}].reason")
    for key in ("zero_cost_calls", "phase_peaks", "phase_wall"):
        for i, pair in enumerate(_list(data.get(key), key)):
            row = _list(pair, f"{key}[{i}]", 2, 2)
            _text(row[0], f"{key}[{i}][0]")
            _number(row[1], f"{key}[{i}][1]")
    _number(data.get("peak_bytes"), "peak_bytes")
    _text(data.get("causal_rule"), "causal_rule")
    _text(data.get("tensor_kind"), "tensor_kind")


def _record(r: Any, at: str) -> None:
    row = _list(r, at, _RECORD_MIN, _RECORD_MAX)
    for j, name in enumerate(("op", "scope", "phase", "dtype")):
        _text(row[j], f"{at}.{name}")
    if row[2] not in PHASES:
        raise _Invalid(f"{at}.phase", f"one of {', '.join(PHASES)}", row[2])
    for name, v in zip(COUNT_FIELDS, _list(row[4], f"{at}.cost", 1, len(COUNT_FIELDS))):
        if v is not None or not name.startswith("bytes_"):
            _number(v, f"{at}.cost.{name}")
    if len(row) > 5 and row[5] not in (None, True, False):
        raise _Invalid(f"{at}.causal", "true, false or null", row[5])
    for k, item in enumerate(_list(row[6], f"{at}.inputs") if len(row) > 6 else ()):
        producer, size, storage = _list(item, f"{at}.inputs[{k}]", 3, 3)
        if producer not in (HOST, UNRECORDED):
            _number(producer, f"{at}.inputs[{k}].producer")
        _number(size, f"{at}.inputs[{k}].bytes")
        if not isinstance(storage, int) or isinstance(storage, bool):
            raise _Invalid(f"{at}.inputs[{k}].storage", "a whole number", storage)
    for j, name in enumerate(("param_bytes", "param_elements", "out_elements"), 7):
        if len(row) > j:
            _number(row[j], f"{at}.{name}")
    for k, shape in enumerate(_list(row[10], f"{at}.shapes") if len(row) > 10 else ()):
        for d in _list(shape, f"{at}.shapes[{k}]"):
            _number(d, f"{at}.shapes[{k}]")


def _acyclic(parents: Mapping[str, str | None]) -> None:
    """Refuse parent links that lead back to where they started (a scope naming itself is allowed)."""
    done: set[str] = set()
    for start in parents:
        chain: list[str] = []
        n: str | None = start
        while n is not None and n not in done:
            if n in chain:
                loop = " -> ".join(repr(c) for c in chain[chain.index(n):] + [n])
                raise _Invalid("scopes", "a tree (parents with no cycle)", f"the cycle {loop}")
            chain.append(n)
            p = parents.get(n)
            n = p if p != n else None
        done.update(chain)


def _generation(data: Any) -> None:
    _text(data.get("model", ""), "model")
    for key in _GENERATION_NUMBERS:
        _number(data.get(key), key)
    for v in _list(data.get("kv_cache_bytes_by_layer"), "kv_cache_bytes_by_layer"):
        _number(v, "kv_cache_bytes_by_layer")
    for key in ("prefill_totals", "decode_totals"):
        _totals(data.get(key), key)
    for name, t in _mapping(data.get("decode_by_scope"), "decode_by_scope").items():
        _totals(t, f"decode_by_scope[{name!r}]")
    for name, d in _mapping(data.get("devices"), "devices").items():
        at = f"devices[{name!r}]"
        d = _mapping(d, at)
        _text(d.get("name"), f"{at}.name")
        for key in ("runtime", "runtime_changes"):
            if key in d:
                _text(d[key], f"{at}.{key}")
        if "tp" in d and (isinstance(d["tp"], bool) or not isinstance(d["tp"], int) or d["tp"] < 1):
            raise _Invalid(f"{at}.tp", "a whole number >= 1", d["tp"])
        for key in _DEVICE_NUMBERS:
            _number(d.get(key), f"{at}.{key}")
        for key in _DEVICE_OPTIONAL:
            if d.get(key) is not None:
                _number(d[key], f"{at}.{key}")
        for phase in ("prefill", "decode"):
            for key, v in _mapping(d.get(phase), f"{at}.{phase}").items():
                _number(v, f"{at}.{phase}.{key}")
        for i, c in enumerate(_list(d.get("capacity"), f"{at}.capacity")):
            for key, v in _mapping(c, f"{at}.capacity[{i}]").items():
                if key == "device":
                    _text(v, f"{at}.capacity[{i}].device")
                elif v is not None or key != "capacity_bytes":
                    _number(v, f"{at}.capacity[{i}].{key}")


def _totals(t: Any, at: str) -> None:
    for key, v in _mapping(t, at).items():
        if key not in TOTALS_FIELDS:
            raise _Invalid(at, f"a mapping of {', '.join(TOTALS_FIELDS)}", key)
        _number(v, f"{at}.{key}")


def _number(v: Any, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Invalid(field, "a number", v)
    if not math.isfinite(v) or v < 0:
        raise _Invalid(field, "a finite number >= 0", v)
    return v


def _text(v: Any, field: str) -> str:
    if not isinstance(v, str):
        raise _Invalid(field, "a string", v)
    return v


def _list(v: Any, field: str, shortest: int = 0, longest: int | None = None) -> list:
    if not isinstance(v, list):
        raise _Invalid(field, "a list", v)
    if len(v) < shortest or (longest is not None and len(v) > longest):
        span = f"{shortest}" if shortest == longest else f"{shortest} to {longest}"
        raise _Invalid(field, f"a list of {span} items", v)
    return v


def _mapping(v: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise _Invalid(field, "a mapping", v)
    return v
