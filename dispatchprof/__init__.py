"""dispatchprof: exact operation counts and simulated cost of PyTorch models.

Public names only; see README.md.
"""

from dispatchprof.capacity import CapacityCheck
from dispatchprof.counter import OpCounter
from dispatchprof.devices import Device, DeviceProfileError, list_devices, load_device
from dispatchprof.errors import DataDependentOpError
from dispatchprof.fake import fake_inputs, fake_mode, fake_model
from dispatchprof.generation import GenerationProfile, profile_generation
from dispatchprof.hf import build_model, load_config
from dispatchprof.placement import Placement, placement_of
from dispatchprof.profile import ModuleStats, OperatorStats, OpRecord, Profile, Scope, Totals, UnknownOp
from dispatchprof.simulate import OpTiming, SimTotals, Simulation, simulate

__version__ = "0.1.0"

__all__ = ["CapacityCheck", "DataDependentOpError", "Device", "DeviceProfileError", "ModuleStats", "OpCounter",
           "OpRecord", "OpTiming", "OperatorStats", "Placement", "Profile", "Scope", "SimTotals", "Simulation",
           "Totals", "UnknownOp", "GenerationProfile", "build_model", "fake_inputs", "fake_mode", "fake_model",
           "list_devices", "load_config", "load_device", "placement_of", "profile_generation", "simulate",
           "__version__"]
