"""Weightless models from configs: ``build_model(spec, dtype)`` builds a catalog name, a
config.json path, a hub id or a config with no weights on fake tensors.

Mixture-of-experts models are built with the "dispatchprof_balanced" experts implementation
(registered in transformers' ExpertsInterface): routing is assumed balanced top-k, every expert
processes exactly T*k/E of the T*k token-expert pairs (the first T*k mod E experts one more),
so counting needs no routing values, which fake tensors do not have.

Modules that engines run in another form (multi-head latent attention, gpt-oss's attention with
sinks, Qwen3.5's gated delta-nets) are swapped over the same weights for modules computing the same
function in that form: `dispatchprof.llm.engine_forms`.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from dispatchprof.count.fake import fake_inputs, fake_model
from dispatchprof.errors import ModelSpecError
from dispatchprof.llm.catalog import catalog_entry, load_config
from dispatchprof.llm.engine_forms import as_engines_run

BALANCED_EXPERTS = "dispatchprof_balanced"
#: The dtypes a model's tensors can take: canonical short name -> torch dtype.
MODEL_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def token_ids(model: torch.nn.Module, *shape: int) -> torch.Tensor:
    """Fake token ids of ``shape`` in ``model``'s fake mode, below its config's vocab_size."""
    return fake_inputs(model, *shape, high=int(getattr(model.config, "vocab_size", 2) or 2))


def build_model(spec: Any, dtype: torch.dtype | None = torch.bfloat16, *, generator: bool = False
                ) -> torch.nn.Module:
    """A weightless model (fake tensors) from a catalog name, path, hub id or config.
    ``generator=True`` builds an encoder-decoder config as its conditional-generation model
    (T5ForConditionalGeneration, WhisperForConditionalGeneration: the LM head that serving and
    generation need) instead of the bare model."""
    import transformers

    config = load_config(spec) if isinstance(spec, (str, os.PathLike)) else spec
    if generator and getattr(config, "is_encoder_decoder", False):
        return _build_seq2seq(config, dtype)
    entry = catalog_entry(spec)
    auto = entry.auto if entry is not None else default_auto(config)
    kwargs: dict[str, Any] = {}
    if _is_moe(config):
        register_balanced_experts()
        kwargs["experts_implementation"] = BALANCED_EXPERTS
    cls = transformers.AutoModel if auto == "model" else transformers.AutoModelForCausalLM
    try:
        model = fake_model(lambda: cls.from_config(config, **kwargs), dtype=dtype)
    except (ValueError, TypeError) as e:
        raise ModelSpecError(f"transformers cannot build {type(config).__name__} as a "
                             f"{'model' if auto == 'model' else 'causal LM'}: {e}") from None
    return as_engines_run(model)  # MLA, sinks, gated delta-nets (dispatchprof.llm.engine_forms)


def _build_seq2seq(config: Any, dtype: torch.dtype | None) -> torch.nn.Module:
    """An encoder-decoder's text or speech conditional-generation model."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

    speech = getattr(config, "model_type", "") in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES
    cls = transformers.AutoModelForSpeechSeq2Seq if speech else transformers.AutoModelForSeq2SeqLM
    try:
        return fake_model(lambda: cls.from_config(config), dtype=dtype)
    except (ValueError, TypeError) as e:
        raise ModelSpecError(f"transformers cannot build {type(config).__name__} as a sequence-to-sequence "
                             f"model: {e}") from None


def default_auto(config: Any) -> str:
    """How a config without a catalog entry is built: "causal_lm" where transformers has a causal
    LM for its model type and the type is not an encoder (a masked LM such as BERT, unless its
    config says ``is_decoder``), else "model" (the bare encoder or encoder-decoder: BERT, T5)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = getattr(config, "model_type", "")
    encoder = model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not getattr(config, "is_decoder", False)
    causal = model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not encoder
    return "causal_lm" if causal and not getattr(config, "is_encoder_decoder", False) else "model"


def _is_moe(config: Any) -> bool:
    return bool(getattr(config, "num_local_experts", 0) or getattr(config, "num_experts", 0))


def register_balanced_experts() -> None:
    """Register the balanced top-k experts implementation with transformers (once)."""
    from transformers.integrations.moe import ExpertsInterface

    if BALANCED_EXPERTS not in ExpertsInterface._global_mapping:
        ExpertsInterface.register(BALANCED_EXPERTS, balanced_experts_forward)


def balanced_split(pairs: int, experts: int) -> list[int]:
    """Token-expert pairs per expert under balanced routing."""
    base, extra = divmod(pairs, experts)
    return [base + (1 if e < extra else 0) for e in range(experts)]


def balanced_experts_forward(self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                             top_k_weights: torch.Tensor) -> torch.Tensor:
    """Experts under balanced top-k routing: the T*k token copies are cut into E consecutive
    groups (`balanced_split`), group e goes through expert e; outputs are weighted by the router
    weights and summed over k per token, as transformers' own implementations do. The gate is the
    experts class's own (``_apply_gate``: gpt-oss's clamped SwiGLU on interleaved gate/up columns),
    and the weights are read in the layout it declares (`_expert_linear`)."""
    num_tokens, hidden = hidden_states.shape[0], hidden_states.shape[-1]
    top_k = top_k_index.shape[-1]
    selected = hidden_states.repeat_interleave(top_k, dim=0)            # (T*k, H)
    outputs, start = [], 0
    for e, n in enumerate(balanced_split(num_tokens * top_k, self.num_experts)):
        if n == 0:
            continue
        x = selected[start:start + n]
        if getattr(self, "has_gate", True):
            h = self._apply_gate(_expert_linear(self, x, "gate_up_proj", e))
        else:
            h = self.act_fn(_expert_linear(self, x, "up_proj", e))
        outputs.append(_expert_linear(self, h, "down_proj", e))
        start += n
    out = torch.cat(outputs) * top_k_weights.reshape(-1, 1).to(selected.dtype)
    return out.view(num_tokens, top_k, hidden).sum(dim=1).to(hidden_states.dtype)


def _expert_linear(self: Any, x: torch.Tensor, name: str, e: int) -> torch.Tensor:
    """``x`` through expert ``e``'s projection ``name`` in the layout its experts class declares to
    transformers: weights ``(out, in)``, or ``(in, out)`` where ``is_transposed`` (gpt-oss), plus the
    ``<name>_bias`` row where ``has_bias``."""
    weight = getattr(self, name)[e]
    out = x @ weight if getattr(self, "is_transposed", False) else torch.nn.functional.linear(x, weight)
    if getattr(self, "has_bias", False):
        out = out + getattr(self, f"{name}_bias")[e]
    return out
