"""Exports: lossless versioned JSON, CSV, a Perfetto trace whose slices nest, a roofline PNG,
and atomic writes."""

import csv
import io
import json
import os
import sys

import pytest

import zoo
from dispatchprof import OpCounter, Profile
from dispatchprof.report.csv_tables import modules_csv, operators_csv
from dispatchprof.results.files import write_atomic
from dispatchprof.results.profile import VERSION
from dispatchprof.report.roofline import plot_roofline
from dispatchprof.report.trace import trace_events, write_trace


@pytest.fixture(scope="module")
def llama_training():
    model, inputs, loss = zoo.build("llama", "fake")
    with OpCounter(devices={"*.mlp*": "PIM-AI-4chip", "*": "PIM-AI-1chip"}) as c:
        zoo.training_step(model, inputs, loss)
    return c


def test_json_round_trip_is_lossless(llama_training, tmp_path):
    p = llama_training.profile
    path = p.save(tmp_path / "p.json")
    back = Profile.load(path)
    assert back == p
    assert back.by_module()["model.layers.1.mlp"] == p.by_module()["model.layers.1.mlp"]
    assert json.loads(open(path).read())["version"] == VERSION


def test_future_truncated_and_foreign_json_raise(llama_training, tmp_path):
    path = llama_training.profile.save(tmp_path / "p.json")
    data = json.loads(open(path).read())
    data["version"] = VERSION + 1
    (tmp_path / "future.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"schema version {VERSION + 1} is not supported: this dispatchprof reads version {VERSION}"):
        Profile.load(tmp_path / "future.json")
    (tmp_path / "cut.json").write_text(open(path).read()[:500])
    with pytest.raises(ValueError, match=r"cut.json: not a complete JSON profile \(truncated or corrupt"):
        Profile.load(tmp_path / "cut.json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match=r"not a dispatchprof profile"):
        Profile.load(tmp_path / "other.json")
    with pytest.raises(ValueError, match=r"cannot read the profile"):
        Profile.load(tmp_path / "missing.json")


def test_csv_of_operators_and_modules(llama_training):
    p = llama_training.profile
    ops = list(csv.DictReader(io.StringIO(operators_csv(p))))
    mm = next(r for r in ops if r["op"] == "aten.mm")
    assert int(mm["macs"]) == p.by_operator()["aten.mm"].totals.macs and mm["state"] == "counted"
    assert sum(int(r["flops"]) for r in ops) == p.total().flops
    assert any(r["state"] == "zero-cost" and int(r["calls"]) > 0 for r in ops)
    mods = {r["module"]: r for r in csv.DictReader(io.StringIO(modules_csv(p)))}
    assert int(mods[""]["inclusive_macs"]) == p.total().macs
    assert int(mods["model.layers.0.mlp"]["params"]) == 3 * 64 * 128
    assert mods["model.layers.0.mlp"]["parent"] == "model.layers.0"


def _slices_nest(events):
    by_track = {}
    for e in events:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append(
                (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e["name"]))
    for track in by_track.values():
        stack = []
        for start, end, name in sorted(track, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start and not (stack[-1][1] == start == end):
                stack.pop()
            if stack:
                assert start >= stack[-1][0] and end <= stack[-1][1], (name, stack[-1])
            stack.append((start, end, name))
    return by_track


def test_trace_slices_nest_and_time_is_monotonic(llama_training, tmp_path):
    sim = llama_training.simulated("placement")
    events = trace_events(sim)
    tracks = _slices_nest(events)
    assert len(tracks) == 2                                            # one process per device
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"PIM-AI-4chip", "PIM-AI-1chip"}
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "op"]
    assert len(ops) == len(sim.ops)
    starts = [e["ts"] for e in ops]
    assert starts == sorted(starts)                                    # monotonic
    assert all(float(e["ts"] * 1000).is_integer() or abs(e["ts"] * 1000 - round(e["ts"] * 1000)) < 1e-6 for e in ops)
    end = max(e["ts"] + e["dur"] for e in ops)
    assert end * 1e-6 == pytest.approx(sim.total.time_s, abs=1e-9)       # integer-ns clock, whole run
    phases = {e["name"] for e in events if e["ph"] == "X" and e["cat"] == "phase"}
    assert phases == {"phase: forward", "phase: backward"}
    energy = [e for e in events if e["ph"] == "C"]
    last = {}
    for e in energy:
        last[e["pid"]] = e["args"]["J"]
    assert sum(last.values()) == pytest.approx(sim.total.energy_j, rel=1e-9)
    path = write_trace(sim, tmp_path / "trace.json")
    assert json.loads(open(path).read())["traceEvents"] == json.loads(json.dumps(events))


def test_roofline_png(llama_training, tmp_path):
    path = plot_roofline(llama_training.simulated("placement"), tmp_path / "roofline.png", level="modules")
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"level must be one of \('ops', 'modules'\)"):
        plot_roofline(llama_training.simulated("placement"), tmp_path / "x.png", level="layers")


def test_roofline_without_matplotlib_says_how_to_get_it(llama_training, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'dispatchprof\[plot\]'"):
        plot_roofline(llama_training.simulated("placement"), tmp_path / "r.png")
    assert not os.path.exists(tmp_path / "r.png")


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")

    def boom(src, dst, **dir_fds):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]
