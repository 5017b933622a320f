"""DataFrames of a count and the table files for large runs (``--format csv|parquet``).

A count without devices gives its Profile's rows (dispatchprof.results.frame); a count simulated
on devices gives each simulation's rows (dispatchprof.sim.frame: counts plus seconds and
joules) stacked, with a first column ``scenario``. Raw units throughout.
"""

from __future__ import annotations

import io
import os
from typing import Any, Sequence

from dispatchprof.results.files import write_atomic
from dispatchprof.results.frame import import_pandas, profile_frame
from dispatchprof.results.profile import Profile
from dispatchprof.sim.frame import simulation_frame
from dispatchprof.sim.simulate import Simulation

FORMATS = ("csv", "parquet")
PARQUET_MISSING = "writing parquet needs pyarrow, which is not installed: pip install 'dispatchprof[pandas]'"


def counter_frame(profile: Profile, simulations: Sequence[Simulation] = (), by: str = "operator",
                  phase: str | None = None) -> Any:
    """The DataFrame of a count: the profile's rows, or the simulations' rows with ``scenario``."""
    if not simulations:
        return profile_frame(profile, by, phase)
    frames = []
    for sim in simulations:
        df = simulation_frame(sim, by, phase)
        df.insert(0, "scenario", sim.name)
        frames.append(df)
    return import_pandas().concat(frames, ignore_index=True)


def write_table(df: Any, path: str | os.PathLike, fmt: str) -> str:
    """Write ``df`` to ``path`` as "csv" (no index column) or "parquet" (needs pyarrow); the file
    appears whole or not at all. Returns the path."""
    if fmt not in FORMATS:
        raise ValueError(f"table format must be one of {FORMATS}, got {fmt!r}")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError(PARQUET_MISSING) from None
    if fmt == "csv":
        data: str | bytes = df.to_csv(index=False)
    else:
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        data = buf.getvalue()
    return write_atomic(path, data)


def table_file(profile: Profile, simulations: Sequence[Simulation], path: str | os.PathLike, fmt: str,
               by: str = "operator") -> str:
    """Write a count's rows (``counter_frame``) to ``path`` as "csv" or "parquet": what
    ``dispatchprof report FILE --format csv|parquet`` calls. Returns the path."""
    return write_table(counter_frame(profile, simulations, by), path, fmt)
