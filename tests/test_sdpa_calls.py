"""F.scaled_dot_product_attention under the counter, in every calling convention its signature
allows: the same output as without the counter, bit for bit, and one record with the same counts.
The conventions come from torch's own schema, so a parameter a new torch adds is tried here."""

import pytest
import torch
import torch.nn.functional as F

from conftest import count, only_record
from dispatchprof.count.sdpa_args import PARAMETERS, sdpa_call
from op_formulas.attention import SDPA_PARAMETERS, sdpa
from op_formulas.cost import TensorMeta

SDPA = "aten.scaled_dot_product_attention"
B, H, L, D = 1, 2, 4, 8


def _values(requires_grad=False):
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, D, requires_grad=requires_grad) for _ in range(3))
    mask = torch.ones(L, L, dtype=torch.bool).tril()
    return {"query": q, "key": k, "value": v, "attn_mask": mask, "dropout_p": 0.0, "is_causal": False,
            "scale": 0.5, "enable_gqa": False}


def _conventions():
    """Every split of the schema's parameters into a positional head and a keyword tail that the
    Python signature accepts (keyword-only ones always as keywords)."""
    positional = [p.name for p in PARAMETERS if not p.kwarg_only]
    for i in range(len(positional) + 1):
        yield positional[:i], [p.name for p in PARAMETERS if p.name not in positional[:i]]


CONVENTIONS = list(_conventions())
out: list = []          # what a counted call returned


def test_the_schema_is_the_python_signature():
    # the docstring's first line is the Python signature torch generates from the schema
    head = " ".join(F.scaled_dot_product_attention.__doc__.split("->")[0].split())
    names = [part.strip().split("=")[0] for part in head[head.index("(") + 1:head.rindex(")")].split(",")]
    assert names == [p.name for p in PARAMETERS]
    assert [p.name for p in PARAMETERS if p.kwarg_only] == ["scale", "enable_gqa"]


def test_the_formula_knows_every_parameter():
    # a parameter a new torch adds fails here until SDPA_PARAMETERS says what it counts as
    assert list(SDPA_PARAMETERS) == [p.name for p in PARAMETERS]
    meta = {"query": TensorMeta((B, H, L, D)), "key": TensorMeta((B, H, L, D)), "value": TensorMeta((B, H, L, D))}
    every = {**meta, **{p.name: p.default for p in PARAMETERS if p.has_default}}
    assert sdpa(**every, result=TensorMeta((B, H, L, D))) == sdpa(*meta.values(), result=TensorMeta((B, H, L, D)))


@pytest.mark.parametrize("head,tail", CONVENTIONS, ids=[f"{len(h)}-positional" for h, _ in CONVENTIONS])
def test_every_convention_counts_once_and_runs_unchanged(head, tail):
    values = _values()
    args = tuple(values[n] for n in head)
    kwargs = {n: values[n] for n in tail}
    alone = F.scaled_dot_product_attention(*args, **kwargs)
    c = count(lambda: out.append(F.scaled_dot_product_attention(*args, **kwargs)))
    assert torch.equal(out.pop(), alone)
    positional = count(lambda: F.scaled_dot_product_attention(*(values[n] for n in head + tail[:len(tail) - 2]),
                                                              scale=0.5, enable_gqa=False))
    assert only_record(c, SDPA).cost == only_record(positional, SDPA).cost
    # 1*2 heads, S = 16 scores of E = 8, masked: 16*8 + 16 + 8*16 = 272 MULT per head
    assert only_record(c, SDPA).cost.mult == 2 * 272


def test_keyword_call_backward_is_one_fused_record():
    values = _values(requires_grad=True)
    kw = {k: values[k] for k in ("query", "key", "value")}

    def step():
        F.scaled_dot_product_attention(**kw, is_causal=True).sum().backward()
    c = count(step)
    assert only_record(c, SDPA).causal
    assert only_record(c, SDPA + "_backward")


@pytest.mark.parametrize("args,kwargs", [
    ((), {"query": 1}),                                   # tensors missing
    ((1, 2, 3), {"query": 1}),                            # query given twice
    ((1, 2, 3), {"dropout": 0.1}),                        # no such parameter
    ((1, 2, 3, None, 0.0, False, 0.5), {}),               # scale is keyword-only
])
def test_a_call_that_does_not_bind_is_left_to_torch(args, kwargs):
    assert sdpa_call(args, kwargs) == (args, kwargs)


def test_a_bad_call_raises_torchs_own_error_under_the_counter():
    q = _values()["query"]
    with pytest.raises(TypeError) as alone:
        F.scaled_dot_product_attention(q, q)
    with pytest.raises(TypeError) as counted:
        count(F.scaled_dot_product_attention, q, q)
    assert str(counted.value) == str(alone.value)
