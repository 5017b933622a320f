"""Ops that gather from a parameter (op_formulas.registry.PARAMETER_GATHERS) read only the rows they
gather: their records' parameter bytes are those rows, and the simulator charges those, not the
whole table (docs/counting.md, Bytes)."""

import pytest
import torch
from torch import nn

from dispatchprof import OpCounter

NS = 1e-9


def _record(model, x, op, **counter):
    with OpCounter(**counter) as c:
        model(x)
    (r,) = [r for r in c.profile.records if r.op == op]
    return r, c


def test_embedding_reads_the_gathered_rows_of_its_table():
    # a 1000 x 64 fp32 table (256,000 bytes); 3 int64 indices gather 3 rows of 256 bytes
    r, _ = _record(nn.Embedding(1000, 64), torch.tensor([[1, 2, 3]]), "aten.embedding")
    assert r.cost.bytes_read == 3 * 8 + 3 * 256 and r.cost.bytes_written == 3 * 256
    assert (r.param_bytes, r.param_elements) == (768, 192)


def test_a_row_gathered_twice_is_read_twice():
    # 30 indices into a 10-row table: 30 rows of 256 bytes, more than the table's 2,560
    r, _ = _record(nn.Embedding(10, 64), torch.tensor([[1, 2, 3] * 10]), "aten.embedding")
    assert (r.param_bytes, r.param_elements) == (30 * 256, 30 * 64)


def test_embedding_bag_reads_its_rows_not_its_table():
    # mode mean, one bag of 3 rows: indices 3 x 8 bytes, offsets 1 x 8, rows 3 x 256
    r, _ = _record(nn.EmbeddingBag(1000, 64), torch.tensor([[1, 2, 3]]), "aten._embedding_bag")
    assert r.cost.bytes_read == 24 + 8 + 768
    assert (r.param_bytes, r.param_elements) == (768, 192)


def test_an_index_buffer_is_read_whole_beside_the_rows():
    class Positions(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Embedding(512, 16)
            self.register_buffer("ids", torch.arange(512).unsqueeze(0))

        def forward(self, n):
            return self.table(self.ids[:, :n])

    # a buffer counts with the parameters: 5 int64 positions (40 bytes) + 5 rows of 64 bytes
    r, _ = _record(Positions(), 5, "aten.embedding")
    assert (r.param_bytes, r.param_elements) == (40 + 5 * 64, 5 + 5 * 16)


def test_the_simulator_charges_the_rows_not_the_table():
    # PIM-AI-1chip memory 102.4 GB/s: reads 24 + 768, writes 768 = 1,560 bytes, not the 256,000-byte table
    r, c = _record(nn.Embedding(1000, 64), torch.tensor([[1, 2, 3]]), "aten.embedding", devices="PIM-AI-1chip")
    (op,) = [o for o in c.simulated().ops if o.t_memory > 0]
    assert op.t_memory == pytest.approx(1560 / 102.4e9, abs=1e-15)             # 15.23 ns


def test_a_gather_from_an_activation_leaves_the_parameters_read_whole():
    class FromActivations(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("ids", torch.tensor([[0, 2]]))

        def forward(self, table):
            return nn.functional.embedding(self.ids, table * 2)

    # the table (4 x 8 fp32, an activation) is gathered: 2 rows; the index buffer (16 bytes) is read whole
    r, _ = _record(FromActivations(), torch.randn(4, 8), "aten.embedding")
    assert r.cost.bytes_read == 16 + 2 * 32 and (r.param_bytes, r.param_elements) == (16, 2)
