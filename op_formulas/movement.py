"""Views, metadata, data movement and factories: no arithmetic.

Views and metadata ops (view, transpose, expand, slice, ...) are the zero-cost set:
0 arithmetic and 0 bytes. Data movement (clone, copy_, cat, gather, embedding, pad, ...)
and factories (zeros, ones, full, empty, arange) do no arithmetic; their bytes follow the
generic rule (inputs read, outputs written). Embedding reads the gathered rows, not the
whole table. Movement too: diag_embed, masked_scatter_backward (the source's gradient gathered
from the masked positions), lu_unpack (triangles copied, the permutation built by swaps) and
packing/padding of sequences (_pack_padded_sequence, its backward, _pad_packed_sequence).
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula, gathers_parameters, overwrites_self, zero_cost

aten = torch.ops.aten

zero_cost(
    aten.view, aten._unsafe_view, aten._reshape_alias, aten.reshape, aten.view_as, aten.transpose,
    aten.transpose_, aten.t, aten.t_, aten.permute, aten.expand, aten.expand_as, aten.squeeze,
    aten.squeeze_, aten.unsqueeze, aten.unsqueeze_, aten.slice, aten.select, aten.alias, aten.detach,
    aten.detach_, aten.as_strided, aten.as_strided_, aten.split, aten.split_with_sizes, aten.unsafe_split,
    aten.unsafe_split_with_sizes, aten.unbind, aten.chunk, aten.narrow, aten.diagonal, aten.unfold,
    aten.view_as_real, aten.view_as_complex, aten.lift_fresh, aten.movedim, aten.swapaxes,
    aten.flatten, aten.unflatten, aten.real, aten.imag, aten.conj, aten._conj, aten._neg_view,
    aten.resolve_conj, aten.resolve_neg, aten.sym_size, aten.sym_stride, aten.sym_numel,
    aten.sym_storage_offset, aten.is_same_size, aten.is_nonzero, aten.size, aten.stride,
    aten.dim, aten.numel, aten.set_, aten.resize_, aten.requires_grad_, aten.retain_grad,
    aten._version, aten.record_stream, aten._has_compatible_shallow_copy_type,
    aten.is_coalesced, aten._nested_tensor_size, aten.tensor_split, aten._linalg_check_errors,
)

_MOVEMENT = (
    aten.clone, aten.copy, aten.copy_, aten._to_copy, aten.contiguous, aten.cat, aten.stack,
    aten.hstack, aten.vstack, aten.index_select, aten.gather, aten.constant_pad_nd, aten.pad,
    aten.reflection_pad1d, aten.reflection_pad2d, aten.replication_pad1d, aten.replication_pad2d,
    aten.repeat, aten.repeat_interleave, aten.index, aten._unsafe_index, aten.index_put,
    aten.index_put_, aten._index_put_impl_, aten.scatter, aten.scatter_, aten.masked_scatter,
    aten.masked_scatter_, aten.index_fill, aten.index_fill_, aten.index_copy, aten.index_copy_,
    aten.flip, aten.roll, aten.slice_backward, aten.select_backward, aten.slice_scatter,
    aten.select_scatter, aten.diagonal_scatter, aten.as_strided_scatter, aten.unfold_backward,
    aten.lift_fresh_copy, aten.alias_copy, aten.view_copy, aten.expand_copy, aten.permute_copy,
    aten.t_copy, aten.transpose_copy, aten.unsqueeze_copy, aten.squeeze_copy, aten.detach_copy,
    aten.slice_copy, aten.select_copy, aten.split_copy, aten.unbind_copy, aten._local_scalar_dense,
    aten.fill, aten.fill_, aten.zero_, aten.zeros, aten.zeros_like, aten.ones, aten.ones_like,
    aten.full, aten.full_like, aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty,
    aten.new_empty_strided, aten.new_zeros, aten.new_ones, aten.new_full, aten.arange, aten.linspace,
    aten.scalar_tensor, aten.eye, aten._unsafe_index_put, aten.masked_select, aten.nonzero,
    aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d,
    aten._pin_memory, aten.unique_consecutive, aten._unique2, aten.lift,
    aten.pixel_shuffle, aten.pixel_unshuffle, aten.reflection_pad3d, aten.replication_pad3d, aten.im2col,
    aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d,
    aten._efficientzerotensor, aten.channel_shuffle, aten.native_channel_shuffle,
    aten.diag_embed, aten.masked_scatter_backward, aten.lu_unpack, aten._pack_padded_sequence,
    aten._pack_padded_sequence_backward, aten._pad_packed_sequence, aten.zero, aten.empty_permuted,
    aten.as_strided_copy, aten.diagonal_copy, aten.narrow_copy, aten.split_with_sizes_copy, aten.unfold_copy,
    aten._reshape_copy, aten.take, aten.tril_indices, aten.triu_indices, aten.rot90, aten.block_diag,
    aten._chunk_cat, aten.diagonal_backward, aten.nonzero_static,
)


@formula(*_MOVEMENT)
def movement(*args: Any, result: Any, **kwargs: Any) -> Cost:
    """No arithmetic; bytes by the generic rule."""
    return Cost()


overwrites_self(aten.copy_, aten.fill_, aten.zero_, aten.normal_, aten.uniform_, aten.random_,
                aten.exponential_, aten.bernoulli_, aten.index_put_, aten._index_put_impl_,
                aten.scatter_)


@formula(aten.embedding)
def embedding(weight: TensorMeta, indices: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """No arithmetic; reads the indices and the gathered rows, writes the output."""
    out = first_meta(result)
    return Cost(bytes_read=indices.nbytes + out.nbytes, bytes_written=out.nbytes)


gathers_parameters(0, aten.embedding)


@formula(aten.embedding_dense_backward)
def embedding_backward(grad: TensorMeta, indices: TensorMeta, num_weights: int, *args: Any,
                       result: Any, **kwargs: Any) -> Cost:
    """Scatter-add of every gradient row into a zeroed table: numel(grad) ADD."""
    return Cost(add=grad.numel)


@formula(aten.scatter_add, aten.scatter_add_, aten.index_add, aten.index_add_)
def scatter_add(self: TensorMeta, dim: int, index: Any, src: Any, *args: Any, result: Any,
                **kwargs: Any) -> Cost:
    """1 ADD per source element (index_add with alpha != 1: +1 MULT per source element)."""
    source = src if isinstance(src, TensorMeta) else index
    alpha = kwargs.get("alpha", 1)
    return Cost(add=source.numel, mult=source.numel * int(alpha != 1))


@formula(aten.scatter_reduce, aten.scatter_reduce_, aten.index_reduce, aten.index_reduce_)
def scatter_reduce(self: TensorMeta, dim: int, index: TensorMeta, src: TensorMeta, reduce: str,
                   *args: Any, result: Any, **kwargs: Any) -> Cost:
    """1 op per source element: sum/mean ADD (mean: +1 DIV per output), prod MULT, amax/amin CMP."""
    n = src.numel
    unit = {"sum": Cost(add=1), "mean": Cost(add=1), "prod": Cost(mult=1)}.get(reduce, Cost(cmp=1))
    return unit * n + Cost(div=first_meta(result).numel * int(reduce == "mean"))


@formula(aten.tril, aten.triu, aten.tril_, aten.triu_)
def triangle(self: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Selection by position: 1 CMP per element."""
    return Cost(cmp=first_meta(result).numel)


