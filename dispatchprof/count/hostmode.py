"""`TimedCountingMode`: the counting mode with the host clock's timestamps around each op.

Each top-level op the mode sees calls `HostClock.arrive` before the counter handles it and
`HostClock.leave` after; ops the counter itself runs while handling one (a decomposition under
the mode) are the counter's time. Only `OpCounter(host_time=...)` uses it.
"""

from __future__ import annotations

from typing import Any

from dispatchprof.count.hostclock import HostClock, now_ns
from dispatchprof.count.modes import CountingMode
from dispatchprof.count.recorder import Recorder

_counting_dispatch = CountingMode.__torch_dispatch__


class TimedCountingMode(CountingMode):
    """CountingMode, timed: the gap before each op is the model's (dispatchprof.count.hostclock)."""

    def __init__(self, state: Recorder, clock: HostClock) -> None:
        super().__init__(state)
        self.clock = clock
        _hide_once()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        clock = self.clock
        if clock.depth:
            return _counting_dispatch(self, func, types, args, kwargs)
        clock.arrive()
        clock.depth = 1
        try:
            return _counting_dispatch(self, func, types, args, kwargs)
        finally:
            clock.depth = 0
            clock.mark = now_ns()


_hidden = False


def _hide_once() -> None:
    """Dynamo never traces the timed wrapper (as CountingMode's own method, `_hide_from_dynamo`)."""
    global _hidden
    if not _hidden:
        from torch._dynamo.eval_frame import skip_code

        skip_code(TimedCountingMode.__torch_dispatch__.__code__)
        _hidden = True
