"""Rendering rows with tabulate, and the legend every report ends with. Nothing here prints.

Text in a table can come from a file (scope and op names of a saved result): every cell goes
through `printable`, so control characters show escaped and never reach the terminal raw."""

from __future__ import annotations

import textwrap
from typing import Sequence

import tabulate as _tabulate

#: Width the console reports' prose lines are wrapped to (tables are built to fit it).
WIDTH = 100
_LEGEND = ("Counts are exact element operations of each aten op's reference algorithm; FLOPs = ADD + MULT; "
          "MACs count contractions only (2 x MACs = torch FlopCounterMode).\n"
          "Bytes: every tensor input read and output written once, views free (as counted); bytes (sim): what the "
          "simulation moved (weights and KV cache in the dtypes it names, less what the runtime fused); time: per-op roofline "
          "max(compute, memory) + overheads and transfers under the runtime, on a host/device timeline; "
          "energy: dynamic + static power x time.\n"
          "Units: K, M, G, T = 1e3, 1e6, 1e9, 1e12 (of counts, FLOP or bytes: GB = 1e9 bytes); s, ms, us, ns; J, mJ; "
          "'layers.0-15 (16x)' folds 16 identical blocks into one row with their sums.")
_ALIASES = {"markdown": "github", "md": "github"}


def table_format(fmt: str) -> str:
    """The tabulate format for ``fmt``; an unknown name raises with the allowed ones."""
    name = _ALIASES.get(fmt, fmt)
    if name not in _tabulate.tabulate_formats:
        raise ValueError(f"unknown table format {fmt!r}; allowed: markdown, "
                         f"{', '.join(sorted(_tabulate.tabulate_formats))}")
    return name


def printable(text: str) -> str:
    """``text`` with control characters (terminal escapes, carriage returns, tabs) escaped as Python
    writes them (``\\x1b``), so a name read from a file cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def wrap(text: str, width: int = WIDTH) -> str:
    """Each line of ``text`` wrapped to ``width`` columns, continuation lines indented by two."""
    return "\n".join(textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False,
                                    break_long_words=False) if line else ""
                      for line in text.split("\n"))


#: The legend every console report ends with, wrapped to `WIDTH`.
LEGEND = wrap(_LEGEND)


def render(rows: Sequence[Sequence[object]], headers: Sequence[str], fmt: str) -> str:
    """A table of ``rows``; every text cell is `printable` (names may come from a saved file)."""
    cells = [[printable(c) if isinstance(c, str) else c for c in row] for row in rows]
    return _tabulate.tabulate(cells, headers=headers, tablefmt=table_format(fmt), disable_numparse=True)
