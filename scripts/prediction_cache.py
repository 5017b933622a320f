"""A file of cached predictions for the validation scripts, stamped with the code that made them.

`code_version` hashes every .py and .yaml file under dispatchprof/, op_formulas/ and devices/ and
the source of the script functions that simulate; a cache stamped otherwise is refused (its
numbers would be stale), and a cache is written whole or not at all.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
from typing import Callable, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What a cached prediction depends on: these trees' .py and .yaml files.
CODE = ("dispatchprof", "op_formulas", "devices")
VERSION = "__code_version__"                                     # the cache's key for it


def code_version(functions: Sequence[Callable], skip: Sequence[str] = ()) -> str:
    """A hash of the files under `CODE` (less the paths in ``skip``, relative to the repository)
    and the source of ``functions``."""
    h = hashlib.sha256()
    for top in CODE:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith((".py", ".yaml"))):
                path = os.path.join(folder, name)
                if os.path.relpath(path, ROOT) in skip:
                    continue
                h.update(os.path.relpath(path, ROOT).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
    for fn in functions:
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()[:16]


def load_cache(path: str | None, version: str, script: str) -> dict:
    """The predictions cached in ``path`` (an empty cache when there is none); a cache of another
    code version is refused naming ``script``."""
    if not path or not os.path.exists(path):
        return {VERSION: version}
    with open(path, encoding="utf-8") as f:
        cache = json.load(f)
    if cache.get(VERSION) != version:
        raise SystemExit(f"{script}: --cache {path} holds predictions of other code (version "
                         f"{cache.get(VERSION, 'unrecorded')}, this code {version}); give a new file to simulate again")
    return cache


def save_cache(cache: dict, path: str) -> None:
    """Write ``cache`` to ``path`` as JSON, whole or not at all."""
    save_bytes(json.dumps(cache).encode(), path)


def save_bytes(data: bytes, path: str) -> None:
    """Write ``data`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
