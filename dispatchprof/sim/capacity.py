"""Does the model fit? Weights + KV cache + peak activations against each device's memory.

Weights on a device are the parameters (and buffers) of the module scopes placed on it, in the
simulated weight dtype (a `Quantized` one's of each scope, `dispatchprof.sim.quantization`);
parameters of modules that never ran count on the root's device. The
peak activations are the whole count's peak of live op outputs (the KV cache it produced is
inside it); with several devices each is assumed to hold that peak, an upper bound. ``kv_bytes``
adds a cache that existed before the count (the tokens of earlier steps). With tensor parallelism
over ``tp`` devices the weights of the split blocks (dispatchprof.sim.parallel, less the children
every device holds whole: `split_weights`) count 1/tp on each device, as does the KV cache (the
caller divides ``kv_bytes``); so do the parameters of a split module's children that never ran
(multi-head latent attention's ``kv_b_proj`` in the absorbed form, read through views of its
weight): a module's parameters less its own and those of its children that ran.
"""

from __future__ import annotations

from dispatchprof.results.capacity import GB, CapacityCheck
from dispatchprof.results.profile import Profile
from dispatchprof.sim.device import WEIGHT_BITS
from dispatchprof.sim.parallel import split_blocks, split_weights
from dispatchprof.sim.placement import Placement
from dispatchprof.sim.quantization import WeightDtype, weight_dtype_of


def check_capacity(profile: Profile, placement: Placement, weight_dtype: WeightDtype,
                   kv_bytes: int = 0, tp: int = 1) -> tuple[CapacityCheck, ...]:
    """One CapacityCheck per device of the placement (one device of a tensor-parallel group)."""
    weights: dict[str, int] = {d.name: 0 for d in placement.devices}
    placed_params = 0
    split = split_blocks({s.name: s.module_type for s in profile.scopes}, profile.parents()) if tp > 1 else {}
    ran_below: dict[str | None, int] = {}            # parameters of each scope's children that ran
    for s in profile.scopes:
        ran_below[s.parent] = ran_below.get(s.parent, 0) + s.params
    for s in profile.scopes:
        d = placement.device_for(s.name)
        stored = weight_dtype_of(weight_dtype, s.name)
        nbytes = s.params_self_bytes if stored is None else s.params_self * WEIGHT_BITS[stored] // 8
        split_here = split_weights(s.name, split)
        weights[d.name] += nbytes // tp if split_here else nbytes
        placed_params += s.params_self
        unran = s.params - s.params_self - ran_below.get(s.name, 0) if split_here else 0
        if unran > 0:
            weights[d.name] += int(unran * _bytes_per_param(s, stored)) // tp
            placed_params += unran
    root = next((s for s in profile.scopes if s.name == ""), None)
    if root is not None and root.params > placed_params:     # modules that never ran
        leftover = root.params - placed_params
        stored = weight_dtype_of(weight_dtype, "")
        weights[placement.device_for("").name] += int(leftover * _bytes_per_param(root, stored))
    return tuple(
        CapacityCheck(d.name, None if d.memory_capacity_gb is None else int(d.memory_capacity_gb * GB),
                      weights[d.name], kv_bytes, profile.peak_bytes)
        for d in placement.devices)


def _bytes_per_param(scope, stored: str | None) -> float:
    """Bytes per parameter of ``scope``'s modules that never ran: those of the dtype they are
    ``stored`` in, else the scope's own (whole bytes per parameter)."""
    if stored is not None:
        return WEIGHT_BITS[stored] / 8
    return scope.params_bytes // scope.params if scope.params else 0


__all__ = ["CapacityCheck", "check_capacity"]
