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

Ctrl-C (KeyboardInterrupt) exits 130 and SIGTERM (`Terminated`) 143 at any point. Text that came
from the input is shown with control characters escaped (`printable`).

This module imports only the standard library, argparse's parser and dispatchprof.errors (the
renderer it escapes text with is imported when a message needs it), so the CLI can install its
handlers before it imports torch.
"""

from __future__ import annotations

import sys
from types import TracebackType

from typing import Any

from dispatchprof.cli.parser import UsageError
from dispatchprof.errors import Terminated

INPUT_ERRORS = (UsageError, ValueError, OSError, RecursionError, ImportError, MemoryError)
#: Top-level packages of our own code: an exception raised here is ours (an input error or a bug).
OWN = ("dispatchprof", "op_formulas")
#: Our modules that call torch on the model's behalf (the counter's modes): where an exception's
#: innermost frame is one of these, the caller's frame decides (the op the model called raised).
PASS_THROUGH = ("dispatchprof.count.modes",)
INTERRUPTED, TERMINATED, BUG = 130, 143, 1


def exit_status(e: BaseException, subject: str) -> tuple[int, str]:
    """(exit status, the one line) for an exception that ended the command on ``subject`` (the
    input it was handling: a model, a file, or the command's name)."""
    if isinstance(e, KeyboardInterrupt):
        return INTERRUPTED, "dispatchprof: interrupted"
    if isinstance(e, Terminated):
        return TERMINATED, "dispatchprof: terminated"
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
    """The CLI's SIGTERM handler: raise `Terminated` where the program is, so cleanup runs."""
    raise Terminated(f"terminated by signal {signum}")


def printable(text: str) -> str:
    """Text with control characters escaped (dispatchprof.report.render.printable, imported on use)."""
    from dispatchprof.report.render import printable as escape
    return escape(text)


def raised_by(tb: TracebackType | None) -> str | None:
    """The package whose code raised: the top-level package of the innermost frame that is not
    the standard library's (nor a `PASS_THROUGH` frame); None when that frame is dispatchprof's
    own (or there is none)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    if frames and frames[-1] in PASS_THROUGH:
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
