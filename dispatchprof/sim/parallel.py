"""Tensor parallelism: a model's attention and MLP blocks split over N devices (Megatron style).

Each attention block (a module class name with "Attention" or "Attn") and each feed-forward block
(MLP, FeedForward, FFN, MoE, Experts) is split over the N devices of the group: its heads and its
intermediate columns, so every op inside runs 1/N of its work and traffic on each device (weights
and KV cache included). Everything else (embeddings, norms, residual adds, the LM head) runs whole
on every device. After each block (its last op, the row-parallel projection) the N partial
outputs are summed by an all-reduce of that op's output bytes: two all-reduces per layer, timed
by `dispatchprof.sim.timing.allreduce` (ring: 2 (N-1)/N * bytes over the interconnect, plus its
latency). Every device of the group runs the same ops, so one device is simulated and the group's
energy is N times its energy.

**Replicated inside a block.** Multi-head latent attention (DeepSeek-V3/R1, Kimi-K2) computes one
latent per token that all heads share: engines run its down-projections and their norms whole on
every device of the group (vLLM's ``DeepseekV2MLAAttention``: ``fused_qkv_a_proj`` with
``disable_tp=True``, ``kv_a_layernorm`` over the whole latent; SGLang's ``deepseek_v2.py`` alike)
and every device caches and reads the whole latent. So inside a split block, the children named in
`REPLICATED_CHILDREN` run whole (share 1), and so does every op that reads no parameter and whose
inputs made inside the block all come from ops that run whole (the key's rotary, the latent's
concatenation, the cache update); it all-reduces nothing. An op that is split (share 1/N) but reads
a tensor made whole inside its block (the fused attention reading the cached latent, ``q_b_proj``
reading ``q_a_layernorm``'s output) reads those bytes whole on every device: they are its
``whole_bytes``, kept out of the 1/N (`dispatchprof.sim.timing`). A block with no replicated child
splits every op as above.

**Replicated KV heads.** With fewer key/value heads than devices, engines replicate them (vLLM's
``QKVParallelLinear``: each device holds max(1, kv_heads // N) heads), so an attention op reads
that share of its keys and values (`kv_fraction`), not 1/N: the difference is added to its
``whole_bytes`` (W = KV bytes x (fraction - 1/N) / (1 - 1/N), so that the 1/N of the rest plus W
is the fraction of the keys and values); its arithmetic stays 1/N (the query heads are split).

Checked: N must divide the attention heads of every attention op (query [B, heads, T, D]; which
records are attention ops is `dispatchprof.sim.attention`'s rule), and the device needs an
interconnect figure.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from dispatchprof.results.records import OpRecord
from dispatchprof.sim.attention import reads_kv
from dispatchprof.sim.device import Device

#: Module classes split over the group (searched in the class name, case-insensitive).
SPLIT_BLOCKS = re.compile(r"attention|attn|mlp|feedforward|ffn|moe|experts", re.I)
#: Children of a split block that every device runs whole (module docstring): multi-head latent
#: attention's down-projections and norms (dispatchprof.llm.mla.LatentAttention's names).
REPLICATED_CHILDREN = frozenset({"q_a_proj", "q_a_layernorm", "kv_a_proj_with_mqa", "kv_a_layernorm"})


def check_tp(tp: int, heads: Sequence[int], devices: Sequence[Device], where: str = "tp") -> int:
    """``tp`` itself, or a ValueError: not a whole number >= 1, not dividing the attention
    ``heads``, or a device with no interconnect figure."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"{where} must be a whole number >= 1, got {tp!r}")
    if tp == 1:
        return tp
    for h in sorted(set(heads)):
        if h % tp:
            allowed = ", ".join(str(n) for n in range(1, h + 1) if h % n == 0)
            raise ValueError(f"{where}={tp} does not divide the model's {h} attention heads; allowed: {allowed}")
    for d in devices:
        if d.interconnect_gb_per_s is None:
            raise ValueError(f"{where}={tp} needs a device-to-device interconnect, and {d.name!r} has no "
                             f"interconnect_gb_per_s figure; give its profile one, or use tp=1")
    return tp


