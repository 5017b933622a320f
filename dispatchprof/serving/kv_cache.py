"""The KV cache of a served model per token: the dtypes it can be stored in and how a ``kv_dtype``
scales its bytes against the model's own dtype (its share of a tensor-parallel device:
`dispatchprof.sim.parallel.kv_shards`)."""

from __future__ import annotations

import torch

from dispatchprof.llm.generation import kv_element_bits, model_bits
from dispatchprof.sim.device import WEIGHT_BITS

#: Storage bits of the KV-cache dtypes (``kv_dtype``): those weights can be stored in.
KV_BITS = WEIGHT_BITS


def kv_scale(kv_dtype: str | None, model: torch.nn.Module) -> float:
    """kv_bits / bits of the model's cache dtype (1 without ``kv_dtype``)."""
    bits = kv_element_bits(model, kv_dtype)
    return 1.0 if bits is None else bits / model_bits(model)
