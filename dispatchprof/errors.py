"""Errors dispatchprof raises on purpose, each naming what was wrong and what is allowed."""

from __future__ import annotations


class DataDependentOpError(RuntimeError):
    """An op needs tensor values (``.item()``, ``nonzero``, an output shape that depends on values)
    that meta or fake tensors do not have. ``tensors`` is "meta" or "fake": meta points to fake
    tensors (which give ``.item()``-free data-dependent ops placeholder values), fake to real ones."""

    def __init__(self, op: str, scope: str, tensors: str = "meta") -> None:
        where = scope or "<root>"
        if tensors == "meta":
            way_around = ("Count this model on fake tensors instead: build it with dispatchprof.fake_model(...) "
                          "(or inside torch._subclasses.FakeTensorMode()), which run data-dependent ops with "
                          "placeholder values; a model that reads values into Python (.item(), nonzero) needs "
                          "real tensors")
        else:
            way_around = ("The model reads tensor values into Python (.item(), nonzero, a value-dependent shape), "
                          "so it counts on real tensors only: build it without fake_model (random weights are "
                          "enough, though counts after such an op follow the values it read), at a size that fits "
                          "in memory")
        RuntimeError.__init__(self, f"{op} in module scope '{where}' needs the values of a {tensors} tensor, and "
                              f"{tensors} tensors have none. {way_around}.")
        self.op = op
        self.scope = scope
        self.tensors = tensors


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
