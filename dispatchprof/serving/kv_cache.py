"""The KV cache of a served model per token: the dtypes it can be stored in, its share of a
tensor-parallel device, and how a ``kv_dtype`` scales its bytes against the model's own dtype."""

from __future__ import annotations

import torch

from dispatchprof.llm.generation import kv_element_bits, model_bits
from dispatchprof.sim.device import WEIGHT_BITS

#: Storage bits of the KV-cache dtypes (``kv_dtype``): those weights can be stored in.
KV_BITS = WEIGHT_BITS


def kv_shards(config: object, tp: int) -> int:
    """Over how many of a tensor-parallel group's ``tp`` devices a token's KV cache is split:
    ``tp`` (each holds its heads' keys and values), but 1 for multi-head latent attention (a
    config with ``kv_lora_rank``: DeepSeek-V2/V3, Kimi-K2): its cache is one latent of
    kv_lora_rank + qk_rope_head_dim elements per token and layer, which every device of the group
    holds whole (vLLM's and SGLang's MLA backends keep one KV head per rank)."""
    return 1 if getattr(config, "kv_lora_rank", None) else tp


def kv_scale(kv_dtype: str | None, model: torch.nn.Module) -> float:
    """kv_bits / bits of the model's cache dtype (1 without ``kv_dtype``)."""
    bits = kv_element_bits(model, kv_dtype)
    return 1.0 if bits is None else bits / model_bits(model)
