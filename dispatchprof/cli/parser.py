"""What every subcommand shares: argparse that reports a usage error in one line."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A mistake of the user's: reported in one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and raises instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")
