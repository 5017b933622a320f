"""Errors dispatchprof raises on purpose, each naming what was wrong and what is allowed."""

from __future__ import annotations


class DataDependentOpError(RuntimeError):
    """An op needs tensor values (``.item()``, ``nonzero``) that meta tensors do not have."""

    def __init__(self, op: str, scope: str) -> None:
        where = scope or "<root>"
        super().__init__(
            f"{op} in module scope '{where}' needs the values of a meta tensor, and meta tensors "
            f"have none. Count this model on fake tensors instead: build it with "
            f"dispatchprof.fake_model(...) (or inside torch._subclasses.FakeTensorMode()), "
            f"which run data-dependent ops with placeholder values.")
        self.op = op
        self.scope = scope


class DeviceProfileError(ValueError):
    """A device profile that does not follow the schema, or a device name nobody defines."""


class ModelSpecError(ValueError):
    """A model name, path or hub id that cannot be turned into a config."""


class UnsafeFileError(ValueError):
    """A path dispatchprof refuses to write or read: not a regular file, a symlink it must not
    follow, an output that is also an input, or a file over its kind's size limit."""


class Terminated(BaseException):
    """SIGTERM, raised where the program was so that ``finally`` blocks run (temporary files are
    removed); the command exits 143. A BaseException like KeyboardInterrupt: ``except Exception``
    does not catch it."""
