"""The one reading path (dispatchprof.results.files.read_text / read_json) and the strict checks of
saved results (dispatchprof.results.validate): regular files only, bounded, UTF-8 with or without
a BOM; NaN, negative counts, wrong types and cyclic scopes refused in one line naming the field."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
import torch
from torch import nn

from dispatchprof import OpCounter
from dispatchprof.cli import main
from dispatchprof.results import files
from dispatchprof.results.files import read_json
from dispatchprof.results.profile import Profile
from tests.test_cli_inputs import TINY


@pytest.fixture(autouse=True)
def no_hang():
    """A read that blocks fails the test after 20 s instead of hanging the suite."""
    def hung(signum, frame):
        raise TimeoutError("the read blocked")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


def test_a_fifo_and_dev_zero_are_refused_before_any_byte_is_read(fifo):
    with pytest.raises(ValueError, match=rf"^{fifo}: is a FIFO \(named pipe\); a profile is read from a regular file$"):
        read_json(fifo, "profile")
    with pytest.raises(ValueError, match=r"^/dev/zero: is a character device; a trace is read from a regular file$"):
        files.read_text("/dev/zero", "trace")


def test_a_file_over_its_kinds_limit_is_refused_naming_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(["x" * 3000]))
    monkeypatch.setitem(files.READ_LIMITS, "profile", 2048)
    with pytest.raises(ValueError, match=rf"^{path}: a profile is at most 2 KiB \(a limit that keeps memory and "
                                         r"time bounded\); this file is larger$"):
        read_json(path, "profile")
    assert files.READ_LIMITS["config"] == 16 << 20 and files.READ_LIMITS["profile"] == 2048


def test_utf8_with_a_bom_is_read_and_other_encodings_are_refused(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": "\u00e9"}).encode())
    assert read_json(path, "config") == {"a": "\u00e9"}
    path.write_bytes('{"a": "\u00e9"}'.encode("latin-1"))
    with pytest.raises(ValueError, match=rf"^{path}: a config is UTF-8 text; byte 0xe9 at offset 7 is not UTF-8$"):
        read_json(path, "config")


@pytest.fixture
def saved(tmp_path):
    with OpCounter() as c:
        nn.Sequential(nn.Linear(2, 2), nn.ReLU())(torch.ones(1, 2))
    return json.loads(open(c.profile.save(tmp_path / "p.json")).read())


def _cycle(d):
    names = [s[0] for s in d["scopes"]]
    d["scopes"][names.index("0")][2] = "1"
    d["scopes"][names.index("1")][2] = "0"


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["records"][0][4].__setitem__(0, float("nan")), r"field records\[0\].cost.add must be a finite number "
                                                                r">= 0, got nan"),
    (lambda d: d["records"][0][4].__setitem__(1, -5),
     r"field records\[0\].cost.mult must be a finite number >= 0, got -5"),
    (lambda d: d["records"][0][4].__setitem__(7, "many"), r"field records\[0\].cost.macs must be a number, got 'many'"),
    (lambda d: d["records"][0].__setitem__(2, "sideways"), r"field records\[0\].phase must be one of forward, "),
    (lambda d: d["records"][0].__setitem__(0, 7), r"field records\[0\].op must be a string, got 7"),
    (lambda d: d.__setitem__("records", {"a": 1}), r"field records must be a list, got \{'a': 1\}"),
    (lambda d: d["scopes"][0].__setitem__(3, True), r"field scopes\[0\]\[3\] must be a number, got True"),
    (lambda d: d.__setitem__("peak_bytes", float("inf")), r"field peak_bytes must be a finite number >= 0, got inf"),
    (_cycle, r"field scopes must be a tree \(parents with no cycle\), got \"the cycle '0' -> '1' -> '0'\""),
])
def test_saved_profiles_are_validated_strictly(saved, edit, message):
    edit(saved)
    with pytest.raises(ValueError, match=rf"^p.json: {message}"):
        Profile.from_dict(saved, "p.json")


def test_a_recursive_scope_naming_itself_is_still_read(saved):
    saved["scopes"][1][2] = saved["scopes"][1][0]
    assert Profile.from_dict(saved, "p.json").scopes[1].parent == saved["scopes"][1][0]


@pytest.mark.parametrize("command", ["report", "merge"])
@pytest.mark.parametrize("edit, message", [
    (_cycle, "got \"the cycle '0' -> '1' -> '0'\""),
    (lambda d: d["records"][0][4].__setitem__(0, float("nan")), "must be a finite number >= 0, got nan"),
])
def test_report_and_merge_refuse_a_bad_saved_result_in_one_line(capsys, tmp_path, saved, command, edit, message):
    edit(saved)
    path = tmp_path / "dispatchprof_0.json"
    path.write_text(json.dumps(saved))                    # NaN written as the literal NaN, as Python does
    assert main([command, str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"dispatchprof: error: {path}: field ") and message in captured.err


@pytest.mark.parametrize("path", ["/dev/zero", "{fifo}"])
def test_report_refuses_a_device_or_a_fifo_at_once(capsys, fifo, path):
    assert main(["report", path.format(fifo=fifo)]) == 2
    assert "read from a regular file" in capsys.readouterr().err


def test_a_saved_generation_with_nan_is_refused(capsys, tmp_path):
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    out = tmp_path / "g.json"
    assert main([str(tmp_path / "tiny.json"), "--prompt-len", "4", "--new-tokens", "2", "--device", "L4",
                 "--json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    data["devices"]["L4"]["ttft_s"] = float("nan")
    out.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    assert capsys.readouterr().err == (f"dispatchprof: error: {out}: field devices['L4'].ttft_s must be a finite "
                                       f"number >= 0, got nan\n")


@pytest.mark.parametrize("meta, message", [
    (None, None),
    ([1], r"field meta must be a mapping, got \[1\]"),
    ({"process_index": "3"}, r"field meta.process_index must be a whole number >= 0 \(the process of a multi-process "
                             r"run\), got '3'"),
    ({"process_index": -1}, r"field meta.process_index must be a whole number >= 0 .*, got -1"),
])
def test_merge_checks_the_meta_of_a_rank_file(capsys, tmp_path, saved, meta, message):
    """Found by the fuzz campaign: "meta": null was an internal error in merge."""
    saved["meta"] = meta
    path = tmp_path / "dispatchprof_0.json"
    path.write_text(json.dumps(saved))
    code = main(["merge", str(path), "--json"])
    err = capsys.readouterr().err
    if message is None:
        assert code == 0 and err == ""
    else:
        assert code == 2 and re.fullmatch(rf"dispatchprof: error: {path}: {message}\n", err)
