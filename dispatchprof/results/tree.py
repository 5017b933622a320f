"""The module tree of a profile, with repeated identical blocks folded.

Nodes carry inclusive counts, tensor quantities and (optionally) simulated totals per scope
(any values that add with ``+``, such as the simulator's SimTotals). Siblings
named ``prefix.0``, ``prefix.1``, ... of one type whose subtrees count exactly the same fold
into one node ``prefix.0-15 (16x)`` whose values are the sums, and whose children are the
blocks' children summed position by position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import reduce
from operator import add
from typing import Any, Mapping

from dispatchprof.results.profile import Profile
from dispatchprof.results.records import Totals

_INDEXED = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True)
class Node:
    """One row of the tree."""

    label: str              # name relative to the parent ("self_attn", "layers.0-15 (16x)")
    name: str               # full scope name of the (first) module
    module_type: str
    calls: int
    inclusive: Totals
    params: int
    buffers: int
    act: int
    cache: int
    peak_bytes: int
    latency_s: float
    sim: Any                # simulated totals of the subtree (None without a simulation)
    children: tuple[Node, ...] = field(default=())
    repeat: int = 1

    def signature(self) -> tuple:
        """What must be equal for two blocks to fold."""
        return (self.module_type, self.inclusive, self.params, tuple(c.signature() for c in self.children))


def build_tree(profile: Profile, sim_rows: Mapping[str, Any] | None = None, fold: bool = True,
               phase: str | None = None) -> Node:
    """The root node of ``profile``'s module tree (counts of one ``phase``, if given);
    ``sim_rows`` maps scope names to their simulated inclusive totals."""
    rows = profile.by_module(phase)
    sim_rows = sim_rows or {}
    children: dict[str | None, list[str]] = {}
    for name, row in rows.items():
        parent = row.scope.parent
        if parent is not None and parent != name:
            children.setdefault(parent, []).append(name)

    def make(name: str, parent: str | None) -> Node:
        row = rows[name]
        s = row.scope
        label = name if not parent else name[len(parent) + 1:] if name.startswith(parent + ".") else name
        kids = tuple(make(c, name) for c in children.get(name, ()))
        if fold:
            kids = fold_siblings(kids)
        return Node(label or "(root)", name, s.module_type, s.calls, row.inclusive, s.params, s.buffers,
                    s.act, s.cache, s.peak_bytes, s.latency_s, sim_rows.get(name), kids)

    return make("", None)


def fold_siblings(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """Fold runs of consecutive, identically counted, numbered siblings."""
    out: list[Node] = []
    i = 0
    while i < len(nodes):
        j = i + 1
        m = _INDEXED.match(nodes[i].label)
        if m:
            prefix, start = m.group(1), int(m.group(2))
            while j < len(nodes):
                n = _INDEXED.match(nodes[j].label)
                if not (n and n.group(1) == prefix and int(n.group(2)) == start + (j - i)
                        and nodes[j].signature() == nodes[i].signature()):
                    break
                j += 1
        if j - i > 1:
            out.append(merge(nodes[i:j], f"{m.group(1)}{start}-{start + j - i - 1} ({j - i}x)"))
        else:
            out.append(nodes[i])
        i = j
    return tuple(out)


def merge(nodes: tuple[Node, ...], label: str) -> Node:
    """One node holding the sums of ``nodes`` (same structure), children merged by position."""
    first = nodes[0]
    total = Totals()
    for n in nodes:
        total = total + n.inclusive
    sims = [n.sim for n in nodes if n.sim is not None]
    sim = reduce(add, sims) if sims else None
    kids = tuple(merge(tuple(n.children[k] for n in nodes), first.children[k].label)
                 for k in range(len(first.children)))
    return replace(first, label=label, calls=sum(n.calls for n in nodes), inclusive=total,
                   params=sum(n.params for n in nodes), buffers=sum(n.buffers for n in nodes),
                   act=sum(n.act for n in nodes), cache=sum(n.cache for n in nodes),
                   peak_bytes=max(n.peak_bytes for n in nodes), latency_s=sum(n.latency_s for n in nodes),
                   sim=sim, children=kids, repeat=len(nodes) * first.repeat)


#: Starts a label whose indentation would begin with a space: table renderers strip leading
#: whitespace, which flattened every row below the root's last child. U+2800 (braille blank)
#: shows as a blank of one column but is not whitespace, so the indentation survives.
INDENT_GUARD = "\u2800"


def walk(node: Node, depth: int = -1, prefix: str = "", last: bool = True, level: int = 0):
    """(tree label with glyphs, node, level) for every node down to ``depth`` (-1: all).
    A label never starts with whitespace (see `INDENT_GUARD`)."""
    glyph = "" if level == 0 else ("└─ " if last else "├─ ")
    label = prefix + glyph + node.label
    if label.startswith(" "):
        label = INDENT_GUARD + label[1:]
    yield label, node, level
    if depth != -1 and level >= depth:
        return
    child_prefix = prefix + ("" if level == 0 else ("   " if last else "│  "))
    for k, child in enumerate(node.children):
        yield from walk(child, depth, child_prefix, k == len(node.children) - 1, level + 1)
