"""Where the op streams of real, meta and fake tensors differ, they differ by the model's or
torch's own ops only (docs/counting.md, "Where real and fake op streams differ")."""

from collections import Counter

import torch

import zoo
from conftest import count
from dispatchprof import fake_mode


def _run(kind):
    model, inputs, _ = zoo.build("llama", kind)
    model.eval()
    ids = inputs["input_ids"]
    if kind == "fake":
        with fake_mode(model):
            mask = torch.ones(ids.shape, dtype=torch.long)     # fake: no values, padded or not
    else:
        mask = torch.ones(ids.shape, dtype=torch.long)
        mask[0, :3] = 0                                        # left padding in the first row
    with torch.no_grad():
        return count(model, input_ids=ids, attention_mask=mask)


def test_padded_mask_streams_differ_only_by_transformers_value_checks():
    real, fake = _run("real"), _run("fake")
    ops = Counter(r.op for r in real.profile.records)
    ops.subtract(Counter(r.op for r in fake.profile.records))
    # masking_utils._ignore_causal_mask_sdpa reads the padding mask on real tensors (fast_all:
    # sum, == numel, .item(), twice) to decide whether SDPA may use is_causal=True instead of the
    # mask; on fake tensors (is_tracing) it never reads values and always builds the mask
    assert +ops == Counter({"aten.sum": 2, "aten.eq": 2, "aten._local_scalar_dense": 2})
    assert -ops == Counter()
    n = zoo.BATCH * zoo.SEQ                                    # mask elements summed per check
    assert real.total().flops - fake.total().flops == 2 * (n - 1)
    attention = [[r.cost for r in c.profile.records if "attention" in r.op] for c in (real, fake)]
    assert attention[0] == attention[1] and attention[0]       # the attention itself counts the same


def _lstm_backward(kind):
    model, inputs, loss = zoo.build("lstm", kind)
    c = count(zoo.training_step, model, inputs, loss)
    return [r for r in c.profile.records if r.phase == "backward"], c


def test_lstm_backward_bytes_match_and_fake_runs_the_real_ops():
    (real, rc), (fake, fc) = _lstm_backward("real"), _lstm_backward("fake")
    layers = [[r.cost for r in recs if r.op == "aten.mkldnn_rnn_layer_backward"] for recs in (real, fake)]
    assert layers[0] == layers[1] and len(layers[0]) == 2     # the oneDNN workspace is not traffic
    # layer 1 (I=16, H=32, T=5, B=2) reads x 640 B, weights 8192 + 16384 + 512 + 512, hx, cx 256 each,
    # output 1280, hy, cy 256 each, grad_output 1280 (h_n, c_n are unused: no grad_hy, grad_cy);
    # not its 32768-byte workspace
    assert layers[0][1].bytes_read == 640 + 8192 + 16384 + 1024 + 512 + 1280 + 512 + 1280 == 29824
    # torch's fake kernel returns one tensor for both bias gradients, and autograd would copy one of
    # them per layer (new_empty_strided + copy_); the counter's stand-in returns two, as the CPU does
    assert [r.op for r in real] == [r.op for r in fake]
    assert rc.total() == fc.total()


def test_swin_fake_lays_out_layer_norm_gradients_as_the_cpu_kernel():
    # torch's fake native_layer_norm_backward returns grad_input in the incoming gradient's
    # (permuted) layout, the CPU kernel a contiguous one; without the counter's stand-in a later
    # reshape copied on fake tensors only (3 clones of a [2,16,32] float gradient)
    counters = {}
    for kind in ("real", "fake"):
        model, inputs, loss = zoo.build("swin", kind)
        counters[kind] = count(zoo.training_step, model, inputs, loss)
    assert [(r.op, r.phase) for r in counters["fake"].profile.records] == \
        [(r.op, r.phase) for r in counters["real"].profile.records]
    assert counters["fake"].total() == counters["real"].total()
