"""nn.MultiheadAttention and nn.TransformerEncoder calls with torch's fast paths, and their count
on real, fake or meta tensors: the cases tests/test_fast_paths.py and tests/test_packed_encoder.py
share (E = 16 features, H = 4 heads, F_ = 32 feed-forward, B = 2 sequences of L = 5 tokens)."""

import types

import torch
from torch import nn

from conftest import count
from dispatchprof import fake_model, fake_mode

E, H, F_, B, L = 16, 4, 32, 2, 5


def mha():
    return nn.MultiheadAttention(E, H, batch_first=True)


def make_masks(device) -> types.SimpleNamespace:
    """The padding mask (the second sequence has 3 tokens) and the causal mask, made before a
    count (fake tensors make an indexed write with other ops than real ones)."""
    pad = torch.zeros(B, L, dtype=torch.bool, device=device)
    pad[1, 3:] = True
    return types.SimpleNamespace(pad=pad, causal=torch.ones(L, L, dtype=torch.bool, device=device).triu(1))


def _layer(**kw):
    return nn.TransformerEncoderLayer(E, H, F_, batch_first=True, **kw)


#: name -> (build, call(model, x)); all self-attention, batch first, eval, no grad
MODELS = {
    "mha-padding": (mha, lambda m, x, k: m(x, x, x, key_padding_mask=k.pad, need_weights=False)[0]),
    "mha-weights": (mha, lambda m, x, k: m(x, x, x, attn_mask=k.causal)),
    "mha-keywords": (mha, lambda m, x, k: m(query=x, key=x, value=x, need_weights=False)[0]),
    "layer-mask": (_layer, lambda m, x, k: m(x, src_mask=k.causal)),
    "encoder-gelu-mask": (lambda: nn.TransformerEncoder(_layer(activation="gelu"), 2, enable_nested_tensor=False),
                          lambda m, x, k: m(x, mask=k.causal, is_causal=False)),  # no value check
    "encoder-nested": (lambda: nn.TransformerEncoder(_layer(), 2),
                       lambda m, x, k: m(x, src_key_padding_mask=k.pad)),
    "mha-plain": (mha, lambda m, x, k: m(x, x, x, need_weights=False)[0]),
    "mha-both-masks": (mha, lambda m, x, k: m(x, x, x, attn_mask=k.causal, key_padding_mask=k.pad,
                                            need_weights=False)[0]),
    "mha-seq-first": (lambda: nn.MultiheadAttention(E, H), lambda m, x, k: m(x, x, x, need_weights=False)[0]),
    "encoder-padding-no-nested": (lambda: nn.TransformerEncoder(_layer(), 2, enable_nested_tensor=False),
                                  lambda m, x, k: m(x, src_key_padding_mask=k.pad)),
    "layer-seq-first": (lambda: nn.TransformerEncoderLayer(E, H, F_), lambda m, x, k: m(x)),   # slow path
}
FAST_OPS = {"mha-padding": "aten._native_multi_head_attention", "mha-keywords": "aten._native_multi_head_attention",
            "mha-weights": "aten._native_multi_head_attention",
            "layer-mask": "aten._transformer_encoder_layer_fwd",
            "encoder-gelu-mask": "aten._transformer_encoder_layer_fwd",
            "encoder-nested": "aten._transformer_encoder_layer_fwd",
            "mha-plain": "aten._native_multi_head_attention", "mha-both-masks": "aten._native_multi_head_attention",
            "encoder-padding-no-nested": "aten._transformer_encoder_layer_fwd"}


def real_model(name):
    build, call = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    x, masks = torch.randn(B, L, E), make_masks("cpu")
    return model, lambda: call(model, x, masks)


#: Models whose padding mask says how the batch is packed: its values are an input, as token ids
#: are, so it stays a real CPU tensor on every kind (docs/counting.md, "Fast paths").
MASK_VALUES = {"encoder-nested"}


def count_kind(name, kind, masks=None):
    """The counter of one forward of ``name`` on tensor kind ``kind`` (same weights' shapes).
    ``masks``: None for `make_masks` on the kind's device (real for `MASK_VALUES` models), "kind" for
    `make_masks` on the kind's device whatever the model, or the masks to pass (the batch is theirs)."""
    build, call = MODELS[name]
    torch.manual_seed(0)
    if masks is None and name in MASK_VALUES:
        masks = make_masks("cpu")
    batch = B if not isinstance(masks, types.SimpleNamespace) else len(masks.pad)
    if kind == "fake":
        model = fake_model(build)
        with fake_mode(model):
            x = torch.randn(batch, L, E)
            masks = masks if isinstance(masks, types.SimpleNamespace) else make_masks("cpu")
    else:
        model = build().to(kind)
        x = torch.randn(batch, L, E, device=kind)
        masks = masks if isinstance(masks, types.SimpleNamespace) else make_masks(kind)
    model.eval()

    def run():
        if kind != "fake":
            return call(model, x, masks)
        with fake_mode(model):
            return call(model, x, masks)
    with torch.no_grad():
        return count(run)



def record_fields(r):
    """What a record says, but host time (measured) and storage ids (addresses)."""
    return (r.op, r.scope, r.phase, r.dtype, r.cost, r.causal, r.param_bytes, r.param_elements,
            r.out_elements, r.shapes, [i[:2] for i in r.inputs])
