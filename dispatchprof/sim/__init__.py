"""The hardware side: device profiles (schema, strict loader, bundled catalog), placements and
scenarios, the capacity check, `OpTiming` (the one time and energy formula), `simulate`, and the
calibration of this machine. Reads counts through ``dispatchprof.results`` only."""

from dispatchprof.errors import DeviceProfileError
from dispatchprof.sim.catalog import list_devices, load_device
from dispatchprof.sim.device import WEIGHT_BITS, Device
from dispatchprof.sim.placement import Placement, Scenarios, placement_of, scenarios_of
from dispatchprof.sim.quantization import Quantized
from dispatchprof.sim.simulate import SimTotals, Simulation, simulate
from dispatchprof.sim.timing import OpTiming

__all__ = ["WEIGHT_BITS", "Device", "DeviceProfileError", "OpTiming", "Placement", "Quantized", "Scenarios",
           "SimTotals", "Simulation", "list_devices", "load_device", "placement_of", "scenarios_of", "simulate"]
