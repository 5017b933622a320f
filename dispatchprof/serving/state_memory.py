"""Where an engine keeps the per-sequence states of a model with linear-attention layers, and what
that leaves for the KV cache.

A gated delta-net layer (Qwen3.5) holds one state per running sequence whatever its length
(`dispatchprof.llm.gated_delta.SequenceState`), beside the keys and values of its full-attention
layers. Engines place those states in three ways (``state_pool`` of an engine preset,
`dispatchprof.serving.engines`), from the memory M the KV cache would get without them:

- ``shared`` (vLLM's hybrid KV-cache manager): states and KV share one pool of blocks. The
  attention block grows until one layer's block is at least one layer's state: block_size' =
  block_size x ceil(state per layer / (block_size x KV bytes per token and layer)); a block is
  block_size' tokens of every full-attention layer; each running sequence holds
  ceil(states / block bytes) blocks for its states beside its tokens' blocks (the layers grouped
  as vLLM groups them, one block per group of linear-attention layers, when the groups are as large
  as the full-attention layers: Qwen3.5's 15 and 45 layers give 3 blocks); M / block bytes blocks.
- ``split`` (SGLang's hybrid pools): a share ratio / (1 + ratio) of M holds states
  (``mamba_full_memory_ratio``), floor(that / states) of them; at most slots // ``state_slots_per_seq``
  sequences run (its radix cache keeps that many states per running one); the KV cache gets the rest.
- ``reserved`` (TensorRT-LLM's mamba cache manager, one state slot per ``max_batch_size``):
  max_seqs states are taken from M before the KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dispatchprof.llm.gated_delta import SequenceState

STATE_POOLS = ("shared", "split", "reserved")


@dataclass(frozen=True)
class CacheLayout:
    """One replica's cache: ``num_blocks`` blocks of ``block_size`` tokens, ``state_blocks`` more
    held by each running sequence, and at most ``max_seqs`` running sequences."""

    num_blocks: int
    block_size: int
    state_blocks: int
    max_seqs: int


@dataclass(frozen=True)
class StatePool:
    """How an engine places per-sequence states (module docstring)."""

    pool: str = "shared"
    ratio: float = 0.0               # split: state memory / KV memory
    slots_per_seq: int = 1           # split: states kept per running sequence

    def __post_init__(self) -> None:
        if self.pool not in STATE_POOLS:
            raise ValueError(f"state_pool must be one of {', '.join(STATE_POOLS)}, got {self.pool!r}")
        if self.pool == "split" and not self.ratio > 0:
            raise ValueError(f"a split state_pool needs state_memory_ratio > 0, got {self.ratio!r}")


def state_block_size(block_size: int, kv_bytes_per_token: float, state: SequenceState) -> int:
    """A shared pool's block (tokens): the smallest multiple of ``block_size`` whose one layer's
    keys and values take at least one layer's state (module docstring)."""
    per_layer_token = kv_bytes_per_token / state.kv_layers
    return block_size * max(1, math.ceil(state.layer_bytes / (block_size * per_layer_token)))


def cache_layout(memory_bytes: float | None, kv_bytes_per_token: float, state: SequenceState | None,
                 block_size: int, max_seqs: int, pool: StatePool, blocks: int | None = None) -> CacheLayout:
    """The cache of one replica from the ``memory_bytes`` its KV cache would get without states
    (module docstring); ``blocks`` given replaces the number of blocks (then memory may be None,
    and a split pool's sequences are not limited)."""
    if state is None or state.layers == 0:
        return CacheLayout(_blocks(memory_bytes, kv_bytes_per_token * block_size, blocks), block_size, 0, max_seqs)
    if pool.pool == "shared":
        size = state_block_size(block_size, kv_bytes_per_token, state)
        block_bytes = size * kv_bytes_per_token
        return CacheLayout(_blocks(memory_bytes, block_bytes, blocks), size, math.ceil(state.bytes / block_bytes),
                           max_seqs)
    if memory_bytes is None:
        return CacheLayout(_blocks(None, 1.0, blocks), block_size, 0, max_seqs)
    if pool.pool == "split":
        slots = math.floor(memory_bytes * pool.ratio / (1 + pool.ratio) / state.bytes)
        running = min(max_seqs, slots // pool.slots_per_seq)
        if running < 1:
            raise ValueError(f"the linear-attention states ({state.bytes / 1e6:.1f} MB per sequence) leave room for "
                             f"no running sequence in {memory_bytes / 1e9:.2f} GB")
    else:
        slots = running = max_seqs
    left = memory_bytes - slots * state.bytes
    if left <= 0:
        raise ValueError(f"{slots} sequences' linear-attention states ({state.bytes / 1e6:.1f} MB each) take all "
                         f"{memory_bytes / 1e9:.2f} GB of the cache; lower max_seqs")
    return CacheLayout(_blocks(left, kv_bytes_per_token * block_size, blocks), block_size, 0, running)


def _blocks(memory_bytes: float | None, block_bytes: float, given: int | None) -> int:
    """``given``, or the whole blocks of ``block_bytes`` in ``memory_bytes`` (at least one)."""
    if given is not None:
        return given
    blocks = math.floor(memory_bytes / block_bytes)
    if blocks < 1:
        raise ValueError(f"{memory_bytes / 1e9:.2f} GB holds no KV block of {block_bytes / 1e6:.2f} MB")
    return blocks


__all__ = ["STATE_POOLS", "CacheLayout", "StatePool", "cache_layout", "state_block_size"]
