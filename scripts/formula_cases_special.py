"""Harness cases of ops whose arguments are not plain dense tensors: FlexAttention with its
BlockMask, sparse layouts, quantized tensors (scripts/formula_harness.py adds them to
`formula_cases.cases`)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from formula_cases import Case

aten = torch.ops.aten


_FLEX_MASKS = {"causal": lambda b, h, q, k: q >= k, "window": lambda b, h, q, k: (q >= k) & (q - k <= 64),
               "document": lambda b, h, q, k: (q // 96) == (k // 96)}


def _flex_make(backward: bool):
    """flex_attention over a drawn length and mask (its BlockMask made of real tensors inside fn,
    as a model does), with a score_mod; backward through the higher-order op (torch refuses the
    public API's backward on CPU)."""
    def make(draw, batch):
        from torch._higher_order_ops.flex_attention import flex_attention as hop
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        length, h = draw(st.sampled_from([64, 128, 200, 256])), draw(st.integers(1, 2))
        mask_mod = _FLEX_MASKS[draw(st.sampled_from(sorted(_FLEX_MASKS)))]

        def score_mod(score, b, hh, q, k):
            return score * 0.5 + (q - k)

        def run(q, k, v):
            mask = create_block_mask(mask_mod, None, None, length, length, device="cpu")
            if not backward:
                return flex_attention(q, k, v, score_mod=score_mod, block_mask=mask)
            hop(q, k, v, score_mod, mask.as_tuple(), 0.25, {})[0].sum().backward()
        tensors = [torch.randn(batch, h, length, 8) for _ in range(3)]
        return run, [t.requires_grad_(backward) for t in tensors]
    return make


def flex_cases() -> list[Case]:
    """flex_attention forward and backward (meta tensors: torch refuses flex_attention on meta)."""
    return [Case("higher_order.flex_attention", _flex_make(False), kinds=("real", "fake"), generic_bytes=False),
            Case("higher_order.flex_attention_backward", _flex_make(True), kinds=("real", "fake"),
                 generic_bytes=False, backward=True)]


def _sparse_make(op: str):
    """A sparse COO matrix [batch*r, k] whose drawn pattern repeats per batch row block (so its
    stored elements double with the batch), times a dense matrix, or an element-wise op on it."""
    def make(draw, batch):
        r, k, n = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
        keep = draw(st.lists(st.booleans(), min_size=r * k, max_size=r * k))
        block = torch.randn(r, k) * torch.tensor(keep, dtype=torch.float32).reshape(r, k)
        a = torch.cat([block] * batch).to_sparse()
        call = {"aten.mm": lambda a, b: torch.mm(a, b), "aten.mul": lambda a, b: a * 3,
                "aten.sin": lambda a, b: torch.sin(a)}[op]
        return call, [a, torch.randn(k, n)]
    return make


def sparse_cases() -> list[Case]:
    """Sparse COO inputs (real tensors only: torch's meta and fake sparse tensors store nothing)."""
    return [Case(op, _sparse_make(op), kinds=("real",), direct=op == "aten.mm")
            for op in ("aten.mm", "aten.mul", "aten.sin")]


def _qconv_make(op: str):
    """A static int8 convolution (torch.ao.nn.quantized) on a quantised input."""
    def make(draw, batch):
        import torch.ao.nn.quantized as nnq

        cin, cout, k = draw(st.sampled_from([2, 4])), draw(st.sampled_from([2, 6])), draw(st.integers(1, 3))
        groups = draw(st.sampled_from([1, 2]))
        conv = {"quantized.conv2d": lambda: nnq.Conv2d(cin, cout, k, groups=groups, padding=1),
                "quantized.conv_transpose2d": lambda: nnq.ConvTranspose2d(cin, cout, k, groups=groups, stride=2),
                "quantized.conv1d": lambda: nnq.Conv1d(cin, cout, k, groups=groups)}[op]()
        shape = (batch, cin, 5) if op.endswith("1d") else (batch, cin, 4, 4)
        return (lambda x: conv(torch.quantize_per_tensor(x, 0.1, 0, torch.quint8))), [torch.randn(shape)]
    return make


def quantized_cases() -> list[Case]:
    """Static int8 convolutions (real tensors: quantized kernels have no meta or fake kernels)."""
    return [Case(op, _qconv_make(op), kinds=("real",), generic_bytes=False)
            for op in ("quantized.conv2d", "quantized.conv_transpose2d", "quantized.conv1d")]
