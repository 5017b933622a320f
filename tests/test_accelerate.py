"""accelerate integration: handler, schedule, ProfileKwargs take-over, training phases,
collectives, multi-process runs and the example scripts."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from accelerate.utils import KwargsHandler, ProfileKwargs
from torch import nn

from dispatchprof import OpCounter
from dispatchprof.integrations.accelerate import CountKwargs, phase_table, profile
from dispatchprof.report.ranks import merge_report
from dispatchprof.results.ranks import load_ranks
from op_formulas import T, lookup
from op_formulas.collectives import share

ROOT = Path(__file__).resolve().parent.parent


def small():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def test_count_kwargs_is_an_accelerate_handler_with_defaults():
    kw = CountKwargs()
    assert isinstance(kw, KwargsHandler) and dataclasses.is_dataclass(kw)
    assert kw.to_kwargs() == {}
    assert CountKwargs(depth=2).to_kwargs() == {"depth": 2}


@pytest.mark.parametrize("schedule", [dict(wait=1, active=2), dict(wait=1, warmup=1, active=2, repeat=2),
                                      dict(skip_first=2, wait=0, active=1, repeat=3)])
def test_schedule_counts_exactly_the_steps_torch_profiler_records(schedule, capsys):
    model, steps = small(), 12
    plan = torch.profiler.schedule(**{"wait": 0, "warmup": 0, **schedule})
    record = (torch.profiler.ProfilerAction.RECORD, torch.profiler.ProfilerAction.RECORD_AND_SAVE)
    expected, current = [], 0
    for k in range(steps):
        if plan(k) in record:
            current += 1
        if plan(k) == torch.profiler.ProfilerAction.RECORD_AND_SAVE:
            expected.append(current)
            current = 0
    results = []
    with profile(Accelerator(cpu=True), CountKwargs(schedule_option=schedule, on_trace_ready=results.append)) as prof:
        for _ in range(steps):
            model(torch.randn(2, 8))
            prof.step()
    assert [r.profile.by_module()[""].scope.calls for r in results] == expected
    assert [r.window for r in results] == list(range(len(expected)))
    assert "phase" in capsys.readouterr().out                    # the main process printed each window


def test_takes_over_what_the_user_set_in_profile_kwargs(tmp_path):
    seen = []
    acc = Accelerator(cpu=True, kwargs_handlers=[ProfileKwargs(schedule_option={"wait": 1, "active": 1},
                                                               on_trace_ready=seen.append,
                                                               output_trace_dir=str(tmp_path))])
    model = small()
    with profile(acc, CountKwargs(print_report=False)) as prof:
        for _ in range(3):
            model(torch.randn(2, 8))
            prof.step()
    assert len(seen) == 1 and seen[0].profile.by_module()[""].scope.calls == 1
    saved = json.loads((tmp_path / "dispatchprof_0.json").read_text())
    assert saved["meta"] == {"process_index": 0, "num_processes": 1, "window": 0}
    mine = []
    with profile(acc, CountKwargs(schedule_option={"wait": 0, "active": 2}, on_trace_ready=mine.append,
                                  print_report=False)) as prof:       # CountKwargs' own values win
        for _ in range(2):
            model(torch.randn(2, 8))
            prof.step()
    assert len(mine) == 1 and mine[0].profile.by_module()[""].scope.calls == 2 and len(seen) == 1


def test_nested_with_accelerator_profile_and_no_schedule():
    acc = Accelerator(cpu=True, kwargs_handlers=[ProfileKwargs(activities=["cpu"])])
    results = []
    model = small()
    with acc.profile() as torch_prof, profile(acc, CountKwargs(on_trace_ready=results.append, print_report=False)):
        model(torch.randn(2, 8))
        model(torch.randn(2, 8))
    assert len(results) == 1 and results[0].profile.total().macs == 2 * 2 * (8 * 16 + 16 * 2)
    assert "aten::addmm" in torch_prof.key_averages().table()


def test_only_the_main_process_prints_but_every_process_writes(tmp_path, capsys):
    class Rank1:
        process_index, num_processes, is_main_process, profile_handler = 1, 2, False, None

    with profile(Rank1(), CountKwargs(output_trace_dir=str(tmp_path))):
        small()(torch.randn(1, 8))
    assert capsys.readouterr().out == ""
    assert os.listdir(tmp_path) == ["dispatchprof_1.json"]


def test_bad_schedule_key():
    with pytest.raises(ValueError, match=r"schedule_option has unknown key 'steps'; allowed: wait, warmup"):
        with profile(Accelerator(cpu=True), CountKwargs(schedule_option={"steps": 3})):
            pass


def test_training_phases_with_measured_latency_and_fused_adamw():
    model = small()
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    with OpCounter(devices="H100-SXM") as c:
        loss = model(torch.randn(4, 8)).square().mean()
        loss.backward()
        opt.step()
    phases = {r.phase for r in c.profile.records}
    assert phases == {"forward", "backward", "optimizer"}
    assert [r.op for r in c.profile.records if r.op == "aten._fused_adamw_"] == ["aten._fused_adamw_"]
    assert all(s > 0 for s in dict(c.profile.phase_wall).values())
    table = phase_table(c.profile, c.simulations())
    assert "optimizer" in table and "FLOP/s" in table and "time on H100-SXM" in table
    assert set(c.simulated().by_phase()) == {"forward", "backward", "optimizer"}


def test_collective_formulas():
    # all_reduce of 10 float32 elements over 4 ranks: 3*10 ADD split over ranks, 2*3/4*40 bytes sent
    assert [share(30, 4, r) for r in range(4)] == [7, 8, 7, 8]
    cost = lookup(torch.ops.c10d.allreduce_)([T(10)], None, None, None, result=None, world_size=4, rank=1)
    assert (cost.add, cost.comm_bytes) == (8, 60)
    cost = lookup(torch.ops.c10d._allgather_base_)(T(40), T(10), None, result=None, world_size=4, rank=0)
    assert (cost.add, cost.comm_bytes) == (0, 120)


def test_two_processes_write_one_file_each_and_merge(tmp_path):
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                          str(ROOT / "scripts/examples/multiprocess.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["dispatchprof_0.json", "dispatchprof_1.json"]
    ranks = load_ranks([str(tmp_path)])
    params_bytes = (16 * 32 + 32 + 32 * 4 + 4) * 4
    for r in ranks:
        # DDP's gradient all-reduce: 2 steps x 2*(n-1)/n x gradient bytes, n = 2
        reduce = [rec for rec in r.profile.records if rec.op == "c10d.allreduce_"]
        assert sum(rec.cost.comm_bytes for rec in reduce) == 2 * params_bytes
        assert {rec.phase for rec in reduce} == {"backward"}
        assert r.profile.total().comm_bytes >= 2 * params_bytes       # plus DDP's small bucket syncs
    assert ranks[0].profile.total().macs == ranks[1].profile.total().macs
    text = merge_report(ranks, devices="A100-80GB")
    assert "all ranks" in text and "(slowest rank)" in text and "all ranks" in out.stdout
    from dispatchprof.cli import main
    assert main(["merge", str(tmp_path), "--device", "A100-80GB"]) == 0


@pytest.mark.parametrize("script", ["inference.py", "training.py"])
def test_example_scripts_run(script):
    out = subprocess.run([sys.executable, str(ROOT / "scripts/examples" / script)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "phase" in out.stdout and "module" in out.stdout
    assert "measured latency" in out.stdout and "achieved FLOP/s" in out.stdout     # real tensors
