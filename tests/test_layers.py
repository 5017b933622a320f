"""The house (docs/architecture.md), read from the source with ``ast``: every import goes down the
layers, no import circle (a package's face and its modules included), no module reads a private
name that another module of the project defines. The checks are tested on small made-up trees."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dispatchprof", "op_formulas")

#: Rank of each layer; an import must go to a lower rank, to the same package, or to a base module.
RANKS = {
    "op_formulas": 0,
    "dispatchprof.results": 1,
    "dispatchprof.sim": 2,
    "dispatchprof.report": 3,
    "dispatchprof.count": 4,
    "dispatchprof.llm": 5,
    "dispatchprof.integrations": 6,
    "dispatchprof.flops_profiler": 6,
    "dispatchprof.serving": 6,
    "dispatchprof.train": 6,
    "dispatchprof.cli": 7,
    "dispatchprof.__main__": 8,
    "dispatchprof": 8,                       # the face
}
#: Modules every layer may import (they import nothing of the project themselves).
BASE = ("dispatchprof.errors", "dispatchprof.units")
#: At most this many modules directly in dispatchprof/ (its face, __main__, errors, units, flops_profiler, ...).
MAX_TOP_MODULES = 8


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the project's packages under ``root``."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports_of(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """Project modules an ast imports anywhere in it (``from a import b`` names a.b when it is a module)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def layer_of(module: str) -> str:
    """The layer a module belongs to: the longest key of RANKS (or BASE) it starts with."""
    for key in sorted((*RANKS, *BASE), key=len, reverse=True):
        if module == key or module.startswith(key + "."):
            return key
    raise AssertionError(f"{module} is in no layer: add it to RANKS in tests/test_layers.py and docs/architecture.md")


def wrong_arrows(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in graph.items():
        a = layer_of(source)
        for target in targets:
            b = layer_of(target)
            if b in BASE or a == b:
                continue
            if a in BASE or RANKS[b] >= RANKS[a]:
                bad.append(f"{source} -> {target} ({a} may not import {b})")
    return sorted(bad)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, found by depth-first search (each reported once, from its smallest member)."""
    found: set[tuple[str, ...]] = set()

    def visit(node: str, path: list[str], on_path: set[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                cycle = path[path.index(nxt):]
                k = cycle.index(min(cycle))
                found.add(tuple(cycle[k:] + cycle[:k]))
            elif nxt not in done:
                on_path.add(nxt)
                path.append(nxt)
                visit(nxt, path, on_path)
                path.pop()
                on_path.discard(nxt)
        done.add(node)

    done: set[str] = set()
    for start in sorted(graph):
        if start not in done:
            visit(start, [start], {start})
    return [list(c) for c in sorted(found)]


def private_definitions(tree: ast.AST) -> set[str]:
    """Private names (``_x``, not dunder) a module defines: functions, classes, assignments, attributes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_reads(trees: dict[str, ast.AST]) -> list[str]:
    """Reads of a private name that another project module defines and this one does not."""
    defined = {m: private_definitions(t) for m, t in trees.items()}
    bad = []
    for module, tree in trees.items():
        others = set().union(*(d for m, d in defined.items() if m != module)) - defined[module]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in others:
                bad.append(f"{module}:{node.lineno} reads .{node.attr}")
            elif isinstance(node, ast.ImportFrom):
                bad += [f"{module}:{node.lineno} imports {a.name}" for a in node.names if a.name in others]
    return sorted(bad)


def project(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[str, ast.AST]]:
    modules = module_files(root)
    trees = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in modules.items()}
    return {m: imports_of(t, modules) - {m} for m, t in trees.items()}, trees


# --- the project -------------------------------------------------------------------------------
def test_every_import_goes_down_the_layers():
    graph, _ = project()
    assert wrong_arrows(graph) == []


def test_no_import_circle():
    graph, _ = project()
    assert circles(graph) == []


def test_no_module_reads_another_modules_private_names():
    _, trees = project()
    assert private_reads(trees) == []


def test_op_formulas_import_nothing_of_dispatchprof():
    graph, _ = project()
    assert [m for m, targets in graph.items() if m.startswith("op_formulas")
            and any(t.startswith("dispatchprof") for t in targets)] == []


def test_the_package_top_holds_few_modules():
    top = sorted(p.name for p in (ROOT / "dispatchprof").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


# --- the checks themselves, on made-up trees ------------------------------------------------------
def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def toy(tmp_path):
    return write(tmp_path, {
        "op_formulas/__init__.py": "",
        "dispatchprof/__init__.py": "from dispatchprof.count import counter\n",
        "dispatchprof/units.py": "",
        "dispatchprof/results/__init__.py": "",
        "dispatchprof/results/records.py": "from dispatchprof.sim import timing\n",          # up: wrong
        "dispatchprof/sim/__init__.py": "from dispatchprof.sim.timing import T\n",
        "dispatchprof/sim/timing.py": "from dispatchprof.sim import helpers\nclass T:\n    _cache = 1\n",
        "dispatchprof/sim/helpers.py": "import dispatchprof.sim\nfrom dispatchprof import units\n",  # face circle
        "dispatchprof/count/__init__.py": "",
        "dispatchprof/count/counter.py": "from dispatchprof.sim.timing import T\nx = T()._cache\n",
    })


def test_checks_find_a_wrong_arrow_a_circle_and_a_private_read(toy):
    graph, trees = project(toy)
    assert wrong_arrows(graph) == [
        "dispatchprof.results.records -> dispatchprof.sim.timing (dispatchprof.results may not import dispatchprof.sim)"]
    assert circles(graph) == [["dispatchprof.sim", "dispatchprof.sim.timing", "dispatchprof.sim.helpers"]]
    assert private_reads(trees) == ["dispatchprof.count.counter:2 reads ._cache"]


def test_downward_imports_pass_and_a_private_field_read_across_modules_does_not(tmp_path):
    graph, trees = project(write(tmp_path, {
        "op_formulas/__init__.py": "",
        "dispatchprof/__init__.py": "from dispatchprof.sim import simulate\n",
        "dispatchprof/sim/__init__.py": "from dispatchprof.sim.simulate import simulate\n",
        "dispatchprof/sim/simulate.py": "from dispatchprof.results.records import R\ndef simulate():\n    return R()._own\n",
        "dispatchprof/results/__init__.py": "",
        "dispatchprof/results/records.py": "import op_formulas\nclass R:\n    _own = 0\n",
    }))
    # simulate reads R._own, defined in records: a private read across modules
    assert wrong_arrows(graph) == [] and circles(graph) == []
    assert private_reads(trees) == ["dispatchprof.sim.simulate:3 reads ._own"]
