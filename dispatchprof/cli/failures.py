"""How an exception ends a command: one line on stderr and an exit status, never a traceback
(unless ``--debug`` asks for it).

Rules, first match wins:

- MemoryError, wherever raised: the input was too large for this machine, exit 2;
- a mistake in the input that dispatchprof or a dependency recognised (UsageError, ValueError,
  OSError, ImportError, RecursionError, MemoryError) raised in dispatchprof's own code: its message,
  exit 2;
- any exception raised inside a dependency (`raised_by`: the innermost frame outside the standard
  library belongs to transformers, torch, yaml, ...) while handling the user's input: the input,
  the dependency and its message, exit 2;
- anything else is a bug in dispatchprof: one line asking for a report, exit 1.

Ctrl-C (KeyboardInterrupt) exits 130 and SIGTERM (`Terminated`) 143 at any point (`Signals`): a
signal raises where the program is; whatever exception then ends the command, the command ends as
interrupted, because a dependency may turn the interrupt into another error (transformers' lazy
import reports an interrupted import as a RecursionError or ModuleNotFoundError) or swallow it, and
a swallowed one is raised again `AGAIN_S` later. Text that came from the input is shown with
control characters escaped (`printable`).

This module imports only the standard library, argparse's parser and dispatchprof.errors (the
renderer it escapes text with is imported when a message needs it), so the CLI can install its
handlers before it imports torch.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Iterator

from dispatchprof.cli.parser import UsageError
from dispatchprof.errors import Terminated

INPUT_ERRORS = (UsageError, ValueError, OSError, RecursionError, ImportError, MemoryError)
#: Top-level packages of our own code: an exception raised here is ours (an input error or a bug).
OWN = ("dispatchprof", "op_formulas")
#: Our modules that call torch on the model's behalf (the counter's modes): where an exception's
#: innermost frames are these, the caller's frame decides (the op the model called raised).
PASS_THROUGH = ("dispatchprof.count.modes", "dispatchprof.count.meta_attention")
INTERRUPTED, TERMINATED, BUG = 130, 143, 1
#: How a signal ends a command: exit status and line.
ENDINGS = {signal.SIGINT: (INTERRUPTED, "dispatchprof: interrupted"),
           signal.SIGTERM: (TERMINATED, "dispatchprof: terminated")}
#: Seconds after a signal that nothing ended the command on: the signal is raised again.
AGAIN_S = 1.0
#: Seconds after a signal that arrived inside a garbage-collection callback: it is sent again.
RETRY_S = 0.01


def _in_gc_callback(frame: Any) -> bool:
    """Whether ``frame`` (where a signal arrived) runs a ``gc.callbacks`` function, such as the
    counter's host clock: an exception raised there is printed as "Exception ignored" and lost."""
    codes = {getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks}
    return frame is not None and frame.f_code in codes


