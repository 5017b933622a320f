"""nn.TransformerEncoder's padding-mask fast path (the packed, nested-tensor encoder) under the
counter (docs/counting.md, "Fast paths"): real = fake = meta record by record for several batches
of lengths, each layer's fused kernel counted as the slow path counts its sequences one by one,
a mask without values refused in one line, and torch left as it was after exit and exceptions."""

import contextlib
import types

import pytest
import torch
from torch import nn

from attention_calls import B, E, F_, FAST_OPS, H, L, MODELS, count_kind, make_masks, real_model, record_fields
from conftest import count
from dispatchprof import fake_model, fake_mode


def _padding(lengths, length=L):
    """A padding mask (True: padding) keeping the first ``n`` of ``length`` tokens per sequence;
    a negative ``n`` keeps the last -n (a mask that is not left aligned)."""
    pad = torch.ones(len(lengths), length, dtype=torch.bool)
    for row, n in enumerate(lengths):
        if n >= 0:
            pad[row, :n] = False
        else:
            pad[row, length + n:] = False
    return types.SimpleNamespace(pad=pad, causal=None)


#: batch of sequence lengths -> whether torch packs it (left aligned); all padding-mask encoders
PADDINGS = {(5, 3): True, (2, 5, 4): True, (5, 5): True, (1, 1, 1, 1): True, (5, -3): False}


@pytest.mark.parametrize("lengths", PADDINGS, ids=str)
def test_padding_mask_encoder_real_fake_meta_with_lengths(lengths):
    """The packed encoder on fake and meta tensors with a real mask: every record the real run's;
    packed, each layer counts what the slow path counts sequence by sequence at its own length."""
    real, fake, meta = (count_kind("encoder-nested", k, _padding(lengths)) for k in ("cpu", "fake", "meta"))
    records = [[record_fields(r) for r in c.profile.records] for c in (real, fake, meta)]
    assert records[0] == records[1] == records[2]
    ops = [r[0] for r in records[0]]
    assert ("aten._nested_tensor_from_mask" in ops) == PADDINGS[lengths]    # torch's own choice, read
    if not PADDINGS[lengths]:
        return
    layers = [r for r in meta.profile.records if r.op == FAST_OPS["encoder-nested"]]
    layer = nn.TransformerEncoderLayer(E, H, F_, batch_first=True).to("meta").eval()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            alone = [count(layer, torch.randn(1, n, E, device="meta")).total() for n in lengths]
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert len(layers) == 2
    for field in ("add", "mult", "div", "sqrt", "exp", "cmp", "macs"):
        assert getattr(layers[0].cost, field) == sum(getattr(a, field) for a in alone)


@pytest.mark.parametrize("kind", ["meta", "fake"])
def test_padding_mask_encoder_refuses_a_mask_without_values(kind):
    with pytest.raises(RuntimeError, match="pass the mask as a real CPU tensor"):
        count_kind("encoder-nested", kind, "kind")


def _torch_state():
    """What the counter must leave as it found it: the kernels torch has for the packing ops on
    meta, the fast-path device name, the mode stacks, the global module hooks."""
    from torch.nn.modules import module
    from torch.utils import backend_registration
    ops = ("aten::_nested_tensor_from_mask", "aten::_nested_tensor_from_mask_left_aligned",
           "aten::to_padded_tensor", "aten::_transformer_encoder_layer_fwd")
    return ([torch._C._dispatch_has_kernel_for_dispatch_key(op, key) for op in ops for key in ("Meta", "Python")],
            backend_registration._privateuse1_backend_name, torch._C._len_torch_function_stack(),
            torch._C._len_torch_dispatch_stack(), len(module._global_forward_pre_hooks),
            len(module._global_forward_hooks))


@pytest.mark.parametrize("kind", ["meta", "fake"])
def test_packed_encoder_leaves_torch_as_it_was_after_exit_and_exception(kind):
    before = _torch_state()
    count_kind("encoder-nested", kind)
    assert _torch_state() == before
    build, call = MODELS["encoder-nested"]

    def stop(module, args):
        raise RuntimeError("stopped")
    for where in ("layer", "slow path"):           # raised by a hook; by the counter (a slow path)
        model = fake_model(build) if kind == "fake" else build().to("meta").eval()
        if where == "layer":
            model.layers[1].register_forward_pre_hook(stop)
        else:
            model.layers[1].train()                 # torch: MHA refuses the nested batch
        masks = make_masks("cpu")                      # real: the lengths
        with (fake_mode(model) if kind == "fake" else contextlib.nullcontext()):
            x = torch.randn(B, L, E, device="cpu" if kind == "fake" else "meta")
            with torch.no_grad(), pytest.raises((RuntimeError, TypeError)) as raised:
                count(lambda: call(model, x, masks))
        assert ("stopped" if where == "layer" else "nested tensors are not supported") in str(raised.value)
        assert _torch_state() == before
    again = count_kind("encoder-nested", kind)                       # and the next count is whole
    assert [r.op for r in again.profile.records] == [r.op for r in count_kind("encoder-nested", "cpu").profile.records]


def test_nested_encoder_counts_each_sequence_with_its_own_length():
    model, run = real_model("encoder-nested")          # sequences of 5 and 3 tokens (E = 16)
    with torch.no_grad():
        c = count(run)
    layers = [r for r in c.profile.records if r.op == FAST_OPS["encoder-nested"]]
    assert len(layers) == 2
    # independent: the slow path (fast path switched off), op by op, one sequence at a time
    layer = model.layers[0].to("meta")
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            alone = [count(layer, torch.randn(1, n, E, device="meta")) for n in (5, 3)]
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert all(FAST_OPS["encoder-nested"] not in [r.op for r in c.profile.records] for c in alone)
    alone = [c.total() for c in alone]
    for field in ("add", "mult", "div", "sqrt", "exp", "cmp", "other", "macs"):
        assert getattr(layers[0].cost, field) == getattr(alone[0], field) + getattr(alone[1], field)
    gather = [r for r in c.profile.records if r.op == "aten._nested_tensor_from_mask"][0].cost
    assert (gather.bytes_read, gather.bytes_written) == (10 + 8 * 16 * 4, 8 * 16 * 4)   # bool mask [2,5]
    pad = [r for r in c.profile.records if r.op == "aten.to_padded_tensor"][0].cost
    assert (pad.bytes_read, pad.bytes_written) == (8 * 16 * 4, 2 * 5 * 16 * 4)
    check = [r for r in c.profile.records if r.op == "aten._nested_tensor_from_mask_left_aligned"][0].cost
    assert check.cmp == 10
