"""Signals held while a count runs until the next safe point (`interrupts_at_safe_points`), so that
an interrupt never lands half-way through torch's mode stack or the counter's own bookkeeping.

Python runs signal handlers on the main thread only, between bytecodes. SIGINT and SIGTERM that
arrive inside torch's callbacks or the counter's code are recorded and delivered at the next op's
entry or at the end of the count, to the handler that was in place; elsewhere they are delivered at
once. Off the main thread nothing changes: no signal handler can raise there.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Python functions that C++ torch calls back mid-op (dispatch and function modes, tensor subclasses).
CALLBACKS = frozenset({"__torch_dispatch__", "__torch_function__"})
#: The counter's own code (modes, hooks, the ledger's weakref callbacks, the host clock's gc callback).
OWN = "dispatchprof.count."
#: Signals held for the next safe point: (signal, the handler it goes to). The counting mode reads
#: it at each op's entry (`raise_pending`); only the main thread fills it.
PENDING: list[tuple[int, Any]] = []
_BLOCK = getattr(signal, "pthread_sigmask", None)      # absent on Windows: handlers swapped unmasked


@contextmanager
def interrupts_at_safe_points() -> Iterator[None]:
    """Hold SIGINT and SIGTERM that arrive inside torch's callbacks or the counter's own code until
    a safe point: the next op's entry in the counting mode (`raise_pending`) or the end of the block.

    Why: Python raises a KeyboardInterrupt between any two bytecodes, and inside a callback C++
    torch made (a dispatch mode's ``__torch_dispatch__``, ``FakeTensorMode.__enter__``/``__exit__``)
    it can leave torch's thread-local mode stack half-changed; the C++ guard that restores the
    stack while the exception unwinds then fails its check in a destructor and the process
    aborts (SIGABRT, a C++ trace through at::native::linear). Rule: a signal whose arrival frame,
    or any caller of it, runs a `CALLBACKS` function or the counter's code (`OWN`) is recorded in
    `PENDING`; elsewhere (the model's own Python code) it goes to the previous handler at once, as
    Python would deliver it. A held signal is delivered to the handler in place when it arrived,
    with no frame. Handlers are swapped with both signals blocked, so no signal lands half-way.
    Only handlers that are Python functions are wrapped (a default SIGTERM ends the process in
    C, without raising); off the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def hold(signum: int, frame: FrameType | None) -> None:
        handler = previous[signum]
        if frame is not None and in_callback(frame):
            PENDING.append((signum, handler))
        else:
            handler(signum, frame)

    try:
        with _blocked():
            for sig in SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):
                    previous[sig] = handler
                    signal.signal(sig, hold)
        yield
    finally:
        try:
            with _blocked():
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        finally:
            raise_pending()


def in_callback(frame: FrameType | None) -> bool:
    """Whether ``frame`` or a caller of it runs a torch callback (`CALLBACKS`) or the counter's code."""
    while frame is not None:
        if frame.f_code.co_name in CALLBACKS or frame.f_globals.get("__name__", "").startswith(OWN):
            return True
        frame = frame.f_back
    return False


def raise_pending() -> None:
    """Deliver the held signals, oldest first, each to the handler it would have gone to (the
    CLI's raises KeyboardInterrupt or Terminated; Python's default raises KeyboardInterrupt).
    Called at a safe point; on another thread than the main one it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    while PENDING:
        sig, handler = PENDING.pop(0)
        handler(sig, None)


@contextmanager
def _blocked() -> Iterator[None]:
    """SIGINT and SIGTERM blocked by the OS inside (handlers whose signal arrived before run as the
    block starts; those that arrive inside run as it ends, each with the handler then in place)."""
    if _BLOCK is None:
        yield
        return
    old = _BLOCK(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        _BLOCK(signal.SIG_SETMASK, old)