def split_blocks(scopes: Mapping[str, str], parents: Mapping[str, str | None]) -> dict[str, str]:
    """scope -> the outermost split block (attention or MLP) that holds it; scopes outside any
    block are left out."""
    out: dict[str, str] = {}
    for scope in scopes:
        chain, s = [], scope
        while s:
            chain.append(s)
            s = parents.get(s) or ""
        block = next((c for c in reversed(chain) if SPLIT_BLOCKS.search(scopes.get(c, ""))), None)
        if block is not None:
            out[scope] = block
    return out


def tp_split(records: Sequence[OpRecord], blocks: Mapping[str, str], tp: int) -> list[tuple[float, int, int]]:
    """Per record: (this device's share, bytes all-reduced after it, bytes it reads whole). A
    block's last op before the stream leaves the block all-reduces its output, if it is split;
    ops replicated inside a block run whole (module docstring)."""
    n = len(records)
    if tp == 1:
        return [(1.0, 0, 0)] * n
    whole_made = [False] * n            # record k runs whole inside a split block
    out = []
    for i, r in enumerate(records):
        block = blocks.get(r.scope)
        if block is None:
            out.append((1.0, 0, 0))
            continue
        inside = [(p, b) for p, b, _ in r.inputs if p >= 0 and blocks.get(records[p].scope) == block]
        fed_whole = not r.param_bytes and inside and all(whole_made[p] for p, _ in inside)
        if _replicated_child(r.scope, block) or fed_whole:
            whole_made[i] = True
            out.append((1.0, 0, 0))
            continue
        last = i + 1 == n or blocks.get(records[i + 1].scope) != block
        whole = sum(b for p, b in inside if whole_made[p])
        kv_heads = r.shapes[1][1] if reads_kv(r) and len(r.shapes) > 1 and len(r.shapes[1]) == 4 else tp
        if kv_heads < tp and not any(whole_made[p] for p, _, _ in r.inputs[1:3] if p >= 0):
            whole += (r.inputs[1][1] + r.inputs[2][1]) * (kv_fraction(kv_heads, tp) - 1 / tp) / (1 - 1 / tp)
        out.append((1.0 / tp, (r.cost.bytes_written or 0) if last else 0, whole))
    return out


def kv_fraction(kv_heads: int, tp: int) -> float:
    """The share of ``kv_heads`` key/value heads one of ``tp`` devices holds: max(1, kv_heads //
    tp) / kv_heads (module docstring: replicated when there are fewer heads than devices)."""
    return max(1, kv_heads // tp) / kv_heads


def kv_shards(config: object, tp: int) -> float:
    """Over how many of a tensor-parallel group's ``tp`` devices a token's KV cache is split:
    each device holds max(1, kv_heads // tp) of the config's ``num_key_value_heads`` (vLLM's
    ``QKVParallelLinear``, model_executor/layers/linear.py: "Number of KV heads is less than TP size,
    so we replicate the KV heads across multiple tensor parallel GPUs"), so kv_heads / that: ``tp``
    where the heads divide evenly, kv_heads where there are fewer (``tp`` when the config names no
    KV heads), as attention ops read them (`tp_split`). 1 for multi-head latent attention (a
    config with ``kv_lora_rank``: DeepSeek-V2/V3, Kimi-K2): its cache is one latent of
    kv_lora_rank + qk_rope_head_dim elements per token and layer, which every device of the group
    holds whole (vLLM's and SGLang's MLA backends keep one KV head per rank)."""
    if getattr(config, "kv_lora_rank", None):
        return 1
    heads = getattr(config, "num_key_value_heads", None)
    if not isinstance(heads, int) or heads < 1:
        return tp
    return 1 / kv_fraction(heads, tp)


def split_weights(scope: str, blocks: Mapping[str, str]) -> bool:
    """Whether the parameters of ``scope`` are split over the group (in a split block of
    `split_blocks` ``blocks``, outside its `REPLICATED_CHILDREN`)."""
    block = blocks.get(scope)
    return block is not None and not _replicated_child(scope, block)


def _replicated_child(scope: str, block: str) -> bool:
    """Whether ``scope`` lies in a child of ``block`` named in `REPLICATED_CHILDREN`."""
    return scope.startswith(block + ".") and scope[len(block) + 1:].split(".", 1)[0] in REPLICATED_CHILDREN
