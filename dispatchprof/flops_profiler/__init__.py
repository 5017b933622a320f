"""A drop-in for DeepSpeed's flops profiler (``deepspeed.profiling.flops_profiler``): the same
names, signatures, defaults, strings and FLOP rules; see profiler.py and docs/deepspeed.md.

    from dispatchprof.flops_profiler import get_model_profile
    flops, macs, params = get_model_profile(model, input_shape=(1, 3, 224, 224))
"""

from dispatchprof.flops_profiler.profiler import (
    MODULE_ATTRS, FlopsProfiler, get_model_profile, get_module_duration, get_module_flops, get_module_macs,
)
from dispatchprof.flops_profiler.rules import (
    DEFAULT_PRECISION, RULES, bytes_to_string, deepspeed_cost, duration_to_string, flops_to_string, macs_to_string,
    number_to_string, params_to_string,
)

__all__ = ["DEFAULT_PRECISION", "MODULE_ATTRS", "RULES", "FlopsProfiler", "bytes_to_string", "deepspeed_cost",
           "duration_to_string", "flops_to_string", "get_model_profile", "get_module_duration", "get_module_flops",
           "get_module_macs", "macs_to_string", "number_to_string", "params_to_string"]
