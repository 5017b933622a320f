"""Mixture-of-experts ops: grouped matrix products (``aten._grouped_mm``) and the histogram that
sizes the groups (``aten.histc``).

``_grouped_mm(a, b, offs)`` runs G independent products, the groups cut from one dim by the
cumulative offsets ``offs``:

- 2-D a ``[S,K]`` x 3-D b ``[G,K,N]`` (the experts' forward and grad-input): rows of a are cut
  into G groups, group g goes through ``b[g]``: out ``[S,N]``;
- 3-D a ``[G,M,K]`` x 2-D b ``[K,N]``: columns of b are cut into G groups: out ``[M,N]``;
- 2-D a ``[M,K]`` x 2-D b ``[K,N]`` (the experts' grad-weight): the contraction dim K is cut
  into G groups, group g gives ``out[g] = a[:, Kg] @ b[Kg, :]``: out ``[G,M,N]``;
- 3-D x 3-D without offs: a batched product (bmm).

Rule: every row (column, contraction step) belongs to exactly one group, so the products are
those of one plain product over the whole cut dim, whatever the offsets: MULT = MACs =
M*N*K summed over groups. ADD = MULT - (output elements that receive a sum), as for mm; when
K is cut, an empty group's output is a zero fill, so ADD = M*N*(K - groups holding a step).

Routing assumption (offsets are values, and formulas see shapes only): the cut dim is spread
over ``min(G, length)`` non-empty groups, as balanced top-k routing spreads the T*k token-expert
pairs (``dispatchprof.llm.models.balanced_split``), and every row is routed (no
expert-parallel sentinel rows). It decides two figures only: the ADD of the K-cut case, and
the bytes of b read when b holds one matrix per group (the groups that receive rows:
``min(G, S)`` of them). Real, fake and meta tensors count alike.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta
from op_formulas.cost import Cost, TensorMeta
from op_formulas.matmul import matmul_cost
from op_formulas.registry import UnsupportedCall, formula, gathers_parameters

aten = torch.ops.aten


def groups_used(groups: int, length: int) -> int:
    """Non-empty groups when ``length`` rows are cut into ``groups`` (the routing assumption)."""
    return min(groups, length)


@formula(aten._grouped_mm)
def grouped_mm(a: TensorMeta, b: TensorMeta, offs: Any = None, bias: Any = None, out_dtype: Any = None, *,
               result: Any, **kwargs: Any) -> Cost:
    """G products over one cut dim: MULT = MACs = the plain product's; ADD per module docstring;
    a bias adds 1 ADD per output element."""
    offs, bias = kwargs.get("offs", offs), kwargs.get("bias", bias)
    out = first_meta(result)
    read_b = b.nbytes
    if len(a.shape) == 3 and len(b.shape) == 3:                   # [G,M,K] x [G,K,N]: bmm
        g, m, k = a.shape
        cost = matmul_cost(m, b.shape[2], k, g)
    elif len(a.shape) == 2 and len(b.shape) == 3:                 # [S,K] x [G,K,N]: rows cut
        (s, k), (g, _, n) = a.shape, b.shape
        cost = matmul_cost(s, n, k)
        read_b = groups_used(g, s) * k * n * b.itemsize
    elif len(a.shape) == 3 and len(b.shape) == 2:                 # [G,M,K] x [K,N]: columns cut
        (g, m, k), n = a.shape, b.shape[1]
        cost = matmul_cost(m, n, k)
    elif len(a.shape) == 2 and len(b.shape) == 2:                 # [M,K] x [K,N]: K cut, out [G,M,N]
        (m, k), n = a.shape, b.shape[1]
        g = out.shape[0]
        cost = Cost(mult=m * n * k, macs=m * n * k, add=m * n * (k - groups_used(g, k)))
    else:
        raise UnsupportedCall(f"_grouped_mm of {len(a.shape)}-D x {len(b.shape)}-D operands (2-D or 3-D only)")
    if bias is not None:
        cost = cost + Cost(add=out.numel)
    read = a.nbytes + read_b + sum(t.nbytes for t in (offs, bias) if isinstance(t, TensorMeta))
    return cost.with_bytes(read=read, written=out.nbytes)


gathers_parameters(1, aten._grouped_mm)   # [S,K] x [G,K,N] reads only the experts its rows route to


@formula(aten.histc)
def histc(x: TensorMeta, bins: int = 100, min: Any = 0, max: Any = 0, *, result: Any, **kwargs: Any) -> Cost:
    """Per input element: 2 CMP (the range test at both ends), 1 ADD + 1 MULT + 1 DIV (the bin
    index (x - min) * bins / (max - min)), 1 OTHER (its floor) and 1 ADD (the bin's count).
    ``min == max`` (the default) first finds the range: 2*(n-1) CMP."""
    n = x.numel
    per_element = Cost(cmp=2, add=2, mult=1, div=1, other=1) * n
    if min == max:
        per_element = per_element + Cost(cmp=2 * (n - 1) if n else 0)
    return per_element
