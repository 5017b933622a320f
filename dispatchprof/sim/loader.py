"""The strict YAML loader of device profiles.

A profile file holds one device family: ``family``, ``source`` (where its figures come from),
optional ``defaults`` merged under every device, and ``devices`` (name -> fields; see
`dispatchprof.sim.device.Device` for the units).

Loading is strict: an unknown, missing, duplicated or wrongly typed key, a NaN or infinite number,
a zero or negative bandwidth or peak, raises `DeviceProfileError` naming the file, the device and
the field. YAML is read with a safe loader only.

Before parsing, a file is refused when it is larger than `MAX_FILE_BYTES`, not UTF-8 text,
nested deeper than `MAX_DEPTH`, or uses anchors and aliases; every key must be a string. A
nonzero figure must lie in the physical range of its unit (`UNIT_RANGES`, found by the end of
the field's name), so a wrong unit or a typo such as 1e-300 is refused with the limit it broke;
``compute_units``, ``price_usd_per_hour`` and ``gemm_tile`` (at most `MAX_TILE`) have ranges too.
A ``pim`` mapping (a PIM system's units and per-unit rates) is checked by
`dispatchprof.sim.pim.parse_pim`.
Every numeric field is thus checked for type, finiteness, sign (> 0 wherever the simulator divides
by it) and magnitude, and the message names the file, the device, the field and the allowed range.

Numbers are read as YAML 1.2 writes them: ``3.35e12``, ``1e-6`` and ``2E3`` are floats (PyYAML
alone reads an exponent without a dot or a sign as text). A number in quotes stays text and is
refused with that reason.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, get_args

import yaml

from dispatchprof.errors import DeviceProfileError
from dispatchprof.results.files import READ_LIMITS, read_text
from dispatchprof.sim.device import DTYPE_KEYS, OVERRIDE_OPS, WEIGHT_CATEGORIES, Device, Kind
from dispatchprof.sim.pim import parse_pim

# --- the schema: name -> (python types, required, check) ---------------------------------------
_NUMBER = (int, float)


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _fraction(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def _share(v: float) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def _tile(v: list) -> str | None:
    ok = len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= MAX_TILE for x in v)
    return None if ok else f"must be two whole numbers from 1 to {MAX_TILE} (rows, cols), such as [128, 128]"


_FIELDS: dict[str, tuple[tuple[type, ...], bool, Any]] = {
    "source": ((str,), False, None),
    "kind": ((str,), False, None),
    "product": ((str,), False, None),
    "memory_capacity_gb": (_NUMBER + (type(None),), True, _positive),
    "memory_bandwidth_gb_per_s": (_NUMBER, True, _positive),
    "memory_pj_per_bit": (_NUMBER, True, _non_negative),
    "host_to_device_gb_per_s": (_NUMBER, True, _positive),
    "host_to_device_pj_per_bit": (_NUMBER, True, _non_negative),
    "device_to_host_gb_per_s": (_NUMBER, True, _positive),
    "device_to_host_pj_per_bit": (_NUMBER, True, _non_negative),
    "matrix_tflops": ((dict,), True, ("dtype", _positive)),
    "vector_tflops": ((dict,), True, ("dtype", _positive)),
    "pj_per_flop": (_NUMBER, True, _non_negative),
    "cost_weights": ((dict,), False, ("weight", _positive)),
    "compute_efficiency": (_NUMBER, False, _fraction),
    "matrix_efficiency": ((dict,), False, ("dtype", _fraction)),
    "expert_matrix_efficiency": ((dict,), False, ("dtype", _fraction)),
    "attention_efficiency": ((dict,), False, ("dtype", _fraction)),
    "attention_work_curve": ((dict,), False, ("curve", None)),
    "memory_efficiency": (_NUMBER, False, _fraction),
    "launch_overhead_us": (_NUMBER, False, _non_negative),
    "static_power_w": (_NUMBER, False, _non_negative),
    "ns_per_element": ((dict,), False, ("override", _positive)),
    "cache_capacity_mb": (_NUMBER, False, _positive),
    "cache_bandwidth_gb_per_s": (_NUMBER, False, _positive),
    "interconnect_gb_per_s": (_NUMBER, False, _positive),
    "interconnect_pj_per_bit": (_NUMBER, False, _non_negative),
    "interconnect_latency_us": (_NUMBER, False, _non_negative),
    "interconnect_step_us": (_NUMBER, False, _non_negative),
    "host_overhead_us": (_NUMBER, False, _non_negative),
    "graph_launch_us": (_NUMBER, False, _non_negative),
    "sequence_host_us": (_NUMBER, False, _non_negative),
    "compute_units": ((int,), False, _positive),
    "gemm_tile": ((list,), False, _tile),
    "matrix_memory_efficiency": (_NUMBER, False, _fraction),
    "unoverlapped_fraction": (_NUMBER, False, _share),
    "weight_only_efficiency": ((dict,), False, ("dtype", _fraction)),
    "weight_only_kernel_us": ((dict,), False, ("dtype", _non_negative)),
    "matrix_pj_per_flop": ((dict,), False, ("dtype", _non_negative)),
    "tdp_w": (_NUMBER, False, _positive),
    "price_usd_per_hour": (_NUMBER, False, _positive),
    "sources": ((dict,), False, ("sources", None)),
    "pim": ((dict,), False, ("pim", None)),
}
_LARGEST = 1e12   # no figure in these units comes near it (the largest are about 1e5)
#: A profile file holds a few kB; this is 50 times the largest bundled one.
MAX_FILE_BYTES = READ_LIMITS["device profile"]
#: Mappings and lists nest at most this deep (a profile needs 4: file, devices, device, table).
MAX_DEPTH = 8
#: (smallest, largest) nonzero value of a figure, by the unit its field name ends in.
UNIT_RANGES: dict[str, tuple[float, float]] = {
    "_gb": (1e-6, 1e6),              # memory capacity: 1 kB .. 1 PB
    "_mb": (1e-6, 1e9),              # cache capacity: 1 B .. 1 PB
    "_gb_per_s": (1e-6, 1e6),        # bandwidth: 1 kB/s .. 1 PB/s
    "tflops": (1e-9, 1e6),           # peaks: 1 kFLOP/s .. 1 EFLOP/s
    "_pj_per_bit": (1e-4, 1e4),
    "pj_per_flop": (1e-4, 1e4),
    "_us": (1e-6, 1e6),              # 1 ps .. 1 s
    "_w": (1e-6, 1e6),               # 1 uW .. 1 MW
    "efficiency": (1e-6, 1.0),
    "cost_weights": (1e-6, 1e6),     # relative cost of a DIV, SQRT, ... against an ADD
    "ns_per_element": (1e-9, 1e9),
    "compute_units": (1, 1e6),       # SMs, CUs, PIM banks: the largest chips have a few thousand
    "usd_per_hour": (1e-6, 1e6),     # price of one device-hour
}
#: Largest side of a GEMM tile (elements); real tiles are 16 .. 512.
MAX_TILE = 65536
_TABLE_KEYS = {"dtype": DTYPE_KEYS, "weight": WEIGHT_CATEGORIES, "override": OVERRIDE_OPS, "curve": DTYPE_KEYS}
_FILE_KEYS = ("family", "source", "defaults", "devices")


#: PyYAML's safe loader on libyaml where PyYAML was built with it (about 15x faster on the bundled
#: profiles), else the pure-Python one; both construct the same objects.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SAFE_LOADER):
    """Safe loader that refuses duplicate keys and reads YAML 1.2 numbers: ``3.35e12`` and ``1e-6``
    are floats (PyYAML's YAML 1.1 rules read an exponent without a dot or sign as a string)."""


#: YAML 1.2 core-schema floats that YAML 1.1 misses: an exponent without a sign or without a dot.
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            raise DeviceProfileError(f"{loader.name}: the key at line {key_node.start_mark.line + 1} is of type "
                                     f"{type(key).__name__}; every key of a device profile is a string "
                                     f"(a field or device name, quoted if it looks like a number)")
        if key in seen:
            raise DeviceProfileError(f"{loader.name}: duplicated key {key!r} at line {key_node.start_mark.line + 1} "
                                     f"(first at line {seen[key]})")
        seen[key] = key_node.start_mark.line + 1
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_profile_file(path: str | os.PathLike) -> list[Device]:
    """Every device of one profile file, validated (size and encoding checked before parsing)."""
    path = str(path)
    text = read_text(path, "device profile", DeviceProfileError)
    return parse_profile(text, path)


def parse_profile(text: str, where: str) -> list[Device]:
    """Every device of a profile document (YAML text), validated; ``where`` names it in errors.
    Anchors and aliases are refused (they allow exponential "billion laughs" documents)."""
    if len(text) > MAX_FILE_BYTES:
        raise DeviceProfileError(f"{where}: a device profile is at most {MAX_FILE_BYTES // 1024} KiB; "
                                 f"this one holds {len(text):,} characters")
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_SAFE_LOADER):
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise DeviceProfileError(f"{where}: YAML anchors and aliases are not allowed in device profiles "
                                         f"(line {line}); use the file's 'defaults' mapping to share fields")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise DeviceProfileError(f"{where}: nested deeper than {MAX_DEPTH} levels at line {line}; "
                                             f"a device profile needs 4 (file, devices, device, table)")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as e:
        raise DeviceProfileError(f"{where}: not valid YAML{_yaml_problem(e)}") from None
    loader = _StrictLoader(text)
    loader.name = where
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as e:
        raise DeviceProfileError(f"{where}: not valid YAML{_yaml_problem(e)}") from None
    finally:
        loader.dispose()
    return _devices_of(where, data)


