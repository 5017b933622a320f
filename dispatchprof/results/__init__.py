"""Frozen results of a count and pure queries over them: records, totals, scopes, the Profile
and its file format, the module tree, ``get()``, rank files, generation results.

Imports nothing of the counter, the simulator or the reports.
"""

from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.generation import DeviceGeneration, GenerationProfile, PhaseTiming
from dispatchprof.results.profile import ModuleStats, OperatorStats, Profile
from dispatchprof.results.records import (
    COUNT_FIELDS, HOST, PHASES, TOTAL_COLUMNS, UNRECORDED, OpRecord, Scope, Totals, UnknownOp, sum_records,
)

__all__ = ["COUNT_FIELDS", "HOST", "PHASES", "TOTAL_COLUMNS", "UNRECORDED", "CapacityCheck", "DeviceGeneration",
           "GenerationProfile", "ModuleStats", "OpRecord", "OperatorStats", "PhaseTiming", "Profile", "Scope",
           "Totals", "UnknownOp", "sum_records"]
