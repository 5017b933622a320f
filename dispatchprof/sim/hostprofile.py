"""Host profiles: the CPU that drives a GPU, as the eager runtime's host time needs it.

A host profile (``devices/hosts/*.yaml``, installed as dispatchprof.device_profiles/hosts) gives:

- ``single_thread_score``: the CPU's single-thread speed (Geekbench 5 single-core points); it
  runs one iteration of the calibration loop (dispatchprof.count.hostcal) in
  ``python_loop_ns = anchor.python_loop_ns * anchor.single_thread_score / single_thread_score``;
- or ``python_loop_ns`` itself, for a host whose figure was fitted on decode steps measured on it
  (then ``single_thread_score`` may be left out: it is implied by the same formula);
- ``measured_loop_ns`` (optional): the calibration loop's real time on that CPU. ``python_loop_ns``
  is in the units counted model Python needs (the counted gaps include some of the counter's own
  work), so it is not the loop's real time; a host with both figures gives their ratio
  (`real_loop_ns`), which converts the other hosts' figures to real loop times;
- ``dispatch_us``: ATen's work below the dispatcher for an op that launches a kernel (output
  allocation, TensorIterator setup, stream bookkeeping);
- ``view_us``: the same for a call that launches nothing (views and metadata ops);
- ``launch_us``: the host side of one kernel launch (cudaLaunchKernel);
- ``graph_launch_us``: one CUDA graph replay, with the step's Python outside the graph;
- ``gpus``: the GPUs (device names) this host is the default for.

Eager host time of a record r (seconds), the model's host work measured while counting in
calibration-loop iterations (``OpRecord.host_loops``):

    t_host(r) = host_loops(r) * python_loop_ns * 1e-9                     (model Python)
              + ((host_calls(r) - 1) * view_us + dispatch_us) * 1e-6      (dispatch: the views before r, r)
              + launch_us * 1e-6                                          (launch: every eager record is a kernel)

A host file of one's own (``--host FILE``) may hold its hosts alone: without ``anchor`` it takes the
bundled file's (the speed scale every score is read against), and its ``defaults`` add to the bundled
ones (dispatch_us, view_us, launch_us, graph_launch_us). Loading is strict: an unknown or missing
key, a wrong type or a non-positive speed raises `HostProfileError` naming the file, the host and
the field; an unknown name lists the known ones.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dispatchprof.results.files import read_text


class HostProfileError(ValueError):
    """A host profile that cannot be used (one line: file, host, field, what is allowed)."""


@dataclass(frozen=True)
class HostProfile:
    """One host CPU: speed and per-op CUDA runtime costs (units in the names)."""

    name: str
    cpu: str
    single_thread_score: float
    python_loop_ns: float            # ns per calibration-loop iteration of counted model Python on this CPU
    dispatch_us: float
    view_us: float
    launch_us: float
    graph_launch_us: float
    gpus: tuple[str, ...] = ()
    source: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    measured_loop_ns: float | None = None   # the calibration loop's real time, measured on this CPU

    def model_s(self, host_loops: float) -> float:
        """Seconds this host runs ``host_loops`` calibration-loop iterations of model Python."""
        return host_loops * self.python_loop_ns * 1e-9

    def dispatch_s(self, host_calls: int, records: int = 1) -> float:
        """Dispatch seconds of ``records`` kernel records that made ``host_calls`` aten calls."""
        return ((host_calls - records) * self.view_us + records * self.dispatch_us) * 1e-6

    def eager_host_s(self, host_loops: float, host_calls: int) -> float:
        """t_host of one eager record (module docstring): model Python + dispatch + launch."""
        return self.model_s(host_loops) + self.dispatch_s(host_calls) + self.launch_us * 1e-6


_FIELDS = {"cpu": str, "single_thread_score": (int, float), "python_loop_ns": (int, float),
           "measured_loop_ns": (int, float),
           "dispatch_us": (int, float), "view_us": (int, float),
           "launch_us": (int, float), "graph_launch_us": (int, float), "gpus": list, "source": str,
           "sources": dict}
_REQUIRED = ("cpu", "dispatch_us", "view_us", "launch_us", "graph_launch_us")
_POSITIVE = ("single_thread_score",)
_CACHE: dict[str, HostProfile] | None = None


def bundled_file() -> Path:
    """The bundled host profiles."""
    return Path(str(resources.files("dispatchprof.device_profiles").joinpath("hosts", "hosts.yaml")))


def _file_data(path: str | os.PathLike) -> dict:
    """The top-level mapping of a host profile file (its keys checked)."""
    where = os.fspath(path)
    try:
        data = yaml.safe_load(read_text(path, "device profile", HostProfileError))
    except yaml.YAMLError as e:
        raise HostProfileError(f"{where}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise HostProfileError(f"{where}: a host profile file is a mapping with 'hosts' (and optionally "
                               f"'anchor', 'defaults', 'source')")
    unknown = set(data) - {"source", "anchor", "defaults", "hosts"}
    if unknown:
        raise HostProfileError(f"{where}: unknown key {sorted(unknown)[0]!r}; allowed: source, anchor, defaults, hosts")
    return data


def read_hosts(path: str | os.PathLike, inherit: bool = True) -> dict[str, HostProfile]:
    """Every host of one YAML file, by name (strict: see the module docstring). ``inherit``: a
    missing ``anchor`` is the bundled file's and ``defaults`` add to the bundled ones (False for
    the bundled file itself, which must state both)."""
    where = os.fspath(path)
    data = _file_data(path)
    base = _file_data(bundled_file()) if inherit else {}
    anchor = data.get("anchor", base.get("anchor"))
    if not isinstance(anchor, dict):
        raise HostProfileError(f"{where}: 'anchor' (single_thread_score, python_loop_ns) is missing")
    a_score = _positive(anchor.get("single_thread_score"), where, "anchor", "single_thread_score")
    a_loop = _positive(anchor.get("python_loop_ns"), where, "anchor", "python_loop_ns")
    own = data.get("defaults") or {}
    inherited = base.get("defaults") or {}
    defaults = {**inherited, **own, "sources": {**inherited.get("sources", {}), **own.get("sources", {})}}
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        raise HostProfileError(f"{where}: 'hosts' must be a non-empty list of hosts")
    out: dict[str, HostProfile] = {}
    for i, h in enumerate(hosts):
        if not isinstance(h, dict) or not isinstance(h.get("name"), str):
            raise HostProfileError(f"{where}: hosts[{i}] must be a mapping with a 'name'")
        name = h["name"]
        merged = {**defaults, **{k: v for k, v in h.items() if k != "name"}}
        merged["sources"] = {**defaults.get("sources", {}), **h.get("sources", {})}
        for key, value in merged.items():
            kind = _FIELDS.get(key)
            if kind is None:
                raise HostProfileError(f"{where}: host {name!r}: unknown field {key!r}; allowed: {', '.join(_FIELDS)}")
            if isinstance(value, bool) or not isinstance(value, kind):
                raise HostProfileError(f"{where}: host {name!r}: {key} has the wrong type ({type(value).__name__})")
        for key in _REQUIRED:
            if key not in merged:
                raise HostProfileError(f"{where}: host {name!r}: {key} is missing")
        if "python_loop_ns" in merged:
            loop_ns = _positive(merged["python_loop_ns"], where, name, "python_loop_ns")
            score = a_loop * a_score / loop_ns
        elif "single_thread_score" in merged:
            score = _positive(merged["single_thread_score"], where, name, "single_thread_score")
            loop_ns = a_loop * a_score / score
        else:
            raise HostProfileError(f"{where}: host {name!r}: single_thread_score (or python_loop_ns) is missing")
        for key in ("dispatch_us", "view_us", "launch_us", "graph_launch_us"):
            if not (0 <= merged[key] < math.inf):
                raise HostProfileError(f"{where}: host {name!r}: {key} must be a finite number >= 0, "
                                       f"got {merged[key]!r}")
        out[name] = HostProfile(name, merged["cpu"], float(score), loop_ns,
                                float(merged["dispatch_us"]), float(merged["view_us"]), float(merged["launch_us"]),
                                float(merged["graph_launch_us"]), tuple(merged.get("gpus", ())),
                                merged.get("source", ""), dict(merged["sources"]),
                                _positive(merged["measured_loop_ns"], where, name, "measured_loop_ns")
                                if "measured_loop_ns" in merged else None)
    return out


def _positive(value: Any, where: str, host: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise HostProfileError(f"{where}: host {host!r}: {key} must be a positive number, got {value!r}")
    return float(value)


def hosts() -> dict[str, HostProfile]:
    """The bundled hosts by name (read once)."""
    global _CACHE
    if _CACHE is None:
        _CACHE = read_hosts(bundled_file(), inherit=False)
    return _CACHE


def load_host(spec: str | os.PathLike | HostProfile) -> HostProfile:
    """A bundled host by name (case-insensitive), the only host of a YAML file, or the HostProfile
    itself; an unknown name lists the known ones."""
    if isinstance(spec, HostProfile):
        return spec
    text = os.fspath(spec)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        found = read_hosts(text)
        if len(found) != 1:
            raise HostProfileError(f"{text}: --host FILE must hold one host, it holds {len(found)}: "
                                   f"{', '.join(found)}")
        return next(iter(found.values()))
    known = hosts()
    for name, h in known.items():
        if name.lower() == text.lower():
            return h
    raise HostProfileError(f"unknown host {text!r}; known hosts: {', '.join(known)} (or a host YAML file)")


def default_host(device_name: str) -> HostProfile | None:
    """The bundled host whose ``gpus`` lists ``device_name`` (None for a device with none)."""
    for h in hosts().values():
        if device_name in h.gpus:
            return h
    return None


def real_loop_ns(host: HostProfile) -> float | None:
    """The calibration loop's real time (ns) on ``host``: its own measured figure, else its
    python_loop_ns converted by the ratio of a bundled host that has both (None without one)."""
    if host.measured_loop_ns is not None:
        return host.measured_loop_ns
    ref = next((h for h in hosts().values() if h.measured_loop_ns is not None), None)
    return None if ref is None else host.python_loop_ns * ref.measured_loop_ns / ref.python_loop_ns

