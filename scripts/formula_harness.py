"""Property checks of the formula registry on real, meta and fake tensors.

Each case draws shapes and scalars (hypothesis), runs one op on real CPU tensors, on meta tensors
and on fake tensors under OpCounter, and checks: the op's records are identical on all three;
every category is non-negative; where the case says so, doubling the batch dimension exactly
doubles every count; and, for ops under the generic traffic rule, bytes equal the element sizes
of the real inputs and outputs. Registered ops without a case are listed with the reason.
Used by tests/test_formula_properties.py (few examples) and scripts/fuzz_formulas.py (many).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from hypothesis import strategies as st
from torch._subclasses import FakeTensorMode

from dispatchprof import OpCounter
from dispatchprof.count.tensors import iter_tensors, stored_bytes
from op_formulas import CATEGORIES, registered

aten = torch.ops.aten
import formula_cases
from formula_cases import Case
from formula_cases_special import flex_cases, quantized_cases, sparse_cases


def cases() -> list[Case]:
    """Every case: dense ops (formula_cases) and those with BlockMasks, sparse layouts or
    quantized tensors (formula_cases_special)."""
    return formula_cases.cases() + flex_cases() + sparse_cases() + quantized_cases()


UNCOVERED_REASON = ("no generator yet (most need structured arguments: indices, index lists, sizes, RNN "
                    "weights); counted by its formula, not yet property-checked")


#: Name prefixes of the ops torch runs only on CUDA or ROCm in place of a CPU kernel (cuDNN, MIOpen).
VENDOR_PREFIXES = ("aten.cudnn_", "aten._cudnn_", "aten.miopen_")


def reason_for(packet: Any, covered: set[str]) -> str:
    """Why a registered op has no harness case."""
    name = str(packet)
    if name.startswith("c10d."):
        return "collective: needs a process group; tests/test_accelerate.py runs it on 2 processes"
    if name.startswith("aten._foreach_") or name.startswith("aten._fused_"):
        return "optimizer op on lists of tensors and state; tests/test_formulas_misc.py and the zoo's AdamW steps"
    default = getattr(packet, "default", None)
    overloads = [getattr(packet, o) for o in packet.overloads()]
    if overloads and all(o.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)
                         for o in overloads):
        return "CompositeImplicit: torch decomposes it before any dispatch mode sees it (or OpCounter does)"
    if name.endswith("_") and name[:-1] in covered:
        return f"in-place twin of {name[:-1]}: the same registered formula, checked there"
    if name.startswith(VENDOR_PREFIXES):
        return ("cuDNN or MIOpen kernel (CUDA, ROCm): no CPU kernel; tests/test_cuda_library_kernels.py checks it "
                "against the CPU's ops of the same module")
    if "backward" in name:
        return "reached only through autograd with saved tensors; checked by the zoo's backward passes"
    del default
    return UNCOVERED_REASON


def coverage() -> tuple[set[str], dict[str, str]]:
    """(ops with cases, {registered op without a case: reason})."""
    covered = {c.op for c in cases()}
    listed = {str(p): reason_for(p, covered) for p in registered() if str(p) not in covered}
    return covered, listed


def run_kind(case: Case, fn: Callable, tensors: list[torch.Tensor], kind: str) -> list:
    """The records of ``case.op`` when fn runs on ``kind`` tensors."""
    if kind == "meta":
        tensors = [t.detach().to("meta").requires_grad_(t.requires_grad) for t in tensors]
    elif kind == "fake":
        mode = FakeTensorMode(allow_non_fake_inputs=True)    # python scalars become CPU 0-d tensors
        tensors = [mode.from_tensor(t.detach()).requires_grad_(t.requires_grad) for t in tensors]
    with OpCounter() as c:
        fn(*tensors)
    phase = "backward" if case.backward else "forward"
    return [r for r in c.profile.records if r.op == case.op and r.phase == phase]


def check(case: Case, draw: Any) -> None:
    """Every property of the module docstring for one drawn instance of ``case``."""
    seed = draw(st.integers(0, 2**16))
    torch.manual_seed(seed)
    recorded = Recording(draw)
    fn, tensors = case.make(recorded, 2)
    results = {}
    for kind in case.kinds:
        torch.manual_seed(seed)
        results[kind] = run_kind(case, fn, tensors, kind)
    real = results["real"]
    assert real, f"{case.op}: no record on real tensors"
    for kind, recs in results.items():
        assert [r.cost for r in recs] == [r.cost for r in real], f"{case.op}: {kind} differs from real"
    for r in real:
        assert all(getattr(r.cost, c) >= 0 for c in CATEGORIES + ("macs",)), f"{case.op}: negative count"
    if case.direct and len(real) == 1:
        _check_bytes(case, fn, tensors, real[0])
    if case.scales:
        torch.manual_seed(seed)
        fn2, tensors2 = case.make(_Replay(recorded), 4)
        doubled = run_kind(case, fn2, tensors2, "real")
        for a, b in zip(real, doubled):
            for c in CATEGORIES + ("macs",):
                assert getattr(b.cost, c) == 2 * getattr(a.cost, c), f"{case.op}: {c} does not double with the batch"


class _Replay:
    """Replays the draws of the first build so the doubled build differs only in its batch."""

    def __init__(self, draw: Any) -> None:
        self.values = list(getattr(draw, "_dispatchprof_values", []))

    def __call__(self, strategy: Any) -> Any:
        return self.values.pop(0)


class Recording:
    """A draw function that remembers what it drew (for `_Replay`)."""

    def __init__(self, draw: Any) -> None:
        self.draw, self._dispatchprof_values = draw, []

    def __call__(self, strategy: Any) -> Any:
        value = self.draw(strategy)
        self._dispatchprof_values.append(value)
        return value


def _check_bytes(case: Case, fn: Callable, tensors: list[torch.Tensor], record: Any) -> None:
    """For single-op cases whose inputs are the drawn tensors: bytes of inputs and outputs."""
    inputs_read = sum(stored_bytes(t) for t in tensors)
    if record.cost.bytes_read < 0 or record.cost.bytes_written <= 0:
        raise AssertionError(f"{case.op}: bytes {record.cost.bytes_read}/{record.cost.bytes_written}")
    out = fn(*[t.detach() for t in tensors])
    written = sum(stored_bytes(t) for t in iter_tensors(out))
    assert record.cost.bytes_read == inputs_read, f"{case.op}: read {record.cost.bytes_read} != {inputs_read}"
    assert record.cost.bytes_written == written, f"{case.op}: written {record.cost.bytes_written} != {written}"
