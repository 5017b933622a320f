"""An interrupt or error inside OpCounter's own __enter__ or __exit__ leaves no global hook, mode,
recursion limit or flex switch behind (dispatchprof.count.counter, dispatchprof.count.interrupts)."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.attention.flex_attention as flex
from torch.nn.modules import module as torch_module
from torch.optim import optimizer as torch_optimizer

from dispatchprof import OpCounter
from dispatchprof.count import counter
from tests.conftest import mlp


def global_state():
    """Everything OpCounter installs process-wide, as comparable values."""
    return (dict(torch_module._global_forward_pre_hooks), dict(torch_module._global_forward_hooks),
            dict(torch_optimizer._global_optimizer_pre_hooks), dict(torch_optimizer._global_optimizer_post_hooks),
            torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack(),
            sys.getrecursionlimit(), flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG)


def interrupt_on(calls: list[int], n: int, real):
    """``real``, except that its ``n``-th call raises KeyboardInterrupt instead."""
    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    return wrapped


def then_interrupt(real):
    """``real``, then a KeyboardInterrupt: the interrupt lands between two steps of __exit__."""
    def step():
        real()
        raise KeyboardInterrupt
    return step


#: Each step of __enter__, by the name the counter module calls it through.
ENTER_STEPS = [("register_optimizer_step_pre_hook", True), ("register_optimizer_step_post_hook", True),
               ("eager_flex_attention", True), ("FusedAttentionMode", True),
               ("TimedCountingMode", True),             # the counting mode when host time is measured (default)
               ("CountingMode", False)]                 # and when it is not


@pytest.mark.parametrize("name, host_time", ENTER_STEPS)
def test_an_interrupt_at_any_step_of_enter_leaves_nothing_installed(monkeypatch, name, host_time):
    before = global_state()
    monkeypatch.setattr(counter, name, interrupt_on([], 1, getattr(counter, name)))
    c = OpCounter(host_time=host_time)
    with pytest.raises(KeyboardInterrupt):
        c.__enter__()
    assert global_state() == before
    monkeypatch.undo()
    with OpCounter() as again:                          # the counter is usable afterwards
        mlp()(torch.ones(4, 64))
    assert again.total().macs == 75_776 and global_state() == before


def test_an_interrupt_while_acquiring_the_recursion_headroom_leaves_nothing(monkeypatch):
    before = global_state()
    monkeypatch.setattr(counter._HEADROOM, "acquire", interrupt_on([], 1, counter._HEADROOM.acquire))
    with pytest.raises(KeyboardInterrupt):
        OpCounter().__enter__()
    assert global_state() == before


@pytest.mark.parametrize("step", ["_restore_flex", "_release_headroom", "_remove_hooks"])
def test_an_interrupt_at_any_step_of_exit_still_removes_everything(monkeypatch, step):
    before = global_state()
    c = OpCounter()
    with pytest.raises(KeyboardInterrupt):
        with c:
            mlp()(torch.ones(4, 64))
            real = getattr(c, step)
            monkeypatch.setattr(c, step, then_interrupt(real))
    assert global_state() == before
    assert c.total().macs == 75_776                      # the counts so far stay readable


