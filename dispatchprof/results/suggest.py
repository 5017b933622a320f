"""'Did you mean' hints for names the user typed (models, devices).

Rule (case ignored): the known names that start with the typed text, then those closest to it
by difflib's ratio (at least 0.6 similar), at most three; no hint when none qualifies. A hint only names
candidates: nothing is ever picked for the user (no fuzzy match is used as the answer).
"""

from __future__ import annotations

import difflib
from typing import Iterable

#: Similarity (difflib's ratio, 0..1) a known name needs to be suggested.
CUTOFF = 0.6
#: At most this many names are suggested.
MAX_SUGGESTIONS = 3


def closest(text: str, names: Iterable[str]) -> list[str]:
    """The known ``names`` closest to ``text`` (best first), compared case-insensitively."""
    by_key: dict[str, str] = {}
    for name in names:
        by_key.setdefault(name.lower(), name)
    typed = text.lower()
    keys = [k for k in by_key if k.startswith(typed) and typed]
    keys += [k for k in difflib.get_close_matches(typed, list(by_key), n=MAX_SUGGESTIONS, cutoff=CUTOFF)
             if k not in keys]
    return [by_key[k] for k in keys[:MAX_SUGGESTIONS]]


def did_you_mean(text: str, names: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` (to end a message) for the closest names, or ``""`` when
    none is close."""
    found = closest(text, names)
    if not found:
        return ""
    quoted = [repr(n) for n in found]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {listed}?"
