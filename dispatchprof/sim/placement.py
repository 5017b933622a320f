"""Which device runs each module scope, and the scenarios a run is simulated on.

``devices`` is one device (a name, a YAML path or a Device), or a mapping of module-name globs
to devices: ``{"*.self_attn*": "PIM-AI-1chip", "*": "PIM-AI-4chip"}``. Globs are matched with
``fnmatch`` against the op's scope (``model.layers.3.self_attn.q_proj``; the root is ``""``),
first match wins; a mapping must end in a rule that matches everything (``"*"``) so no op is
left without a device.

A run's ``devices`` (one device, a list of them side by side, or placement mappings) become
`Scenarios`: named placements whose devices are resolved once (a YAML file is parsed once) and
shared by every consumer: the simulator, the capacity check, the trace, the roofline, the reports.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Union

from dispatchprof.errors import DeviceProfileError
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.device import Device

DeviceSpec = Union[str, os.PathLike, Device]


@dataclass(frozen=True)
class Placement:
    """Ordered (glob, device) rules; the first glob that matches a scope names its device."""

    rules: tuple[tuple[str, Device], ...]
    _cache: dict[str, Device] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def devices(self) -> tuple[Device, ...]:
        """The distinct devices, in rule order."""
        seen: dict[str, Device] = {}
        for _, d in self.rules:
            seen.setdefault(d.name, d)
        return tuple(seen.values())

    def as_bound(self) -> Placement:
        """The same placement on the bound versions of its devices (Device.as_bound)."""
        return Placement(tuple((glob, d.as_bound()) for glob, d in self.rules))

    def replacing(self, **fields: object) -> Placement:
        """The same placement with ``fields`` replaced on every device (such as a host cost)."""
        return Placement(tuple((glob, dataclasses.replace(d, **fields)) for glob, d in self.rules))

    def device_for(self, scope: str) -> Device:
        d = self._cache.get(scope)
        if d is None:
            d = self._cache[scope] = next(dev for glob, dev in self.rules if _matches(glob, scope))
        return d


def _matches(glob: str, scope: str) -> bool:
    return glob == "*" or fnmatch.fnmatchcase(scope, glob)


def placement_of(devices: DeviceSpec | Mapping[str, DeviceSpec] | Placement) -> Placement:
    """A Placement from one device or a glob -> device mapping (see module docstring)."""
    if isinstance(devices, Placement):
        return devices
    if isinstance(devices, Mapping):
        if not devices:
            raise ValueError("a placement needs at least one rule, such as {'*': 'PIM-AI-1chip'}")
        rules = []
        for glob, spec in devices.items():
            if not isinstance(glob, str):
                raise TypeError(f"placement globs are strings such as '*.self_attn*', got {glob!r}")
            rules.append((glob, load_device(spec)))
        if not any(g == "*" for g, _ in rules):
            raise ValueError(f"placement {list(devices)} has no catch-all rule: add '*': DEVICE last, "
                             f"so that every op (the root model's included) has a device")
        return Placement(tuple(rules))
    return Placement((("*", load_device(devices)),))


@dataclass(frozen=True)
class Scenarios:
    """Named placements, in the order they were given; devices already resolved."""

    items: tuple[tuple[str, Placement], ...] = ()

    def __iter__(self) -> Iterator[str]:
        return iter(name for name, _ in self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, name: str) -> Placement:
        for n, p in self.items:
            if n == name:
                return p
        raise KeyError(name)

    def values(self) -> list[Placement]:
        return [p for _, p in self.items]

    def lookup(self, name: str) -> str | None:
        """The scenario named ``name`` (case-insensitive), or None."""
        return next((n for n in self if n.lower() == name.lower()), None)


def scenarios_of(devices: Any) -> Scenarios:
    """Scenarios from a run's ``devices``: one device (a name, a YAML path or a Device), a
    placement mapping, or a list of them; `Scenarios` are returned as they are. A device is
    named by its own name; a placement mapping "placement" (the first) or "placement N"."""
    if isinstance(devices, Scenarios):
        return devices
    if devices is None:
        return Scenarios()
    out: dict[str, Placement] = {}
    for spec in devices if isinstance(devices, (list, tuple)) else [devices]:
        p = placement_of(spec)
        if isinstance(spec, Mapping):
            name = "placement" if "placement" not in out else f"placement {len(out) + 1}"
        else:
            name = p.devices[0].name
            _check_unique(name, p.devices[0], out)
        out[name] = p
    return Scenarios(tuple(out.items()))


def _check_unique(name: str, device: Device, out: Mapping[str, Placement]) -> None:
    """Every scenario of a run has its own name (compared case-insensitively): a device read from a
    file under the name of a bundled device (or of another file's device) given in the same run is
    refused, naming both files, instead of replacing it. The same device given twice is kept once."""
    other = next((n for n in out if n.lower() == name.lower()), None)
    if other is None or len(out[other].devices) != 1:
        if other is not None:
            raise DeviceProfileError(f"device {name!r} ({device.file}) has the name of a placement of this run; "
                                     f"rename the device in its YAML file")
        return
    first = out[other].devices[0]
    if (first.name, first.file) != (device.name, device.file):
        raise DeviceProfileError(f"two devices of this run are named {other!r}: {first.name} from {first.file} and "
                                 f"{device.name} from {device.file}; each device of a run needs its own name "
                                 f"(rename the device in its YAML file)")
