"""The documentation site's configuration (mkdocs.yml, built by `make docs` with warnings as errors):
every page of docs/ is in its navigation, and every API reference entry names an object that exists."""

import importlib
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def pages(nav) -> list[str]:
    out = []
    for entry in nav:
        for value in entry.values():
            out += pages(value) if isinstance(value, list) else [value]
    return out


def test_every_docs_page_is_in_the_navigation_once():
    listed = pages(CONFIG["nav"])
    assert sorted(listed) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert CONFIG["strict"] is True


def test_every_api_reference_entry_exists():
    targets = re.findall(r"^::: ([\w.]+)$", (ROOT / "docs" / "api.md").read_text(), re.M)
    assert len(targets) >= 20
    for target in targets:
        module, _, name = target.rpartition(".")
        try:
            importlib.import_module(target)               # a module
        except ModuleNotFoundError:
            assert hasattr(importlib.import_module(module), name), target


def test_the_readme_links_the_site():
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`make docs`" in readme and "[docs/index.md](docs/index.md)" in readme
