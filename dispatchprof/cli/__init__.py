"""The ``dispatchprof`` command: ``dispatchprof MODEL [options]`` profiles a model; the
subcommands ``devices``, ``report`` and ``calibrate`` live in one thin module each.

Bad arguments, an unknown model or device, or an unreadable file end with exit code 2 and one
line on stderr, never a traceback.
"""

from __future__ import annotations

import sys
from typing import Sequence

from dispatchprof.cli.parser import UsageError

SUBCOMMANDS = ("devices", "report", "calibrate", "merge", "serve")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS:
            module = __import__(f"dispatchprof.cli.{args[0]}_command", fromlist=["run"])
            return module.run(args[1:])
        from dispatchprof.cli import profile_command
        return profile_command.run(args)
    except (UsageError, ValueError, OSError) as e:
        print(f"dispatchprof: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dispatchprof: interrupted", file=sys.stderr)
        return 130


def _one_line(e: BaseException) -> str:
    text = str(e) if not isinstance(e, OSError) or not e.filename else f"{e.filename}: {e.strerror}"
    return " ".join(text.split())
