"""What every subcommand shares: argparse that reports a usage error in one line and shows
every option's default in ``--help``."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A mistake of the user's: reported in one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and raises instead of exiting, and every option
    whose default is a value (not None, a flag that is off, or an empty list) says it in
    ``--help`` as ``(default: X)``."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")

    def format_help(self) -> str:
        for action in self._actions:
            _say_default(action)
        return super().format_help()


def _say_default(action: argparse.Action) -> None:
    """Append ``(default: X)`` to an option's help when its default is a value worth printing."""
    default, text = action.default, action.help or ""
    if (not action.option_strings or text == argparse.SUPPRESS or "%(default)" in text
            or default is None or default is False or default == [] or default == argparse.SUPPRESS):
        return
    action.help = f"{text} (default: %(default)s)" if text else "default: %(default)s"
