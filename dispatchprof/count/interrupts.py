"""Signals held back while global hooks are installed or removed, so that installing or removing
runs to its end: an interrupt can land before or after, never half-way.

Python runs signal handlers on the main thread only, between bytecodes; a KeyboardInterrupt can
otherwise arrive between registering a hook and keeping its handle, and the hook would stay in
torch for the rest of the process. Inside `interrupts_deferred` SIGINT and SIGTERM (where a
Python handler or the default action is set) are recorded instead, and delivered on leaving,
after the previous handlers are back. Elsewhere than on the main thread nothing changes: no
signal handler can raise there.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them to the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for sig in SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler) or handler == signal.SIG_DFL:
                previous[sig] = signal.signal(sig, lambda signum, frame: arrived.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in arrived:
            _deliver(sig, previous[sig])


def _deliver(sig: int, handler: Any) -> None:
    """Hand a held-back signal to the handler that was in place (the default action: re-raise it)."""
    if callable(handler):
        handler(sig, None)
    else:
        os.kill(os.getpid(), sig)
