"""OpCounter and dispatchprof's profile(accelerator, ...) nest with accelerator.profile() in either
order: torch.profiler sees each of the model's aten ops once (its rows counted against a run
without dispatchprof), accelerate's on_trace_ready receives the torch profiler, and the count is
exact."""

import contextlib

import pytest
import torch
from accelerate import Accelerator
from accelerate.utils import ProfileKwargs

from conftest import MLP_FWD_MACS, mlp
from dispatchprof import OpCounter
from dispatchprof.integrations.accelerate import CountKwargs, profile


def aten_rows(torch_prof) -> dict[str, int]:
    """torch.profiler's table: calls per aten op."""
    return {e.key: e.count for e in torch_prof.key_averages() if e.key.startswith("aten::")}


@pytest.fixture()
def accelerator_and_traces():
    traces = []
    return Accelerator(cpu=True, kwargs_handlers=[ProfileKwargs(activities=["cpu"], on_trace_ready=traces.append)]), traces


@pytest.fixture()
def plain_rows(accelerator_and_traces):
    """The rows of accelerator.profile() around one forward, with no dispatchprof."""
    acc, traces = accelerator_and_traces
    model, x = mlp(), torch.randn(4, 64)
    with acc.profile() as torch_prof:
        model(x)
    rows = aten_rows(torch_prof)
    traces.clear()
    # Linear with bias on 2-D input: aten::linear -> aten::t + aten::addmm, twice; ReLU once.
    assert (rows["aten::linear"], rows["aten::addmm"], rows["aten::t"], rows["aten::relu"]) == (2, 2, 2, 1)
    return rows


def _counter(results):
    @contextlib.contextmanager
    def run():
        with OpCounter() as c:
            yield
        results.append(c.profile)
    return run


def _session(acc, results):
    @contextlib.contextmanager
    def run():
        with profile(acc, CountKwargs(on_trace_ready=lambda r: results.append(r.profile), print_report=False)):
            yield
    return run


@pytest.mark.parametrize("counter", ["OpCounter", "profile(accelerator)"])
@pytest.mark.parametrize("order", ["counter inside", "counter outside"])
def test_nesting_sees_each_op_once_and_counts_exactly(accelerator_and_traces, plain_rows, counter, order):
    acc, traces = accelerator_and_traces
    counted = []
    ours = _counter(counted) if counter == "OpCounter" else _session(acc, counted)
    model, x = mlp(), torch.randn(4, 64)
    expected = model(x)
    if order == "counter inside":
        with acc.profile() as torch_prof, ours():
            out = model(x)
    else:
        with ours(), acc.profile() as torch_prof:
            out = model(x)
    assert torch.equal(out, expected)
    rows = aten_rows(torch_prof)
    assert {op: rows.get(op, 0) for op in plain_rows} == plain_rows      # each of the model's ops once
    assert len(traces) == 1 and isinstance(traces[0], torch.profiler.profile)
    assert len(counted) == 1 and counted[0].total().macs == MLP_FWD_MACS
    assert counted[0].total().mult == MLP_FWD_MACS and counted[0].total().cmp == 4 * 256      # ReLU: 1 CMP each
