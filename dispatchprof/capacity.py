"""Does the model fit? Weights + KV cache + peak activations against each device's memory.

Weights on a device are the parameters (and buffers) of the module scopes placed on it, in the
simulated weight dtype; parameters of modules that never ran count on the root's device. The
peak activations are the whole count's peak of live op outputs (the KV cache it produced is
inside it); with several devices each is assumed to hold that peak, an upper bound. ``kv_bytes``
adds a cache that existed before the count (the tokens of earlier steps).
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatchprof.devices import WEIGHT_BITS
from dispatchprof.placement import Placement
from dispatchprof.profile import Profile

GB = 1e9


@dataclass(frozen=True, slots=True)
class CapacityCheck:
    """Memory needed on one device against what it has (bytes)."""

    device: str
    capacity_bytes: int | None
    weights_bytes: int
    kv_bytes: int
    activations_bytes: int

    @property
    def required_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.activations_bytes

    @property
    def over_bytes(self) -> int:
        """How much more than the capacity is needed (0 when it fits or is unknown)."""
        return 0 if self.capacity_bytes is None else max(0, self.required_bytes - self.capacity_bytes)

    @property
    def fits(self) -> bool | None:
        """True or False; None when the device's capacity is not known."""
        return None if self.capacity_bytes is None else self.required_bytes <= self.capacity_bytes

    @property
    def message(self) -> str:
        need = (f"needs {self.required_bytes / GB:.2f} GB (weights {self.weights_bytes / GB:.2f} GB + KV cache "
                f"{self.kv_bytes / GB:.2f} GB + peak activations {self.activations_bytes / GB:.2f} GB)")
        if self.capacity_bytes is None:
            return f"{self.device}: {need}; its capacity is not published, so this is not checked"
        if self.fits:
            return f"{self.device}: {need} of {self.capacity_bytes / GB:.2f} GB: fits"
        return (f"{self.device}: {need} but has {self.capacity_bytes / GB:.2f} GB: "
                f"{self.over_bytes / GB:.2f} GB over capacity")


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
