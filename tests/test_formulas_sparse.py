"""Sparse (COO, CSR) inputs: the bytes they store and the arithmetic of their stored elements
(op_formulas/sparse.py, SparseMeta in op_formulas/cost.py)."""

import warnings

import torch

from dispatchprof import OpCounter
from dispatchprof.count.tensors import stored_bytes

# A [3,4] COO matrix with 4 stored elements: indices int64 [2,4] (64 B) + values float32 [4] (16 B)
INDICES = torch.tensor([[0, 1, 2, 2], [1, 0, 2, 3]])
A = torch.sparse_coo_tensor(INDICES, torch.tensor([1.0, 2.0, 3.0, 4.0]), (3, 4)).coalesce()
A_BYTES = 64 + 16
B = torch.randn(4, 5)                                   # 80 B


def records(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            fn()
    return c, {r.op: r.cost for r in c.profile.records}


def test_sparse_tensors_store_values_and_indices():
    csr = A.to_sparse_csr()       # crow_indices int64 [4] 32 B, col_indices int64 [4] 32 B, values 16 B
    assert stored_bytes(A) == A_BYTES == 80
    assert stored_bytes(csr) == 32 + 32 + 16
    assert stored_bytes(A.to_dense()) == 3 * 4 * 4


def test_sparse_coo_times_dense_counts_the_stored_products():
    # 4 stored elements x N=5 columns: 20 products, each accumulated into the zeroed output
    _, costs = records(lambda: torch.mm(A, B))
    mm = costs["aten.mm"]
    assert (mm.mult, mm.add, mm.macs) == (20, 20, 20)          # the dense rule would give 60 MACs
    assert (mm.bytes_read, mm.bytes_written) == (A_BYTES + 80, 3 * 5 * 4)


def test_torch_sparse_mm_and_addmm():
    # torch.sparse.mm runs _sparse_addmm(zeros, A, B, beta=0): the 20 products, no added term
    _, costs = records(lambda: torch.sparse.mm(A, B))
    assert (costs["aten._sparse_addmm"].mult, costs["aten._sparse_addmm"].add) == (20, 20)
    # addmm(C, A, B): + M*N = 15 ADD for C; alpha=2: + 15 MULT
    c = torch.randn(3, 5)
    _, costs = records(lambda: torch.sparse.addmm(c, A, B, alpha=2))
    assert (costs["aten._sparse_addmm"].mult, costs["aten._sparse_addmm"].add) == (20 + 15, 20 + 15)


def test_dense_times_sparse_and_sparse_matrix_vector():
    # [2,3] @ sparse [3,4] (4 stored): each stored element meets M=2 rows: 8 products
    _, costs = records(lambda: torch.mm(torch.randn(2, 3), A))
    assert (costs["aten.mm"].mult, costs["aten.mm"].macs) == (8, 8)
    # A @ x: one product per stored element
    _, costs = records(lambda: torch.mv(A, torch.randn(4)))
    assert (costs["aten.mv"].mult, costs["aten.mv"].add) == (4, 4)


def test_csr_matmul_counts_like_coo():
    csr = A.to_sparse_csr()
    _, costs = records(lambda: csr @ B)
    assert costs["aten.mm"].macs == 20
    assert costs["aten.mm"].bytes_read == 80 + 80


def test_pointwise_ops_count_the_stored_elements():
    c, costs = records(lambda: (A * 2, torch.sin(A), torch.relu(A)))
    assert (costs["aten.mul"].mult, costs["aten.sin"].other, costs["aten.relu"].cmp) == (4, 4, 4)
    assert costs["aten.mul"].bytes_read == A_BYTES and costs["aten.mul"].bytes_written == A_BYTES
    # sparse + dense: 4 adds into a copy of the dense [3,4]
    _, costs = records(lambda: torch.add(torch.randn(3, 4), A))
    assert costs["aten.add"].add == 4
    assert list(c.unknown_ops()) == []


def test_sums_conversions_and_coalesce():
    _, costs = records(lambda: torch.sparse.sum(A))
    assert sum(c.add for c in costs.values()) == 3                    # 4 stored values: 3 adds
    _, costs = records(lambda: (A.sum(), A.to_sparse_csr().sum()))
    assert costs["aten.sum"].add == 3
    _, costs = records(lambda: A.to_dense())
    assert (costs["aten._to_dense"].ops, costs["aten._to_dense"].bytes_written) == (0, 48)
    # dense [3,4] -> sparse: 12 tests against zero
    _, costs = records(lambda: torch.ones(3, 4).to_sparse())
    assert costs["aten._to_sparse"].cmp == 12
    # 3 stored entries, two at (0, 0): sort 3*ceil(log2 3) = 6 CMP, 3 - 2 = 1 ADD
    dup = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1], [0, 0, 1]]), torch.ones(3), (2, 2))
    _, costs = records(lambda: dup.coalesce())
    assert (costs["aten._coalesce"].cmp, costs["aten._coalesce"].add) == (6, 1)


def test_ops_without_a_sparse_rule_are_unknown_never_a_crash():
    c, _ = records(lambda: (torch.sparse.softmax(A, 1), torch.sparse.sum(A, 1), torch.mm(A, A.t())))
    reasons = {u.op: u.reason for u in c.unknown_ops()}
    assert set(reasons) == {"aten._sparse_softmax", "aten._sparse_sum", "aten.mm"}
    assert reasons["aten.mm"] == "sparse @ sparse: the products depend on the index pattern"
    assert reasons["aten._sparse_sum"].startswith("sparse sum over dims: no rule")


def test_sparse_embedding_gradients_and_sparse_adam():
    # nn.Embedding(sparse=True): the backward builds a COO gradient of the 6 looked-up rows of 4;
    # SGD adds it into the weight: 6*4 = 24 stored elements, 1 ADD + 1 MULT (lr) each
    emb = torch.nn.Embedding(10, 4, sparse=True)
    ids = torch.tensor([[1, 2, 2], [3, 1, 0]])
    c, _ = records(lambda: (emb(ids).sum().backward(), torch.optim.SGD(emb.parameters(), lr=0.1).step()))
    (step,) = [r.cost for r in c.profile.records if r.phase == "optimizer"]
    assert (step.add, step.mult) == (24, 24)
    # the gradient: values [6,4] float32 (96 B) + indices [1,6] int64 (48 B)
    (grad,) = [r.cost for r in c.profile.records if r.op == "aten._sparse_coo_tensor_with_dims_and_tensors"]
    assert grad.bytes_written == 96 + 48
    c, _ = records(lambda: (emb(ids).sum().backward(), torch.optim.SparseAdam(emb.parameters()).step()))
    assert list(c.unknown_ops()) == []
