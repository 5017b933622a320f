"""The runtime each simulated result was simulated under, printed beside the result.

`runtime_line` groups the scenarios by runtime: 'Simulated under runtime eager (H100-SXM, L4);
serving (B200)'. The runtimes themselves: dispatchprof.sim.runtime.
"""

from __future__ import annotations

from typing import Iterable


def runtime_line(pairs: Iterable[tuple[str, str]]) -> str:
    """One line from (scenario name, runtime) pairs, scenarios grouped by runtime in first-seen
    order, names de-duplicated; "" for no pair."""
    groups: dict[str, list[str]] = {}
    for name, runtime in pairs:
        names = groups.setdefault(runtime, [])
        if name not in names:
            names.append(name)
    if not groups:
        return ""
    return "Simulated under runtime " + "; ".join(f"{r} ({', '.join(n)})" for r, n in groups.items())
