"""Reading and writing files safely: atomic writes and JSON reads whose errors name the file.

Every write goes to a temporary file in the destination folder and is renamed into place, so
a reader never sees a half-written file and an error leaves the old file untouched. The file
gets the mode a plain ``open(path, "w")`` would give: 0666 less the process's umask (mkstemp's
own 0600 is widened), and an error names the path the caller gave, never the temporary file.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def write_atomic(path: str | os.PathLike, data: str | bytes) -> str:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".dispatchprof-", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, f"cannot write here ({e.strerror})", path) from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename == tmp:
            raise OSError(e.errno, e.strerror, path) from None
        raise
    return path


def current_umask() -> int:
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_json(path: str | os.PathLike, what: str, error: type[Exception] = ValueError) -> Any:
    """Parse a JSON file; an unreadable, truncated or corrupt file raises ``error`` naming it."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: not a complete JSON {what} (truncated or corrupt: {e.msg} at "
                    f"line {e.lineno} column {e.colno})") from None