def _yaml_problem(e: yaml.YAMLError) -> str:
    """': what the parser expected (line L column C)' from a YAML error, on one line."""
    mark = getattr(e, "problem_mark", None)
    where = f" (line {mark.line + 1} column {mark.column + 1})" if mark is not None else ""
    return f": {getattr(e, 'problem', None) or e}{where}"


def _devices_of(path: str, data: Any) -> list[Device]:
    if not isinstance(data, dict):
        raise DeviceProfileError(f"{path}: a device profile is a mapping with keys {', '.join(_FILE_KEYS)}")
    unknown = sorted(set(data) - set(_FILE_KEYS))
    if unknown:
        raise DeviceProfileError(f"{path}: unknown top-level key {unknown[0]!r}; allowed: {', '.join(_FILE_KEYS)}")
    devices, defaults = data.get("devices"), data.get("defaults") or {}
    if not isinstance(devices, dict) or not devices:
        raise DeviceProfileError(f"{path}: 'devices' must be a non-empty mapping of device name to fields")
    if not isinstance(defaults, dict):
        raise DeviceProfileError(f"{path}: 'defaults' must be a mapping of fields")
    for key in ("family", "source"):
        if key in data and not isinstance(data[key], str):
            raise DeviceProfileError(f"{path}: '{key}' must be a string")
    return [_device(path, str(name), _merged(defaults, spec), data.get("family", ""), data.get("source"))
            for name, spec in devices.items()]


