"""Host profiles and the eager host time built from measured host work: the formula by hand, bad
input, the validation rows' split, the calibration report."""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch
import yaml

from dispatchprof import OpCounter
from dispatchprof.results.records import OpRecord
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.hostprofile import HostProfileError, bundled_file, default_host, load_host, read_hosts
from dispatchprof.sim.timing import eager_host_us
from op_formulas.cost import Cost

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
sys.path.insert(0, SCRIPTS)
from validate_host_time import split_of  # noqa: E402


def record(loops: float, calls: int) -> OpRecord:
    return OpRecord("aten.mm", "", "decode", "bfloat16", Cost(), host_loops=loops, host_calls=calls)


def test_eager_host_time_by_hand():
    """dgx-h100 (H100-SXM's default host): score 1257 against the anchor's 1249 at A ns per loop;
    1000 loops, 3 calls (2 views and the op): 1000 * A * 1249 / 1257 ns + 2 x 0.5 us (views) + 3 us
    (dispatch) + 4 us launch."""
    bare = load_device("H100-SXM")
    assert bare.host_profile() is None and eager_host_us(record(1000, 3), bare) == 7.0    # no --host: fixed 7 us
    h100 = bare.with_host(default_host("H100-SXM"))             # --host auto
    host = h100.host_profile()
    assert host.name == "dgx-h100"
    anchor = yaml.safe_load(open(bundled_file()))["anchor"]["python_loop_ns"]
    assert host.python_loop_ns == pytest.approx(anchor * 1249 / 1257)
    assert eager_host_us(record(1000, 3), h100) == pytest.approx(1000 * anchor * 1249 / 1257 / 1000 + 2 * 0.5 + 3 + 4)
    slower = h100.with_host(load_host("dgx-a100"))            # a slower CPU: more model Python time
    assert eager_host_us(record(1000, 3), slower) == pytest.approx(1000 * anchor * 1249 / 1020 / 1000 + 8)
    assert eager_host_us(record(1000, 3), h100.as_bound()) == 0.0      # the bound: no host cost


def test_counts_without_host_times_fall_back_with_one_warning():
    x = torch.randn(8)
    with OpCounter(devices=load_device("H100-SXM").with_host(load_host("dgx-h100")), host_time=False) as c:
        torch.exp(x)
    with pytest.warns(UserWarning, match=r"no measured host time .* falls back to the fixed 7 us per op"):
        t = c.simulated().ops[0].t_host
    assert t == pytest.approx(7e-6)


