"""dispatchprof: exact operation counts and simulated cost of PyTorch models.

The face of the package: its public names, re-exported from the layers (see
docs/architecture.md): ``count`` (OpCounter, weightless models), ``results`` (frozen records
and the Profile), ``sim`` (devices, placements, the simulator), ``report`` (tables and files),
``llm`` (model catalog and generation), ``serving`` (traffic, continuous batching) and the front ends (``cli``, ``integrations``,
``flops_profiler``).
"""

from dispatchprof.count import OpCounter, fake_inputs, fake_mode, fake_model
from dispatchprof.errors import DataDependentOpError, DeviceProfileError, ModelSpecError
from dispatchprof.llm import build_model, load_config, profile_generation
from dispatchprof.serving import generate_requests, prepare_serving, read_trace, simulate_serving
from dispatchprof.results import (
    CapacityCheck, GenerationProfile, ModuleStats, OperatorStats, OpRecord, Profile, Scope, Totals, UnknownOp,
)
from dispatchprof.sim import (
    Device, OpTiming, Placement, Scenarios, SimTotals, Simulation, list_devices, load_device, placement_of,
    scenarios_of, simulate,
)

__version__ = "0.1.0"

__all__ = ["CapacityCheck", "DataDependentOpError", "Device", "DeviceProfileError", "GenerationProfile",
           "ModelSpecError", "ModuleStats", "OpCounter", "OpRecord", "OpTiming", "OperatorStats", "Placement",
           "Profile", "Scenarios", "Scope", "SimTotals", "Simulation", "Totals", "UnknownOp", "__version__",
           "build_model", "fake_inputs", "fake_mode", "fake_model", "generate_requests", "list_devices",
           "load_config", "load_device", "placement_of", "prepare_serving", "profile_generation", "read_trace",
           "scenarios_of", "simulate", "simulate_serving"]