def _merged(defaults: dict, spec: Any) -> Any:
    """A device's fields over the file's defaults; their ``sources`` and ``pim`` mappings merge too
    (one level deep: a device's ``pim`` keys replace the defaults' keys of the same name, and the
    two ``pim.sources`` merge)."""
    if not isinstance(spec, dict):
        return spec if spec is not None else dict(defaults)
    merged = {**defaults, **spec}
    if isinstance(defaults.get("sources"), dict) and isinstance(spec.get("sources"), dict):
        merged["sources"] = {**defaults["sources"], **spec["sources"]}
    if isinstance(defaults.get("pim"), dict) and isinstance(spec.get("pim"), dict):
        pim = {**defaults["pim"], **spec["pim"]}
        if isinstance(defaults["pim"].get("sources"), dict) and isinstance(spec["pim"].get("sources"), dict):
            pim["sources"] = {**defaults["pim"]["sources"], **spec["pim"]["sources"]}
        merged["pim"] = pim
    return merged


def _device(path: str, name: str, spec: Any, family: str, file_source: str | None) -> Device:
    where = f"{path}: device {name!r}"
    if not isinstance(spec, dict):
        raise DeviceProfileError(f"{where}: expected a mapping of fields, got {type(spec).__name__}")
    for key in spec:
        if key not in _FIELDS:
            raise DeviceProfileError(f"{where}: unknown field {key!r}; allowed: {', '.join(_FIELDS)}")
    for key, (types, required, _) in _FIELDS.items():
        if required and key not in spec:
            raise DeviceProfileError(f"{where}: missing field {key!r}")
    for key, value in spec.items():
        _check_field(where, key, value)
    source = spec.get("source", file_source)
    if not source:
        raise DeviceProfileError(f"{where}: missing field 'source' (where the figures come from), "
                                 f"in the device or at the top of the file")
    if "fp32" not in spec["vector_tflops"]:
        raise DeviceProfileError(f"{where}: field 'vector_tflops' needs an 'fp32' entry (the fallback peak)")
    kind = spec.get("kind", "other")
    if kind not in get_args(Kind):
        raise DeviceProfileError(f"{where}: field 'kind' must be one of {get_args(Kind)}, got {kind!r}")
    weights = {**dict.fromkeys(WEIGHT_CATEGORIES, 1.0), **spec.get("cost_weights", {})}
    values = {k: v for k, v in spec.items() if k not in ("source", "cost_weights")}
    if "gemm_tile" in values:
        values["gemm_tile"] = tuple(values["gemm_tile"])
    if "attention_work_curve" in values:
        values["attention_work_curve"] = {k: tuple((float(g), float(f)) for g, f in points)
                                          for k, points in values["attention_work_curve"].items()}
    if "pim" in values:
        values["pim"] = parse_pim(where, values["pim"])
    return Device(name=name, source=source, family=family, cost_weights=weights, file=path, **values)