def test_a_saved_count_without_host_times_warns_once_for_all_its_ops(tmp_path):
    """Five eager records saved without host times, reloaded and simulated on a host: every op
    takes the fixed 7 us, with one warning line under Python's default filter (not one per op)."""
    from dispatchprof.results.profile import Profile
    from dispatchprof.sim.placement import scenarios_of
    from dispatchprof.sim.simulate import simulate

    x = torch.randn(8)
    with OpCounter(host_time=False) as c:
        for _ in range(5):
            x = torch.exp(x)
    path = tmp_path / "count.json"
    c.profile.save(path)
    loaded = Profile.load(path)
    device = load_device("H100-SXM").with_host(load_host("dgx-h100"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        sim = simulate(loaded, scenarios_of([device])["H100-SXM"], name="H100-SXM")
    assert [t.t_host for t in sim.ops] == pytest.approx([7e-6] * 5)
    assert len([w for w in seen if "no measured host time" in str(w.message)]) == 1


def test_bad_host_profiles_are_one_line_errors(tmp_path):
    bad = tmp_path / "h.yaml"
    bad.write_text("anchor: {single_thread_score: 1000, python_loop_ns: 30}\n"
                   "hosts:\n  - {name: slow, cpu: x, single_thread_score: 0, dispatch_us: 1, launch_us: 1, "
                   "graph_launch_us: 1, view_us: 0}\n")
    with pytest.raises(HostProfileError, match=r"h.yaml: host 'slow': single_thread_score must be a positive number, "
                                               r"got 0$"):
        read_hosts(bad)
    with pytest.raises(HostProfileError, match=r"unknown host 'dgx-z9'; known hosts: dgx-a100, .*dgx-h100"):
        load_host("dgx-z9")
    bad.write_text(bad.read_text().replace("single_thread_score: 0", "single_thread_score: 900, turbo: 1"))
    with pytest.raises(HostProfileError, match=r"host 'slow': unknown field 'turbo'"):
        load_host(str(bad))
    bad.write_text(bad.read_text().replace(", turbo: 1", ""))
    assert load_host(str(bad)).python_loop_ns == pytest.approx(30 * 1000 / 900)
    bad.write_text(bad.read_text().replace("single_thread_score: 900", "python_loop_ns: 60"))
    own = load_host(str(bad))                     # a host's own (fitted) figure; the score it implies
    assert own.python_loop_ns == 60 and own.single_thread_score == pytest.approx(1000 * 30 / 60)
    bad.write_text(bad.read_text().replace("python_loop_ns: 60, ", ""))
    with pytest.raises(HostProfileError, match=r"host 'slow': single_thread_score \(or python_loop_ns\) is missing$"):
        load_host(str(bad))


def test_a_host_file_of_ones_own_needs_only_its_hosts(tmp_path):
    """Without 'anchor' a user's host file takes the bundled one; its 'defaults' add to the bundled."""
    bundled = yaml.safe_load(open(bundled_file()))
    a, d = bundled["anchor"], bundled["defaults"]
    mine = tmp_path / "mine.yaml"
    mine.write_text("defaults: {launch_us: 6.5}\nhosts:\n  - {name: desk, cpu: my workstation, single_thread_score: 1500}\n")
    host = load_host(str(mine))
    assert host.python_loop_ns == pytest.approx(a["python_loop_ns"] * a["single_thread_score"] / 1500)
    assert (host.dispatch_us, host.view_us, host.graph_launch_us) == (d["dispatch_us"], d["view_us"],
                                                                      d["graph_launch_us"])
    assert host.launch_us == 6.5
    mine.write_text("anchor: {single_thread_score: 1000, python_loop_ns: 30}\n" + mine.read_text())
    assert load_host(str(mine)).python_loop_ns == pytest.approx(30 * 1000 / 1500)      # its own anchor
    bundled_copy = tmp_path / "copy.yaml"
    bundled_copy.write_text("hosts:\n  - {name: x, cpu: y, single_thread_score: 1000}\n")
    with pytest.raises(HostProfileError, match=r"copy.yaml: 'anchor' .* is missing$"):
        read_hosts(bundled_copy, inherit=False)           # the bundled file itself must state it


def test_cli_unknown_host_exits_2(capsys):
    from dispatchprof.cli import main

    assert main(["llama-3.2-1b", "--device", "H100-SXM", "--host", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown host 'nope'; known hosts: dgx-a100" in err[0]


def test_validation_rows_follow_the_fixed_split():
    import validate_host_time as v

    rows = v.read_rows()
    assert rows and all(r["split"] == split_of(r["id"]) for r in rows)
    root = os.path.dirname(SCRIPTS)
    for r in rows:
        assert r["quote"]
        if not r["source_url"].startswith("https://"):      # an own measurement: the quoted line of its table
            path, line = r["source_url"].split("#L")
            with open(os.path.join(root, path)) as f:
                assert f.read().splitlines()[int(line) - 1] == r["quote"]
            assert float(r["quote"].split(",")[7]) == float(r["value"])


def test_calibrate_host_speed_reports_each_host_against_this_machine(capsys):
    import json

    from dispatchprof.cli import main
    from dispatchprof.sim.hostprofile import hosts

    assert main(["calibrate", "--host-speed", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    here = data["loop_ns"]
    assert here > 0 and set(data["hosts"]) == set(hosts())
    lent = hosts()["lent-h200-vm"]             # the first host measured both ways: it converts the others' figures
    measured = {"lent-h200-vm": 120.4, "lent-h100": 115.1}     # hosts.yaml measured_loop_ns
    for name, loop_ns in measured.items():
        assert data["hosts"][name]["loop_ns"] == loop_ns
    for name, h in hosts().items():
        real = measured.get(name, h.python_loop_ns * 120.4 / lent.python_loop_ns)
        assert data["hosts"][name]["loop_ns"] == pytest.approx(real)
        assert data["hosts"][name]["speed_vs_here"] == pytest.approx(here / real)
