"""What the counter reads off tensors: metadata for formulas, bytes for the traffic model."""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses import FakeTensor

from op_formulas.cost import SparseMeta, TensorMeta

Tensor = torch.Tensor
#: The counter's own tensor reads (storages, sizes, strides) run inside this guard, so they skip
#: torch function modes (the counter's FusedAttentionMode and any of the user's).
NO_TORCH_FUNCTION = torch._C.DisableTorchFunction


_STRIDED = torch.strided
#: Sparse layouts: (name, the methods that return what a tensor of that layout stores).
_SPARSE_PARTS = {
    torch.sparse_coo: ("coo", ("_values", "_indices")),
    torch.sparse_csr: ("csr", ("values", "crow_indices", "col_indices")),
    torch.sparse_bsr: ("bsr", ("values", "crow_indices", "col_indices")),
    torch.sparse_csc: ("csc", ("values", "ccol_indices", "row_indices")),
    torch.sparse_bsc: ("bsc", ("values", "ccol_indices", "row_indices")),
}


def sparse_meta(t: Tensor) -> SparseMeta:
    """A sparse tensor as formulas see it: its stored values' elements, and the bytes of its values
    and indices."""
    name, methods = _SPARSE_PARTS[t.layout]
    parts = [getattr(t, m)() for m in methods]
    nbytes = sum(p.numel() * p.element_size() for p in parts)
    return SparseMeta(tuple(int(s) for s in t.shape), t.dtype, name, int(t._nnz()), parts[0].numel(), nbytes)


def stored_bytes(t: Tensor) -> int:
    """Bytes a tensor really stores: a dim with stride 0 (a broadcast) counts once."""
    if t.layout is not _STRIDED:          # a sparse tensor stores its values and indices
        return sparse_meta(t).nbytes if t.layout in _SPARSE_PARTS else t.numel() * t.element_size()
    try:
        strides = t.stride()
    except (RuntimeError, NotImplementedError):  # sparse or nested layouts have no strides
        return t.numel() * t.element_size()
    if 0 not in strides:
        return t.numel() * t.element_size()
    n = 1
    for size, stride in zip(t.shape, strides):
        if stride != 0:
            n *= size
    return n * t.element_size()


def to_meta(value: Any) -> Any:
    """Tensors to `TensorMeta` (sparse ones to `SparseMeta`), lists and tuples of them to lists
    and tuples of metas, the rest as is."""
    if isinstance(value, Tensor):
        return _tensor_meta(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return value
        metas = [_tensor_meta(v) if isinstance(v, Tensor) else to_meta(v) if isinstance(v, (list, tuple)) else v
                 for v in value]
        return metas if type(value) is list else tuple(metas) if type(value) is tuple else type(value)(metas)
    return value


def _tensor_meta(t: Tensor) -> Any:
    if t.layout is not _STRIDED and t.layout in _SPARSE_PARTS:
        return sparse_meta(t)         # a sparse tensor: SparseMeta (stored elements and bytes)
    if t.is_nested:
        return nested_meta(t)
    return TensorMeta(tuple(map(int, t.shape)), t.dtype)


def nested_meta(t: Tensor) -> tuple[TensorMeta, ...]:
    """A (strided) nested tensor as formulas see it: the tuple of its components' metas."""
    return tuple(TensorMeta(tuple(map(int, size)), t.dtype) for size in t._nested_tensor_size().tolist())


def moved_onto_meta(args: tuple, kwargs: dict, out: Any) -> bool:
    """Whether an ``aten._to_copy`` call only moves a real CPU tensor onto the meta device, as it
    is (same dtype, layout and memory format): a model's ``.to(device)`` of a constant it built on
    the CPU, which on a CPU run dispatches nothing (the tensor is already there). The one op a
    meta run has that the real run has not, recognised exactly from the call (docs/zoo.md,
    "A constant moved onto the meta device")."""
    src = args[0] if args else None
    return (isinstance(out, Tensor) and not isinstance(out, FakeTensor) and out.device.type == "meta"
            and isinstance(src, Tensor) and not isinstance(src, FakeTensor) and src.device.type == "cpu"
            and src.dtype == out.dtype and src.layout == out.layout
            and kwargs.get("memory_format") in (None, torch.preserve_format))


def tensor_kind(t: torch.Tensor) -> str:
    """"fake" (a FakeTensor), "meta" or "real": the kinds of tensor a count can run on."""
    if isinstance(t, FakeTensor):
        return "fake"
    return "meta" if t.device.type == "meta" else "real"


def first_kind(value: Any) -> str | None:
    """The kind (`tensor_kind`) of the first tensor in ``value``, None without one."""
    for t in iter_tensors(value):
        return tensor_kind(t)
    return None


def iter_tensors(value: Any) -> list[Tensor]:
    """Tensors in an op argument or result (a tensor, or lists/tuples/dicts of them), in order.
    A list, not a generator: this runs several times per op, and flat arguments are the rule."""
    if isinstance(value, Tensor):
        return [value]
    out: list[Tensor] = []
    if isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, Tensor):
                out.append(v)
            elif isinstance(v, (list, tuple, dict)):
                out.extend(iter_tensors(v))
    elif isinstance(value, dict):
        for v in value.values():
            if isinstance(v, Tensor):
                out.append(v)
            elif isinstance(v, (list, tuple, dict)):
                out.extend(iter_tensors(v))
    return out


def output_tensors(value: Any) -> list[Tensor]:
    """Tensors in a module's output: also looks inside dataclasses and ModelOutput mappings.
    Each container is visited once, so self-referencing or shared outputs terminate."""
    out: list[Tensor] = []
    stack = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if isinstance(v, Tensor):
            out.append(v)
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif hasattr(v, "__dataclass_fields__"):
            stack.extend(getattr(v, f, None) for f in v.__dataclass_fields__)
    return out


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype | None) -> str:
    """'float32' for torch.float32; '' for None."""
    if dtype is None:
        return ""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name