class Signals:
    """SIGINT and SIGTERM during one command, on the main thread: each raises (KeyboardInterrupt,
    `Terminated`) where the program is and is recorded in ``received``; the first also arms a
    timer that raises it again `AGAIN_S` later, in case a dependency swallowed it. Inside `held`
    (importing torch and the subcommand: an interrupt inside a C extension's initialisation can
    abort the interpreter) a signal ends the process at once, before anything is written. Once the command
    is ending (`disarm`) signals are only recorded. A signal set to be ignored (``nohup``) stays
    ignored. `restore` puts the previous handlers back."""

    def __init__(self, owns_process: bool = False) -> None:
        self.owns_process = owns_process
        self.received: list[int] = []
        self._again: threading.Timer | None = None
        self._previous: dict[int, Any] = {}
        self._holding = False
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self._previous[sig] = signal.signal(sig, self._raise)

    def _raise(self, signum: int, frame: Any) -> None:
        if _in_gc_callback(frame):      # Python prints and drops what a gc callback raises: deliver it again
            timer = threading.Timer(RETRY_S, os.kill, (os.getpid(), signum))
            timer.daemon = True
            timer.start()
            return
        self.received.append(signum)
        if self._holding and self.owns_process:       # nothing is written yet: end at once
            status, line = ENDINGS[signum]
            os.write(2, f"{line}\n".encode())
            os._exit(status)
        if not self._holding:
            self._raise_received()

    def _raise_received(self) -> None:
        signum = self.received[0]
        if self._again is None:
            self._again = threading.Timer(AGAIN_S, os.kill, (os.getpid(), signum))
            self._again.daemon = True
            self._again.start()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(f"terminated by signal {signum}")

    @contextmanager
    def held(self) -> Iterator[None]:
        """A signal arriving inside ends the process at once with its status and line when the
        command owns the process (`main` called with the process's own arguments), else it is
        raised when the block ends."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self.received:
            self._raise_received()

    def disarm(self) -> None:
        """The command is ending: later signals are only recorded, and the second raise is
        cancelled (or, if already sent, handled here)."""
        for sig in self._previous:
            signal.signal(sig, lambda signum, frame: self.received.append(signum))
        if self._again is not None:
            self._again.cancel()
            self._again.join()

    def restore(self) -> None:
        self.disarm()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def exit_status(e: BaseException, subject: str, received: tuple[int, ...] | list[int] = ()) -> tuple[int, str]:
    """(exit status, the one line) for an exception that ended the command on ``subject`` (the
    input it was handling: a model, a file, or the command's name); ``received``: the signals
    that arrived meanwhile (`Signals`), which decide the ending whatever the exception."""
    first = received[0] if received else None
    if isinstance(e, KeyboardInterrupt) or first == signal.SIGINT:
        return ENDINGS[signal.SIGINT]
    if isinstance(e, Terminated) or first == signal.SIGTERM:
        return ENDINGS[signal.SIGTERM]
    if isinstance(e, MemoryError):
        return 2, f"dispatchprof: error: {printable(subject)}: {one_line(e)}"
    dependency = raised_by(e.__traceback__)
    if dependency is None and isinstance(e, INPUT_ERRORS):
        return 2, f"dispatchprof: error: {one_line(e)}"
    if dependency is not None:
        return 2, f"dispatchprof: error: {printable(subject)}: {dependency} failed on this input: {one_line(e)}"
    return BUG, (f"dispatchprof: internal error: {one_line(e)}. This is a bug in dispatchprof: please report it "
                 f"with the command line and the traceback that --debug prints")


def raise_terminated(signum: int, frame: Any) -> None:
    """A SIGTERM handler that raises `Terminated` where the program is, so cleanup runs."""
    raise Terminated(f"terminated by signal {signum}")


def printable(text: str) -> str:
    """Text with control characters escaped (dispatchprof.report.render.printable, imported on use)."""
    from dispatchprof.report.render import printable as escape
    return escape(text)


def raised_by(tb: TracebackType | None) -> str | None:
    """The package whose code raised: the top-level package of the innermost frame that is not
    the standard library's (nor one of the `PASS_THROUGH` frames it ends with); None when that frame is dispatchprof's
    own (or there is none)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    while frames and frames[-1] in PASS_THROUGH:
        frames.pop()
    for module in reversed(frames):
        top = module.split(".")[0]
        if top in OWN or top == "__main__":
            return None
        if top and top not in sys.stdlib_module_names:
            return top
    return None


def one_line(e: BaseException) -> str:
    """An exception as one line: an OSError names its file, a dependency's error its type."""
    if isinstance(e, OSError) and e.filename:
        text = f"{e.filename}: {e.strerror}"
    elif isinstance(e, RecursionError):
        text = "input nested too deeply"
    elif isinstance(e, MemoryError):
        text = "out of memory (a size in the input is too large for this machine)"
    elif isinstance(e, INPUT_ERRORS):
        text = str(e)
    else:
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return printable(" ".join(text.split()))
