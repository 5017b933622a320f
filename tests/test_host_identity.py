"""A tensor read from the host is named by a serial number while its storage lives
(dispatchprof.count.ledger.TensorLedger.host_identity), not by its storage's address, which a later
storage can take: the simulator moves each host tensor once, and the same count always moves the
same bytes (a training step's optimizer energy once varied between identical counts by 1e-8 J)."""

import gc

import numpy as np
import torch

from dispatchprof import OpCounter
from dispatchprof.count.ledger import storage_key
from dispatchprof.results.records import HOST


def test_a_later_host_tensor_at_a_reused_address_is_another_tensor():
    arrays = [np.full(4, float(i), dtype=np.float32) for i in range(20)]     # made before the count
    addresses = []
    with OpCounter() as c:
        for a in arrays:
            x = torch.from_numpy(a)          # no aten op: a tensor of the host, as a user's input
            addresses.append(storage_key(x))
            x.sum()
            x.sum()                          # read twice while it lives
            del x
            gc.collect()
    assert len(set(addresses)) < len(addresses)          # the allocator gave some address again
    reads = [r.inputs for r in c.profile.records]
    assert all(len(i) == 1 and i[0][:2] == (HOST, 16) for i in reads)
    names = [i[0][2] for i in reads]
    assert names[0::2] == names[1::2]                    # one name while the tensor lives
    assert len(set(names)) == len(arrays)                # a new one for every tensor


def test_identical_counts_move_identical_host_bytes():
    from tests.conftest import tiny_model
    from dispatchprof.sim.placement import placement_of
    from dispatchprof.train.count import count_model, time_model

    h100 = placement_of("H100-SXM").devices[0]
    net = tiny_model("llama", dtype=torch.bfloat16, num_hidden_layers=3)
    energies = {time_model(count_model(net, "tiny", 2, 64), h100).phases["optimizer"].dynamic_j for _ in range(4)}
    assert len(energies) == 1
