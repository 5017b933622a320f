"""dispatchprof: exact operation counts and simulated cost of PyTorch models.

The face of the package: its public names, re-exported from the layers (see
docs/architecture.md): ``count`` (OpCounter, weightless models), ``results`` (frozen records
and the Profile), ``sim`` (devices, placements, the simulator), ``report`` (tables and files),
``llm`` (model catalog and generation), ``serving`` (traffic, continuous batching) and the front ends (``cli``, ``integrations``,
``flops_profiler``).

The names are imported on first use (PEP 562), so ``import dispatchprof`` does not import torch:
the command line starts in milliseconds and handles Ctrl-C from its first line on
(dispatchprof.cli). ``from dispatchprof import OpCounter`` and ``dispatchprof.OpCounter`` work as
with eager imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatchprof.count import OpCounter, fake_inputs, fake_mode, fake_model
    from dispatchprof.errors import DataDependentOpError, DeviceProfileError, ModelSpecError
    from dispatchprof.llm import build_model, load_config, profile_generation
    from dispatchprof.results import (
        CapacityCheck, GenerationProfile, ModuleStats, OperatorStats, OpRecord, Profile, Scope, Totals, UnknownOp,
    )
    from dispatchprof.serving import generate_requests, prepare_serving, read_trace, simulate_serving
    from dispatchprof.sim import (
        Device, OpTiming, Placement, Quantized, Scenarios, SimTotals, Simulation, list_devices, load_device,
        placement_of, scenarios_of, simulate,
    )

__version__ = "0.1.0"

#: public name -> the module that defines it (imported when the name is first read).
_HOMES = {
    "dispatchprof.count": ("OpCounter", "fake_inputs", "fake_mode", "fake_model"),
    "dispatchprof.errors": ("DataDependentOpError", "DeviceProfileError", "ModelSpecError"),
    "dispatchprof.llm": ("build_model", "load_config", "profile_generation"),
    "dispatchprof.results": ("CapacityCheck", "GenerationProfile", "ModuleStats", "OperatorStats", "OpRecord",
                             "Profile", "Scope", "Totals", "UnknownOp"),
    "dispatchprof.serving": ("generate_requests", "prepare_serving", "read_trace", "simulate_serving"),
    "dispatchprof.sim": ("Device", "OpTiming", "Placement", "Quantized", "Scenarios", "SimTotals", "Simulation",
                         "list_devices", "load_device", "placement_of", "scenarios_of", "simulate"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
_SUBPACKAGES = ("cli", "count", "errors", "flops_profiler", "integrations", "llm", "report", "results", "serving",
                "sim", "units")

__all__ = sorted([*_HOME, "__version__"])


def __getattr__(name: str) -> Any:
    """A public name or a layer, imported on first use and then kept as a module attribute."""
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"dispatchprof.{name}")
    else:
        raise AttributeError(f"module 'dispatchprof' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME, *_SUBPACKAGES})
