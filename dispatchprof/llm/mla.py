"""Multi-head latent attention (DeepSeek-V3/R1, Kimi-K2 and K2.5) as serving engines run it.

transformers' ``DeepseekV3Attention`` expands the cached latent through ``kv_b_proj`` into per-head
K (nope + rope) and V at every step, decode included. Engines decode in the weight-absorbed form
and prefill in the expanded ("MHA") form. vLLM 0.11, ``vllm/v1/attention/backends/mla/common.py``,
module docstring: "Deepseek's MLA attention ... we use the *absorbed* form for decode ... and the
MHA form (compute-friendly) for prefill", its decode path being "q_nope @ W_UK -> ql_nope;
attention over [ql_nope, q_pe] and the cached [kv_c, k_pe]; @ W_UV -> o_proj". SGLang
(``python/sglang/srt/models/deepseek_v2.py``, ``forward_absorb``) and the DeepSeek-V3 reference
inference code (``inference/model.py``, ``attn_impl = "absorb"``) use the same algebra.

``LatentAttention`` computes exactly the same function as ``DeepseekV3Attention`` with the same
weights (absorption only reassociates matmuls), and:

- caches only the latent: one tensor of ``kv_lora_rank + qk_rope_head_dim`` elements per token
  and layer, ``[kv_a_layernorm(c_kv) ; rope(k_pe)]``, as the cache's keys (its values are
  zero-wide), the figure ``dispatchprof/serving/kv_cache.py`` sizes capacity with;
- decodes (``q_len <= DECODE_THRESHOLD``, vLLM's ``reorder_batch_threshold`` of 1 without
  speculative decoding) absorbed: ``q_lat = q_nope @ W_UK`` (heads x qk_nope x kv_lora MACs per
  token), one fused attention of all heads against the single latent head (scores
  ``kv_lora + rope`` wide, values the first ``kv_lora`` columns of the same tensor), the
  latent output ``@ W_UV`` (heads x kv_lora x v_head), then ``o_proj``;
- prefills (``q_len > DECODE_THRESHOLD``) in the form ``prefill`` names: ``"expanded"`` (what
  ``build_model`` installs: vLLM's, TensorRT-LLM's and SGLang's MHA prefill: ``kv_b_proj`` expands
  K/V of every cached and new token, then causal attention with qk_nope + rope wide keys and v_head
  wide values), or ``"absorbed"`` (the decode algebra for every query, SGLang's ``forward_absorb``
  form, which it runs for extend steps with a cached prefix).

Each form runs in its own child module, ``absorbed`` (`AbsorbedCore`) and ``expanded``
(`ExpandedCore`, present where ``prefill`` is ``"expanded"``, after ``kv_b_proj`` ran on the
cached and new latents): their ops are attributed to ``self_attn.absorbed`` and
``self_attn.expanded``, so a report shows decode and prefill attention apart, and the serving cost
model (``dispatchprof.serving.op_streams``) sees two op streams that agree outside the attention
cores: it runs a mixed step's decodes through the absorbed core and its prefills through the
expanded one, as vLLM does. The expanded form (the engines' prefill) is the default, what
``build_model`` installs; `set_mla_prefill` (each `LatentAttention.set_prefill`) changes it.

The absorbed prefill costs ``heads x (2 kv_lora + rope)`` MACs per query-key pair where the
expanded one costs ``heads x (qk_nope + rope + v_head)`` plus the expansion ``kv_b_proj`` per key
token: for DeepSeek-V3 (1,088 against 320 per head) absorbed prefill attention is about 3.4x the
engines' MHA form; decode is the same in both.

Counting note: the fused attention op's key (the latent, ``kv_lora + rope`` per token) and value
(the latent's first ``kv_lora`` columns) are views of one storage, read once as FlashMLA reads them
(docs/counting.md, Attention): ``(kv_lora + rope) x dtype bytes`` per cached token and layer, the
value input charged no bytes of its own.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dispatchprof.llm.module_swaps import swap_modules

#: Query lengths up to this are decoded absorbed (vLLM MLACommonMetadataBuilder's
#: reorder_batch_threshold: 1 when no speculative tokens are proposed).
DECODE_THRESHOLD = 1
#: How multi-token steps (prefill) are computed (module docstring).
PREFILL_FORMS = ("absorbed", "expanded")


def is_mla(config: Any) -> bool:
    """Whether ``config`` describes multi-head latent attention (it has ``kv_lora_rank``)."""
    return bool(getattr(config, "kv_lora_rank", None))


class LatentAttention(nn.Module):
    """A DeepseekV3Attention's weights, run as engines run them (see the module docstring).

    Built from the original module: its submodules (q_a_proj, q_a_layernorm, q_b_proj or q_proj,
    kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj) become this module's children under
    the same names, so parameters and scope names are unchanged. Its class name says "Attention":
    `dispatchprof.sim.parallel` splits it over a tensor-parallel group as any attention block."""

    def __init__(self, attn: nn.Module, prefill: str = "expanded") -> None:
        super().__init__()
        for name in ("config", "layer_idx", "num_heads", "q_lora_rank", "qk_rope_head_dim",
                     "kv_lora_rank", "v_head_dim", "qk_nope_head_dim", "qk_head_dim",
                     "scaling", "is_causal", "attention_dropout"):
            setattr(self, name, getattr(attn, name))
        for name, child in attn.named_children():
            self.add_module(name, child)
        self.q_proj = getattr(attn, "q_proj", None) if self.q_lora_rank is None else None
        self._rotary = _rotary_fn(attn)
        self.absorbed = AbsorbedCore(self.num_heads, self.qk_nope_head_dim, self.v_head_dim, self.kv_lora_rank,
                                     self.scaling)
        self.set_prefill(prefill)

    def set_prefill(self, prefill: str) -> None:
        """Compute multi-token steps in ``prefill``'s form (`PREFILL_FORMS`, module docstring);
        the ``expanded`` child is there only in the expanded form."""
        if prefill not in PREFILL_FORMS:
            raise ValueError(f"prefill must be one of {PREFILL_FORMS}, not {prefill!r}")
        self.prefill = prefill
        if prefill == "expanded" and not hasattr(self, "expanded"):
            self.expanded = ExpandedCore(self.num_heads, self.qk_nope_head_dim, self.v_head_dim, self.scaling)
        elif prefill == "absorbed" and hasattr(self, "expanded"):
            del self.expanded

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                attention_mask: torch.Tensor | None, past_key_values: Any = None, **kwargs: Any
                ) -> tuple[torch.Tensor, None]:
        b, s = hidden_states.shape[:-1]
        if self.q_lora_rank is None:
            q = self.q_proj(hidden_states)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        q = q.view(b, s, self.num_heads, self.qk_head_dim).transpose(1, 2)  # (B, H, S, nope+rope)
        q_nope, q_rot = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        ckv = self.kv_a_proj_with_mqa(hidden_states)
        c_kv, k_rot = torch.split(ckv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        c_kv = self.kv_a_layernorm(c_kv).view(b, 1, s, self.kv_lora_rank)
        k_rot = k_rot.view(b, 1, s, self.qk_rope_head_dim)
        q_rot, k_rot = self._rotary(q_rot, k_rot, *position_embeddings)
        latent = torch.cat((c_kv, k_rot), dim=-1)  # (B, 1, S, kv_lora + rope)
        if past_key_values is not None:
            latent, _ = past_key_values.update(latent, latent[..., :0], self.layer_idx)
        if s <= DECODE_THRESHOLD or self.prefill == "absorbed":
            out = self.absorbed(q_nope, q_rot, latent, attention_mask, self.kv_b_proj.weight)
        else:                         # K/V of every cached and new token expanded, then the MHA form
            c_all, k_all = torch.split(latent, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
            out = self.expanded(q_nope, q_rot, self.kv_b_proj(c_all), k_all, attention_mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1)), None


class AbsorbedCore(nn.Module):
    """Attention in the latent space (decode; every query in the absorbed prefill form): returns
    (B, H, S, v_head). ``q_lat = q_nope @ W_UK``, one fused attention of all heads against the
    single latent head, the latent output ``@ W_UV``; the per-head products are bmm over heads, as
    vLLM's MLACommonImpl (``_v_up_proj``: x.transpose(0, 1), torch.bmm(x, W_UV), transpose back),
    so no weight is copied per sequence. W_UK and W_UV are ``kv_b_proj``'s weight split per head,
    given at each call (this module holds no parameter)."""

    def __init__(self, heads: int, nope: int, v_head: int, kv_lora: int, scaling: float) -> None:
        super().__init__()
        self.heads, self.nope, self.v_head, self.kv_lora, self.scaling = heads, nope, v_head, kv_lora, scaling
        self.is_causal = True           # its fused attention is causal under a mask too (the counter's hint)

    def forward(self, q_nope: torch.Tensor, q_rot: torch.Tensor, latent: torch.Tensor, mask: torch.Tensor | None,
                kv_b_weight: torch.Tensor) -> torch.Tensor:
        b, h, s, _ = q_nope.shape
        w = kv_b_weight.view(self.heads, self.nope + self.v_head, self.kv_lora)
        w_uk, w_uv = w[:, :self.nope], w[:, self.nope:]      # (H, nope, kv_lora), (H, v, kv_lora)
        q_lat = torch.bmm(q_nope.transpose(0, 1).reshape(h, b * s, -1), w_uk)  # (H, B*S, kv_lora)
        q_lat = q_lat.view(h, b, s, -1).transpose(0, 1)
        query = torch.cat((q_lat, q_rot), dim=-1)  # (B, H, S, kv_lora + rope)
        key = latent.expand(-1, h, -1, -1)  # one latent head shared by all heads (MQA), a view
        value = key[..., :self.kv_lora]
        o_lat = _attention(query, key, value, mask, self.scaling)  # (B, H, S, kv_lora)
        o = torch.bmm(o_lat.transpose(0, 1).reshape(h, b * s, -1), w_uv.transpose(1, 2))  # (H, B*S, v)
        return o.view(h, b, s, -1).transpose(0, 1)


class ExpandedCore(nn.Module):
    """Prefill in vLLM's MHA form, after ``kv_b_proj`` expanded every cached and new token's latent
    (``LatentAttention`` runs it, so its parameters stay its own): causal attention with nope +
    rope wide keys and v_head wide values; returns (B, H, S, v_head). Holds no parameter."""

    def __init__(self, heads: int, nope: int, v_head: int, scaling: float) -> None:
        super().__init__()
        self.heads, self.nope, self.v_head, self.scaling = heads, nope, v_head, scaling
        self.is_causal = True           # its fused attention is causal under a mask too (the counter's hint)

    def forward(self, q_nope: torch.Tensor, q_rot: torch.Tensor, kv: torch.Tensor, k_rot: torch.Tensor,
                mask: torch.Tensor | None) -> torch.Tensor:
        b, _, t, _ = kv.shape                                   # kv: (B, 1, T, H * (nope + v))
        kv = kv.view(b, t, self.heads, -1).transpose(1, 2)
        k_nope, value = torch.split(kv, [self.nope, self.v_head], dim=-1)
        key = torch.cat((k_nope, k_rot.expand(-1, self.heads, -1, -1)), dim=-1)
        query = torch.cat((q_nope, q_rot), dim=-1)
        return _attention(query, key, value, mask, self.scaling)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               scale: float) -> torch.Tensor:
    """One fused scaled-dot-product attention; causal from the position when no mask is given."""
    if mask is not None:
        mask = mask[:, :, :, :k.shape[-2]]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    if q.shape[-2] > 1 and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"a step of {q.shape[-2]} queries over {k.shape[-2]} keys needs an attention mask")
    return F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[-2] > 1, scale=scale)


def _rotary_fn(attn: nn.Module) -> Any:
    """transformers' rotary function for this attention (interleaved or not)."""
    import importlib

    mod = importlib.import_module(type(attn).__module__)
    if getattr(attn.config, "rope_interleave", False):
        return mod.apply_rotary_pos_emb_interleave
    return mod.apply_rotary_pos_emb


#: The attention classes `absorb_mla` replaces: transformers' DeepSeek-V3 attention (DeepSeek-V3/R1,
#: Kimi-K2/K2.5 as the catalog builds them). Other MLA variants (GLM-5's, with its sparse-attention
#: indexer) keep transformers' own attention.
ABSORBED_CLASSES = ("DeepseekV3Attention",)


def absorb_mla(model: nn.Module, prefill: str = "expanded") -> int:
    """Replace every attention submodule of ``model`` (one dispatchprof built) whose class is in
    `ABSORBED_CLASSES` by ``LatentAttention(child, prefill)`` over the same weights; returns how many
    were replaced."""
    return swap_modules(model, ABSORBED_CLASSES, lambda child: LatentAttention(child, prefill))


def set_mla_prefill(model: nn.Module, prefill: str) -> int:
    """Compute the multi-token steps of every `LatentAttention` in ``model`` in ``prefill``'s form
    (`PREFILL_FORMS`: ``"expanded"``, what ``build_model`` installs, or ``"absorbed"``); returns how
    many there are."""
    latent = [m for m in model.modules() if isinstance(m, LatentAttention)]
    for m in latent:
        m.set_prefill(prefill)
    return len(latent)