EMBEDDING_BAG_SUM, EMBEDDING_BAG_MEAN = 0, 1   # mode 2 is max


@formula(aten._embedding_bag, aten._embedding_bag_forward_only)
def embedding_bag(weight: TensorMeta, indices: TensorMeta, offsets: TensorMeta, scale_grad: bool = False,
                  mode: int = EMBEDDING_BAG_SUM, sparse: bool = False, per_sample_weights: Any = None,
                  *args: Any, result: Any, **kwargs: Any) -> Cost:
    """I gathered rows of D elements reduced into B bags: sum (I-B)*D ADD, mean also B*D DIV,
    max (I-B)*D CMP; per_sample_weights I*D MULT. Reads the indices, offsets and gathered rows;
    writes the four outputs."""
    out = first_meta(result)
    rows, d = indices.numel, weight.shape[-1]
    bags = out.numel // d if d else 0
    merged = max(rows - bags, 0) * d
    cost = Cost(cmp=merged) if mode == 2 else Cost(add=merged, div=bags * d * int(mode == EMBEDDING_BAG_MEAN))
    if per_sample_weights is not None:
        cost += Cost(mult=rows * d)
    read = indices.nbytes + offsets.nbytes + rows * d * weight.itemsize
    return cost.with_bytes(read=read, written=sum(t.nbytes for t in result if isinstance(t, TensorMeta)))


gathers_parameters(0, aten._embedding_bag, aten._embedding_bag_forward_only)


def bag_backward_cost(grad: TensorMeta, indices: TensorMeta, mode: int, weighted: bool) -> Cost:
    """Each of the I indices adds its bag's gradient row into the table: I*D ADD (mean: +I*D DIV,
    per-sample weights: +I*D MULT); max adds only each bag's argmax row: numel(grad) ADD."""
    if mode == 2:
        return Cost(add=grad.numel)
    n = indices.numel * grad.shape[-1]
    return Cost(add=n, div=n * int(mode == EMBEDDING_BAG_MEAN), mult=n * int(weighted))


@formula(aten._embedding_bag_backward)
def embedding_bag_backward(grad: TensorMeta, indices: TensorMeta, offsets: Any, offset2bag: Any,
                           bag_size: Any, max_indices: Any, num_weights: int, scale_grad: bool,
                           mode: int, sparse: bool, per_sample_weights: Any = None, *args: Any,
                           result: Any, **kwargs: Any) -> Cost:
    """See `bag_backward_cost`."""
    return bag_backward_cost(grad, indices, mode, per_sample_weights is not None)


@formula(aten._embedding_bag_dense_backward)
def embedding_bag_dense_backward(grad: TensorMeta, indices: TensorMeta, offset2bag: Any, bag_size: Any,
                                 max_indices: Any, num_weights: int, scale_grad: bool, mode: int,
                                 per_sample_weights: Any = None, *args: Any, result: Any,
                                 **kwargs: Any) -> Cost:
    """See `bag_backward_cost`."""
    return bag_backward_cost(grad, indices, mode, per_sample_weights is not None)
