"""The bundled device profiles (``devices/*.yaml``, installed as dispatchprof.device_profiles)
and `load_device`, which resolves a name, a YAML path or a Device to one Device."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from dispatchprof.errors import DeviceProfileError
from dispatchprof.results.suggest import did_you_mean
from dispatchprof.sim.device import Device
from dispatchprof.sim.loader import read_profile_file

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
                             f"(or give the path of a device YAML file)" + did_you_mean(text, list_devices()))
