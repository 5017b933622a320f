"""A progress bar on stderr, silent when stderr is not a terminal."""

from __future__ import annotations

import sys
from typing import TextIO


class ProgressBar:
    """``bar(done, total, what)`` redraws one line (total 0: unknown, a count without a bar);
    ``close()`` ends it."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.width = width
        self.drawn = False

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.enabled:
            return
        if total:
            filled = int(self.width * done / total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {what}: {done} of {total}  ")
        else:
            self.stream.write(f"\r{what}: {done}  ")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.enabled and self.drawn:
            self.stream.write("\r" + " " * (self.width + 60) + "\r")
            self.stream.flush()
