"""Run the examples the README and docs mark as runnable, and check what they print.

Markers (an HTML comment on the line just before a code fence):

- ``<!-- run -->``: a fast example, run by tests/test_docs_examples.py;
- ``<!-- run: slow -->``: a slow one (more than a few seconds), run by this script with ``--slow``
  (``make docs-examples``);
- ``<!-- output -->``: the block holds what the runnable block just before it prints, exactly;
- ``<!-- generated: NAME -->`` before a table or HTML (not a fence; up to the next blank line): the
  text is ``NAME()`` of scripts/docs_tables.py, exactly.

A python block is executed in a fresh namespace, in a temporary folder. A console block holds
``$ dispatchprof ARGS`` then lines of its output: each shown line must appear, in order and
contiguous, in what the command prints now (a line ``...`` marks an omission).

``python scripts/run_doc_examples.py [--slow] [FILE.md ...]`` runs them and prints one line per
block; the exit code is the number of failures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The markdown files whose examples are checked.
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_MARK = re.compile(r"^<!--\s*(run|run: slow|output|generated:\s*(\w+))\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One marked block: its file and line, the marker, its language and text, and the output
    block that follows it (None when there is none)."""

    path: Path
    line: int
    mark: str
    lang: str
    text: str
    output: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The marked blocks of one markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _MARK.match(lines[i])
        if not m:
            i += 1
            continue
        mark, start = m.group(1), i + 1
        if mark.startswith("generated"):
            end = start
            while end < len(lines) and lines[end].strip():
                end += 1
            found.append(Block(path, start + 1, mark, "table", "\n".join(lines[start:end])))
            i = end
            continue
        lang, body, i = _fence(lines, start, path)
        if mark == "output":
            if not found or found[-1].output is not None:
                raise ValueError(f"{path}:{start}: an output block follows no runnable block")
            found[-1] = Block(**{**found[-1].__dict__, "output": body})
        else:
            found.append(Block(path, start + 1, mark, lang, body))
    return found


def _fence(lines: list[str], start: int, path: Path) -> tuple[str, str, int]:
    """(language, body, index after the closing fence) of the fence opening at ``start``."""
    if start >= len(lines) or not lines[start].startswith("```"):
        raise ValueError(f"{path}:{start + 1}: a marker must stand just before a code fence")
    end = start + 1
    while end < len(lines) and not lines[end].startswith("```"):
        end += 1
    return lines[start][3:].strip(), "\n".join(lines[start + 1:end]), end + 1


def run_block(block: Block) -> str:
    """Run one block; "" when it did what the doc says, else what differs."""
    if block.lang == "table":
        sys.path.insert(0, str(ROOT / "scripts"))
        import docs_tables
        name = block.mark.split(":", 1)[1].strip()
        expected = getattr(docs_tables, name)()
        return "" if block.text == expected else f"table {name} differs from scripts/docs_tables.py:\n{expected}"
    if block.lang == "python":
        printed = _run_python(block.text)
        if block.output is not None and printed.rstrip("\n") != block.output.rstrip("\n"):
            return f"printed:\n{printed}\nthe doc shows:\n{block.output}"
        return ""
    return _run_console(block.text)


def _run_python(code: str) -> str:
    out = io.StringIO()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})
        finally:
            os.chdir(here)
    return out.getvalue()


def _run_console(text: str) -> str:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("$ dispatchprof "):
        return "a console block starts with '$ dispatchprof ...'"
    from dispatchprof.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(shlex.split(lines[0][2:])[1:])
    if code != 0:
        return f"exit code {code}"
    printed = out.getvalue().splitlines()
    for part in _parts(lines[1:]):
        if not _contains(printed, part):
            return f"not printed now:\n" + "\n".join(part) + "\n\nprinted:\n" + "\n".join(printed)
    return ""


def _parts(shown: list[str]) -> list[list[str]]:
    """The shown output split at '...' lines into runs that must each appear contiguously."""
    parts, current = [], []
    for line in shown:
        if line.strip() == "...":
            parts, current = parts + [current] if current else parts, []
        else:
            current.append(line)
    return [p for p in parts + [current] if p]


def _contains(printed: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(printed[i:i + n] == part for i in range(len(printed) - n + 1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run the runnable examples of the README and docs.")
    p.add_argument("files", nargs="*", type=Path, help="markdown files (default: README.md and docs/*.md)")
    p.add_argument("--slow", action="store_true", help="also run the blocks marked 'run: slow'")
    args = p.parse_args(argv)
    failures = 0
    for path in [f.resolve() for f in args.files] or DOC_FILES:
        for block in blocks(path):
            if block.mark == "run: slow" and not args.slow:
                continue
            problem = run_block(block)
            failures += bool(problem)
            print(f"{'FAIL' if problem else 'ok  '} {block.where} ({block.mark}, {block.lang or 'console'})")
            if problem:
                print("     " + problem.replace("\n", "\n     "))
    return failures


if __name__ == "__main__":
    sys.exit(main())
