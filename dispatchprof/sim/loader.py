"""The strict YAML loader of device profiles.

A profile file holds one device family: ``family``, ``source`` (where its figures come from),
optional ``defaults`` merged under every device, and ``devices`` (name -> fields; see
`dispatchprof.sim.device.Device` for the units).

Loading is strict: an unknown, missing, duplicated or wrongly typed key, a NaN or infinite number,
a zero or negative bandwidth or peak, raises `DeviceProfileError` naming the file, the device and
the field. YAML is read with a safe loader only.
"""

from __future__ import annotations

import math
import os
from typing import Any, get_args

import yaml

from dispatchprof.errors import DeviceProfileError
from dispatchprof.sim.device import DTYPE_KEYS, OVERRIDE_OPS, WEIGHT_CATEGORIES, Device, Kind

# --- the schema: name -> (python types, required, check) ---------------------------------------
_NUMBER = (int, float)


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _fraction(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def _tile(v: list) -> str | None:
    ok = len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)
    return None if ok else "must be two whole numbers > 0 (rows, cols), such as [128, 128]"


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
    "memory_efficiency": (_NUMBER, False, _fraction),
    "launch_overhead_us": (_NUMBER, False, _non_negative),
    "static_power_w": (_NUMBER, False, _non_negative),
    "ns_per_element": ((dict,), False, ("override", _positive)),
    "cache_capacity_mb": (_NUMBER, False, _positive),
    "cache_bandwidth_gb_per_s": (_NUMBER, False, _positive),
    "interconnect_gb_per_s": (_NUMBER, False, _positive),
    "interconnect_pj_per_bit": (_NUMBER, False, _non_negative),
    "interconnect_latency_us": (_NUMBER, False, _non_negative),
    "host_overhead_us": (_NUMBER, False, _non_negative),
    "graph_launch_us": (_NUMBER, False, _non_negative),
    "compute_units": ((int,), False, _positive),
    "gemm_tile": ((list,), False, _tile),
    "matrix_memory_efficiency": (_NUMBER, False, _fraction),
    "matrix_pj_per_flop": ((dict,), False, ("dtype", _non_negative)),
    "tdp_w": (_NUMBER, False, _positive),
    "sources": ((dict,), False, ("sources", None)),
}
_LARGEST = 1e12   # no figure in these units comes near it (the largest are about 1e5)
_TABLE_KEYS = {"dtype": DTYPE_KEYS, "weight": WEIGHT_CATEGORIES, "override": OVERRIDE_OPS}
_FILE_KEYS = ("family", "source", "defaults", "devices")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise DeviceProfileError(f"{loader.name}: duplicated key {key!r} at line {key_node.start_mark.line + 1} "
                                     f"(first at line {seen[key]})")
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_profile_file(path: str | os.PathLike) -> list[Device]:
    """Every device of one profile file, validated."""
    path = str(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise DeviceProfileError(f"{path}: cannot read the device profile ({e.strerror})") from None
    return parse_profile(text, path)


def parse_profile(text: str, where: str) -> list[Device]:
    """Every device of a profile document (YAML text), validated; ``where`` names it in errors.
    Anchors and aliases are refused (they allow exponential "billion laughs" documents)."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                line = event.start_mark.line + 1
                raise DeviceProfileError(f"{where}: YAML anchors and aliases are not allowed in device profiles "
                                         f"(line {line}); use the file's 'defaults' mapping to share fields")
    except yaml.YAMLError as e:
        raise DeviceProfileError(f"{where}: not valid YAML: {e}") from None
    loader = _StrictLoader(text)
    loader.name = where
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as e:
        raise DeviceProfileError(f"{where}: not valid YAML: {e}") from None
    finally:
        loader.dispose()
    return _devices_of(where, data)


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
    """A device's fields over the file's defaults; their ``sources`` mappings merge too."""
    if not isinstance(spec, dict):
        return spec if spec is not None else dict(defaults)
    merged = {**defaults, **spec}
    if isinstance(defaults.get("sources"), dict) and isinstance(spec.get("sources"), dict):
        merged["sources"] = {**defaults["sources"], **spec["sources"]}
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
    return Device(name=name, source=source, family=family, cost_weights=weights, file=path, **values)


def _check_field(where: str, key: str, value: Any) -> None:
    types, _, check = _FIELDS[key]
    if isinstance(value, bool) or not isinstance(value, types):
        expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise DeviceProfileError(f"{where}: field {key!r} must be {expected}, got {type(value).__name__} {value!r}")
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


def _check_table(where: str, key: str, table: dict, check: tuple[str, Any]) -> None:
    kind, value_check = check
    if kind == "sources":
        for k, v in table.items():
            if k not in _FIELDS or not isinstance(v, str):
                raise DeviceProfileError(f"{where}: field 'sources' maps field names to strings; "
                                         f"got {k!r}: {v!r}")
        return
    if not table:
        raise DeviceProfileError(f"{where}: field {key!r} must not be empty")
    for k, v in table.items():
        if k not in _TABLE_KEYS[kind]:
            raise DeviceProfileError(f"{where}: field {key!r} has unknown key {k!r}; allowed: "
                                     f"{', '.join(_TABLE_KEYS[kind])}")
        if isinstance(v, bool) or not isinstance(v, _NUMBER) or not math.isfinite(v) or abs(v) > _LARGEST:
            raise DeviceProfileError(f"{where}: field '{key}.{k}' must be a finite number up to {_LARGEST:g}, "
                                     f"got {v!r}")
        problem = value_check(v)
        if problem:
            raise DeviceProfileError(f"{where}: field '{key}.{k}' {problem}, got {v!r}")
