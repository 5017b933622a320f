"""`CapacityCheck`: the memory a run needs on one device against what the device has (bytes).
The simulator fills it in (``dispatchprof.sim.capacity``)."""

from __future__ import annotations

from dataclasses import dataclass

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
