"""dispatchprof: exact operation counts and simulated cost of PyTorch models.

Public names only; see README.md.
"""

from dispatchprof.counter import OpCounter
from dispatchprof.errors import DataDependentOpError
from dispatchprof.fake import fake_inputs, fake_mode, fake_model
from dispatchprof.profile import ModuleStats, OperatorStats, OpRecord, Profile, Scope, Totals, UnknownOp

__version__ = "0.1.0"

__all__ = ["DataDependentOpError", "ModuleStats", "OpCounter", "OpRecord", "OperatorStats", "Profile",
           "Scope", "Totals", "UnknownOp", "fake_inputs", "fake_mode", "fake_model", "__version__"]