def _check_field(where: str, key: str, value: Any) -> None:
    types, _, check = _FIELDS[key]
    if isinstance(value, bool) or not isinstance(value, types):
        expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        hint = " (a number in quotes is text: write it without quotes)" if _numeric_text(value) else ""
        raise DeviceProfileError(f"{where}: field {key!r} must be {expected}, got {type(value).__name__} "
                                 f"{value!r}{hint}")
    if isinstance(value, float) and not math.isfinite(value):
        raise DeviceProfileError(f"{where}: field {key!r} must be a finite number, got {value!r}")
    if isinstance(value, (int, float)) and abs(value) > _LARGEST:
        raise DeviceProfileError(f"{where}: field {key!r} must be at most {_LARGEST:g}, got {value!r} "
                                 f"(check the unit in the field's name)")
    if isinstance(value, dict):
        _check_table(where, key, value, check)
    elif check is not None and value is not None:
        problem = check(value)
        if problem:
            raise DeviceProfileError(f"{where}: field {key!r} {problem}, got {value!r}")
    if isinstance(value, (int, float)):
        _check_range(where, key, value)


def _numeric_text(value: Any) -> bool:
    """Whether ``value`` is text that reads as a number ('3.35e12' quoted in the YAML)."""
    try:
        return isinstance(value, str) and math.isfinite(float(value.replace("_", "")))
    except ValueError:
        return False


def _check_table(where: str, key: str, table: dict, check: tuple[str, Any]) -> None:
    kind, value_check = check
    if kind == "pim":
        parse_pim(where, table)
        return
    if kind == "sources":
        for k, v in table.items():
            if k not in _FIELDS or not isinstance(v, str):
                raise DeviceProfileError(f"{where}: field 'sources' maps field names to strings; "
                                         f"got {k!r}: {v!r}")
        return
    if not table:
        raise DeviceProfileError(f"{where}: field {key!r} must not be empty")
    if kind == "curve":
        for k, points in table.items():
            if k not in _TABLE_KEYS[kind]:
                raise DeviceProfileError(f"{where}: field {key!r} has unknown key {k!r}; allowed: "
                                         f"{', '.join(_TABLE_KEYS[kind])}")
            _check_curve(where, f"{key}.{k}", points)
        return
    for k, v in table.items():
        if k not in _TABLE_KEYS[kind]:
            raise DeviceProfileError(f"{where}: field {key!r} has unknown key {k!r}; allowed: "
                                     f"{', '.join(_TABLE_KEYS[kind])}")
        if isinstance(v, bool) or not isinstance(v, _NUMBER) or not math.isfinite(v) or abs(v) > _LARGEST:
            hint = " (a number in quotes is text: write it without quotes)" if _numeric_text(v) else ""
            raise DeviceProfileError(f"{where}: field '{key}.{k}' must be a finite number up to {_LARGEST:g}, "
                                     f"got {v!r}{hint}")
        problem = value_check(v)
        if problem:
            raise DeviceProfileError(f"{where}: field '{key}.{k}' {problem}, got {v!r}")
        _check_range(where, f"{key}.{k}", v, key)


def _check_curve(where: str, label: str, points: Any) -> None:
    """A work curve: two or more [GFLOP, fraction] points, GFLOP > 0 and rising (at most
    `_LARGEST`), each fraction in (0, 1]."""
    shape = ("must be a list of two or more [GFLOP, fraction] points with GFLOP rising, such as "
             "[[4, 0.2], [200, 0.5]]")
    if not isinstance(points, list) or len(points) < 2 or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, _NUMBER) and not isinstance(x, bool)
                                                        and math.isfinite(x) for x in p) for p in points):
        raise DeviceProfileError(f"{where}: field {label!r} {shape}; got {points!r}")
    gflops = [p[0] for p in points]
    if not all(0 < g <= _LARGEST for g in gflops) or any(b <= a for a, b in zip(gflops, gflops[1:])):
        raise DeviceProfileError(f"{where}: field {label!r} {shape} (each above 0, at most {_LARGEST:g}); "
                                 f"got GFLOP {gflops!r}")
    for g, fraction in points:
        if not 0 < fraction <= 1:
            raise DeviceProfileError(f"{where}: field {label!r}: the fraction at {g:g} GFLOP must be in (0, 1], "
                                     f"got {fraction!r}")


def _check_range(where: str, label: str, value: float, key: str | None = None) -> None:
    """A nonzero figure must lie in the physical range of its unit (`UNIT_RANGES`)."""
    name = key or label
    unit = max((u for u in UNIT_RANGES if name.endswith(u)), key=len, default=None)
    if unit is None or value == 0:
        return
    low, high = UNIT_RANGES[unit]
    if not low <= abs(value) <= high:
        raise DeviceProfileError(f"{where}: field {label!r} = {value!r} is outside the physical range "
                                 f"{low:g} .. {high:g} of its unit (check the unit in the field's name)")
