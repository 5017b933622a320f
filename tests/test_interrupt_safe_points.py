"""Ctrl-C or SIGTERM at any point of a count ends it with the signal's exception, never a SIGABRT
inside torch, and leaves the model and torch as they were (dispatchprof.count.interrupts).

The window that aborted: a handler raising between two bytecodes of TorchDispatchMode.__enter__
(after the mode is pushed, before ``return self``) while a FakeTensor enters its FakeTensorMode;
the C++ guard restoring the fake mode during unwinding then fails in a destructor ("trying to set
the current FakeTensorMode, but one already exists", exit 134). The child below sends the signal
exactly there, at the N-th such entry (an op-count trigger, no timing guess)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import inspect, json, signal, sys
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.modules import module as torch_module
from torch.utils._python_dispatch import TorchDispatchMode
from dispatchprof import OpCounter

SIG, OFFSETS = getattr(signal, sys.argv[1]), [int(n) for n in sys.argv[2:]]
class Terminated(Exception):
    pass
def terminated(signum, frame):                      # as the CLI's SIGTERM handler
    raise Terminated
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, terminated)

fake = FakeTensorMode()
real = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
for (name, p), q in zip(list(model.named_parameters()), real.parameters()):
    index, attr = name.split(".")
    setattr(model[int(index)], attr, torch.nn.Parameter(fake.from_tensor(q.detach()), requires_grad=False))
x = fake.from_tensor(torch.ones(2, 4, 16))          # 3-D: the composite linear -> matmul path

src, start = inspect.getsourcelines(TorchDispatchMode.__enter__)
RETURN = start + [i for i, line in enumerate(src) if line.strip() == "return self"][0]

def state():
    hooks = sum(len(getattr(m, a)) for m in model.modules() for a in ("_forward_hooks", "_forward_pre_hooks"))
    return [torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack(), hooks,
            len(torch_module._global_forward_pre_hooks), len(torch_module._global_forward_hooks),
            sys.getrecursionlimit(), [id(p) for p in model.parameters()], signal.getsignal(signal.SIGINT).__name__]

def trigger(n):
    seen = [0]
    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == RETURN and isinstance(frame.f_locals.get("self"), FakeTensorMode):
            seen[0] += 1
            if seen[0] == n:
                sys.settrace(None)
                signal.raise_signal(SIG)        # its handler runs at the next bytecode boundary: right here
        return local
    return lambda frame, event, arg: local if frame.f_code is TorchDispatchMode.__enter__.__code__ else None

before, results = state(), {}
for n in OFFSETS:
    sys.settrace(trigger(n))
    try:
        with torch.no_grad(), OpCounter(model, host_time=False) as c:
            for _ in range(3):
                model(x)
        results[n] = "finished"
    except (KeyboardInterrupt, Terminated) as e:
        results[n] = type(e).__name__
    finally:
        sys.settrace(None)
    results[f"{n} unchanged"] = state() == before
with torch.no_grad(), OpCounter(model, host_time=False) as c:       # usable afterwards
    model(x)
print(json.dumps({"results": results, "macs": c.total().macs}))
"""

OFFSETS = [1, 2, 3, 4, 6, 9]


@pytest.mark.parametrize("sig, raised", [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_a_signal_inside_torchs_mode_entry_ends_the_count_cleanly_at_every_offset(sig, raised):
    proc = subprocess.run([sys.executable, "-c", CHILD, sig, *map(str, OFFSETS)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, timeout=600)
    assert proc.returncode == 0 and "terminate called" not in proc.stderr and "c10::Error" not in proc.stderr, \
        proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["results"] == {**{str(n): raised for n in OFFSETS}, **{f"{n} unchanged": True for n in OFFSETS}}
    # 2 x 4 rows: 16 x 32 + 32 x 8 multiply-accumulates each = 8 x 768 = 6,144
    assert out["macs"] == 2 * 4 * (16 * 32 + 32 * 8)
