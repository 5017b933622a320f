"""Shared by the tests/test_accuracy_*.py files: the per-row predictions a scripts/validate_*.py
``--errors FILE`` wrote (scripts/data/*_predictions.csv), their median |error|, and the lines and
cells of the markdown that quotes them.

Error of a row: predicted / measured - 1 (the scripts' rule); a median |error| is in percent.
"""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "scripts" / "data"


def read_rows(name: str) -> list[dict]:
    """The rows of scripts/data/NAME (a CSV with measured and predicted columns)."""
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def signed_error(row: dict, column: str = "dispatchprof") -> float:
    """``row``'s predicted (``column``) / measured - 1, in percent."""
    return 100 * (float(row[column]) / float(row["measured"]) - 1)


def median_abs_error(rows: list[dict], column: str = "dispatchprof") -> float:
    """Median over ``rows`` of |predicted / measured - 1|, in percent."""
    return statistics.median(abs(signed_error(r, column)) for r in rows)


def doc_section(path: str, heading: str) -> str:
    """The text of ``path`` (relative to the repository) under the markdown heading ``heading`` (its
    exact text, any level), up to the next heading of the same or a higher level."""
    lines = (ROOT / path).read_text().splitlines()
    (start,) = [i for i, l in enumerate(lines) if re.fullmatch(r"#+ " + re.escape(heading), l)]
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if re.match(r"#{1,%d} " % level, lines[i])), len(lines))
    return "\n".join(lines[start + 1:end])


def cells(line: str) -> list[str]:
    """The stripped cells of a markdown table line (an escaped ``\\|`` stays in its cell)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def table_line(text: str, *first: str) -> list[str]:
    """The cells of the one table line of ``text`` whose first cells are ``first``."""
    found = [cells(l) for l in text.splitlines() if l.startswith("|") and cells(l)[:len(first)] == list(first)]
    assert len(found) == 1, f"{len(found)} table lines start with {first}"
    return found[0]


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first markdown table in ``text`` (header and rule left out)."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [cells(l) for l in lines[start + 2:end]]


def pct(figure: float) -> str:
    """A median as the docs print it: one decimal and a percent sign."""
    return f"{figure:.1f}%"
