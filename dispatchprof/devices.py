"""Device profiles: the schema, the strict YAML loader, and the bundled catalog.

A profile file holds one device family: ``family``, ``source`` (where its figures come from),
optional ``defaults`` merged under every device, and ``devices`` (name -> fields). Units are in
the field names: GB/s are 1e9 bytes/s, GB are 1e9 bytes, TFLOPS are 1e12 FLOP/s, pJ/bit, pJ/FLOP,
microseconds, watts, ns/element. A figure's source is the device's ``source`` (or the file's),
unless ``sources`` names one for that field.

Loading is strict: an unknown, missing, duplicated or wrongly typed key, a NaN or infinite number,
a zero or negative bandwidth or peak, raises `DeviceProfileError` naming the file, the device and
the field. YAML is read with a safe loader only.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

import yaml

Kind = Literal["pim", "gpu", "soc", "cpu", "other"]
DTYPE_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")
#: Storage bits of the dtypes weights can be simulated in (``weight_dtype``).
WEIGHT_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
WEIGHT_CATEGORIES = ("div", "sqrt", "exp", "cmp", "other")
OVERRIDE_OPS = ("softmax", "silu", "rms_norm")


class DeviceProfileError(ValueError):
    """A device profile that does not follow the schema, or a device name nobody defines."""


@dataclass(frozen=True)
class Device:
    """One device's figures, in the units their names say (see the module docstring)."""

    name: str
    source: str
    memory_capacity_gb: float | None
    memory_bandwidth_gb_per_s: float
    memory_pj_per_bit: float
    host_to_device_gb_per_s: float
    host_to_device_pj_per_bit: float
    device_to_host_gb_per_s: float
    device_to_host_pj_per_bit: float
    matrix_tflops: Mapping[str, float]
    vector_tflops: Mapping[str, float]
    pj_per_flop: float
    kind: str = "other"
    family: str = ""
    product: str = ""
    cost_weights: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(WEIGHT_CATEGORIES, 1.0))
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    launch_overhead_us: float = 0.0
    static_power_w: float = 0.0
    ns_per_element: Mapping[str, float] = field(default_factory=dict)
    cache_capacity_mb: float | None = None       # last-level cache: ops whose traffic fits run at
    cache_bandwidth_gb_per_s: float | None = None  # cache bandwidth instead of memory bandwidth
    interconnect_gb_per_s: float | None = None
    interconnect_pj_per_bit: float | None = None
    tdp_w: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    file: str = ""

    def __hash__(self) -> int:
        return hash((self.name, self.file))

    def peak_flops(self, dtype_key: str, matrix: bool) -> float:
        """Peak FLOP/s for an op of ``dtype_key`` ("bf16", ...): the matrix table for matrix ops,
        else the vector table; a dtype missing from the matrix table falls back to the vector
        table, and one missing there to the vector fp32 peak (always present)."""
        if matrix and dtype_key in self.matrix_tflops:
            return self.matrix_tflops[dtype_key] * 1e12
        return self.vector_tflops.get(dtype_key, self.vector_tflops["fp32"]) * 1e12

    def as_bound(self) -> Device:
        """This device with the pure roofline bound: efficiencies 1, no launch overhead."""
        return dataclasses.replace(self, compute_efficiency=1.0, memory_efficiency=1.0, launch_overhead_us=0.0)

    def bandwidth_for(self, traffic_bytes: float) -> float:
        """Bytes/s an op with this much traffic gets: the cache's when it fits in the last-level
        cache (when the profile has one), else the memory's; times memory_efficiency."""
        if self.cache_capacity_mb is not None and self.cache_bandwidth_gb_per_s is not None \
                and traffic_bytes <= self.cache_capacity_mb * 1e6:
            return self.cache_bandwidth_gb_per_s * 1e9 * self.memory_efficiency
        return self.memory_bandwidth_gb_per_s * 1e9 * self.memory_efficiency

    def source_of(self, field_name: str) -> str:
        """Where the figure ``field_name`` comes from."""
        return self.sources.get(field_name, self.source)


# --- the schema: name -> (python types, required, check) ---------------------------------------
_NUMBER = (int, float)


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _fraction(v: float) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


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
    return [_device(path, str(name), {**defaults, **(spec or {})}, data.get("family", ""), data.get("source"))
            for name, spec in devices.items()]


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


# --- the bundled catalog -----------------------------------------------------------------------
_CATALOG: dict[str, Device] | None = None


#: Listing order of the bundled families; other files follow alphabetically.
_FILE_ORDER = ("pim_ai", "cxl_pim", "samsung_pim", "phone_soc", "nvidia", "amd")


def _bundled_files() -> list[Path]:
    root = resources.files("dispatchprof.device_profiles")
    files = [Path(str(p)) for p in root.iterdir() if p.name.endswith((".yaml", ".yml"))]
    rank = {stem: i for i, stem in enumerate(_FILE_ORDER)}
    return sorted(files, key=lambda p: (rank.get(p.stem, len(rank)), p.name))


def catalog() -> dict[str, Device]:
    """Every bundled device by name (loaded once)."""
    global _CATALOG
    if _CATALOG is None:
        found: dict[str, Device] = {}
        for path in _bundled_files():
            for d in read_profile_file(path):
                if d.name.lower() in (n.lower() for n in found):
                    raise DeviceProfileError(f"{path}: device {d.name!r} is defined twice "
                                             f"(also in {found[d.name].file})")
                found[d.name] = d
        _CATALOG = found
    return _CATALOG


def list_devices() -> list[str]:
    """Names of the bundled devices: PIM first, then phone SoCs, then GPUs."""
    return list(catalog())


def load_device(name_or_path: str | os.PathLike | Device, name: str | None = None) -> Device:
    """A bundled device by name (exact, case-insensitive), or the device of a YAML file
    (``name`` picks one when the file holds several). A Device is returned as is."""
    if isinstance(name_or_path, Device):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"load_device() takes a device name or a YAML path, got {type(name_or_path).__name__}")
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text or os.path.isfile(text):
        devices = read_profile_file(text)
        if name is None and len(devices) == 1:
            return devices[0]
        by_name = {d.name.lower(): d for d in devices}
        if name is not None and name.lower() in by_name:
            return by_name[name.lower()]
        raise DeviceProfileError(f"{text}: holds {', '.join(d.name for d in devices)}; "
                                 f"pick one with load_device({text!r}, name=...)")
    by_name = {n.lower(): d for n, d in catalog().items()}
    if text.lower() in by_name:
        return by_name[text.lower()]
    raise DeviceProfileError(f"unknown device {text!r}; known devices: {', '.join(list_devices())} "
                             f"(or give the path of a device YAML file)")


__all__ = ["Device", "DeviceProfileError", "catalog", "list_devices", "load_device", "read_profile_file"]
