"""Does the model fit? Weights + KV cache + peak activations against each device's memory.

Weights on a device are the parameters (and buffers) of the module scopes placed on it, in the
simulated weight dtype; parameters of modules that never ran count on the root's device. The
peak activations are the whole count's peak of live op outputs (the KV cache it produced is
inside it); with several devices each is assumed to hold that peak, an upper bound. ``kv_bytes``
adds a cache that existed before the count (the tokens of earlier steps).
"""

from __future__ import annotations

from dispatchprof.results.capacity import GB, CapacityCheck
from dispatchprof.results.profile import Profile
from dispatchprof.sim.device import WEIGHT_BITS
from dispatchprof.sim.placement import Placement


def check_capacity(profile: Profile, placement: Placement, weight_dtype: str | None,
                   kv_bytes: int = 0) -> tuple[CapacityCheck, ...]:
    """One CapacityCheck per device of the placement."""
    weights: dict[str, int] = {d.name: 0 for d in placement.devices}
    placed_params = 0
    for s in profile.scopes:
        d = placement.device_for(s.name)
        if weight_dtype is None:
            weights[d.name] += s.params_self_bytes
        else:
            weights[d.name] += s.params_self * WEIGHT_BITS[weight_dtype] // 8
        placed_params += s.params_self
    root = next((s for s in profile.scopes if s.name == ""), None)
    if root is not None and root.params > placed_params:     # modules that never ran
        leftover = root.params - placed_params
        per = (root.params_bytes // root.params if root.params else 0) if weight_dtype is None \
            else WEIGHT_BITS[weight_dtype] / 8
        weights[placement.device_for("").name] += int(leftover * per)
    return tuple(
        CapacityCheck(d.name, None if d.memory_capacity_gb is None else int(d.memory_capacity_gb * GB),
                      weights[d.name], kv_bytes, profile.peak_bytes)
        for d in placement.devices)


__all__ = ["CapacityCheck", "check_capacity"]
