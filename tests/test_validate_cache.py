"""The prediction cache of scripts/validate_published.py: stamped with the code's version,
refused by other code, written whole or not at all."""

import json
import os

import prediction_cache as pc
import pytest
import validate_published as vp


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A stand-in repository root with one file in each tree a prediction depends on."""
    for top in pc.CODE:
        (tmp_path / top).mkdir()
        (tmp_path / top / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(pc, "ROOT", str(tmp_path))
    return tmp_path


def test_version_follows_code_and_profiles_not_docs_or_bytecode(tree):
    v = vp.code_version()
    (tree / "dispatchprof" / "notes.md").write_text("docs")
    (tree / "dispatchprof" / "__pycache__").mkdir()
    (tree / "dispatchprof" / "__pycache__" / "a.py").write_text("stale")
    assert vp.code_version() == v
    (tree / "devices" / "gpu.yaml").write_text("H100: {}\n")
    v2 = vp.code_version()
    assert v2 != v
    (tree / "op_formulas" / "a.py").write_text("x = 2\n")
    assert vp.code_version() not in (v, v2)


def test_a_cache_of_other_code_is_refused(tree):
    path = str(tree / "cache.json")
    cache = vp.load_cache(path)                       # no file yet: an empty cache, stamped
    assert cache == {pc.VERSION: vp.code_version()}
    cache["llama/H100"] = {"0.9|300.0": [1.0, 2.0, 3.0, 4]}
    vp.save_cache(cache, path)
    assert vp.load_cache(path) == cache
    (tree / "dispatchprof" / "a.py").write_text("x = 3\n")
    with pytest.raises(SystemExit, match="holds predictions of other code"):
        vp.load_cache(path)
    json.dump({"llama/H100": {}}, open(path, "w"))    # written before versions were recorded
    with pytest.raises(SystemExit, match="version unrecorded"):
        vp.load_cache(path)


def test_a_failed_save_keeps_the_old_cache_and_leaves_nothing_behind(tree):
    path = str(tree / "cache.json")
    vp.save_cache({"a": 1}, path)
    with pytest.raises(TypeError):
        vp.save_cache({"a": object()}, path)          # not JSON: fails half-way through the dump
    assert json.load(open(path)) == {"a": 1}
    assert sorted(os.listdir(tree)) == sorted([*pc.CODE, "cache.json"])


def test_a_skipped_file_does_not_change_the_version(tree):
    (tree / "dispatchprof" / "engines.yaml").write_text("a: 1\n")
    v = pc.code_version((), skip=("dispatchprof/engines.yaml",))
    (tree / "dispatchprof" / "engines.yaml").write_text("a: 2\n")
    assert pc.code_version((), skip=("dispatchprof/engines.yaml",)) == v
    assert pc.code_version(()) != v
