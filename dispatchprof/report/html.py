"""The notebook view of an OpCounter: its count's HTML tables, then each simulation's."""

from __future__ import annotations

from typing import Sequence

from dispatchprof.results.frame import profile_html
from dispatchprof.results.profile import Profile
from dispatchprof.sim.frame import simulation_html
from dispatchprof.sim.simulate import Simulation


def counter_html(profile: Profile, simulations: Sequence[Simulation] = (), top: int = 5) -> str:
    """Totals and top modules of the count, and of every simulated scenario."""
    return profile_html(profile, top) + "".join(simulation_html(s, top) for s in simulations)
