"""`get(profile, metric, scope)`: one number for a metric over a set of module scopes.

In the spirit of the layer-level LLM profilers' ``get_profile(kwargs, "mult", "attn")``:

- ``metric``: a category ("add", "mult", "div", "sqrt", "exp", "cmp", "other"), a derived count
  ("flops", "ops", "macs", "bytes", "bytes_read", "bytes_written", "calls"), or a tensor
  quantity ("params", "buffers", "act", "cache", "peak");
- ``scope``: None (the whole model), a module-name glob ("model.layers.*.mlp"), a module class
  name ("LlamaMLP"), or a keyword: "attn" (attention modules: a class name with "Attention" or
  "Attn", or a module named attn, self_attn, attention), "mlp" (feed-forward modules: a class
  name with MLP, FeedForward, FFN or LayerFF, or a module named mlp, ffn, feed_forward),
  "transformer" (the repeated blocks: numbered items whose class name ends in Layer or Block).

Counts are summed over the outermost matching scopes (a match inside another match is not
counted twice); "peak" is the largest peak among them. An unknown metric, or a scope that
matches nothing, raises with the allowed values: never a silent zero.
"""

from __future__ import annotations

import fnmatch
import re

from dispatchprof.results.profile import ModuleStats, Profile

COUNT_METRICS = ("add", "mult", "div", "sqrt", "exp", "cmp", "other", "flops", "ops", "macs", "bytes",
                 "bytes_read", "bytes_written", "calls")
TENSOR_METRICS = ("params", "buffers", "act", "cache", "peak")
#: keyword -> (pattern on the module class name, pattern on the last name segment)
KEYWORDS = {
    "attn": (re.compile(r"attention|attn", re.I), re.compile(r"^(self_|cross_)?(attn|attention)$", re.I)),
    "mlp": (re.compile(r"mlp|feedforward|ffn|layerff", re.I), re.compile(r"^(mlp|ffn|feed_forward)$", re.I)),
    "transformer": (re.compile(r"(decoderlayer|encoderlayer|layer|block)$", re.I), None),
}


def get(profile: Profile, metric: str, scope: str | None = None, phase: str | None = None) -> int:
    """See the module docstring."""
    if metric not in COUNT_METRICS + TENSOR_METRICS:
        raise ValueError(f"unknown metric {metric!r}; allowed: {', '.join(COUNT_METRICS + TENSOR_METRICS)}")
    rows = profile.by_module(phase)
    matched = select(rows, scope)
    outer = [r for r in matched if not _has_matched_ancestor(r, matched, rows)]
    if metric == "peak":
        return max(r.scope.peak_bytes for r in outer)
    if metric in TENSOR_METRICS:
        return sum(getattr(r.scope, metric) for r in outer)
    if metric == "calls":
        return sum(r.inclusive.calls for r in outer)
    return sum(getattr(r.inclusive, metric) for r in outer)


def select(rows: dict[str, ModuleStats], scope: str | None) -> list[ModuleStats]:
    """The module rows ``scope`` names (see the module docstring)."""
    if scope is None:
        return [rows[""]]
    if not isinstance(scope, str):
        raise TypeError(f"scope must be a module-name glob, a class name or one of {tuple(KEYWORDS)}, "
                        f"got {type(scope).__name__}")
    if scope in KEYWORDS:
        by_type, by_name = KEYWORDS[scope]
        found = [r for n, r in rows.items() if n and (
            by_type.search(r.scope.module_type) or (by_name is not None and by_name.search(n.rsplit(".", 1)[-1])))]
        if scope == "transformer":           # the repeated blocks: items of a ModuleList
            found = [r for r in found if r.scope.name.rsplit(".", 1)[-1].isdigit()]
    else:
        found = [r for n, r in rows.items() if r.scope.module_type == scope or fnmatch.fnmatchcase(n, scope)]
    if not found:
        types = sorted({r.scope.module_type for r in rows.values()})
        examples = [n for n in rows if n][:5]
        raise ValueError(f"scope {scope!r} matches no module; give a name glob (such as "
                         f"{', '.join(repr(e) for e in examples)}), a class name ({', '.join(types)}), "
                         f"or a keyword ({', '.join(KEYWORDS)})")
    return found


def _has_matched_ancestor(row: ModuleStats, matched: list[ModuleStats], rows: dict[str, ModuleStats]) -> bool:
    names = {r.scope.name for r in matched}
    parent, seen = row.scope.parent, {row.scope.name}
    while parent is not None and parent not in seen:
        if parent in names:
            return True
        seen.add(parent)
        parent = rows[parent].scope.parent if parent in rows else None
    return False
