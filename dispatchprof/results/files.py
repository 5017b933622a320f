"""Reading and writing files safely: atomic writes and JSON reads whose errors name the file.

Every write goes to a temporary file in the destination folder and is renamed into place, so
a reader never sees a half-written file and an error leaves the old file untouched.
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
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".dispatchprof-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


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
