"""transformers glue: the bundled model catalog, configs from anywhere, weightless models.

``load_config(spec)`` takes a catalog name ("llama-3.2-1b"), a path to a config.json or to a
folder holding one, or a hub id ("meta-llama/Llama-3.1-8B", only where the hub is reachable).
dispatchprof never runs remote code: a config that asks for it (``auto_map``) is refused.
``build_model(spec, dtype)`` builds the model with no weights on fake tensors.

Mixture-of-experts models are built with the "dispatchprof_balanced" experts implementation
(registered in transformers' ExpertsInterface): routing is assumed balanced top-k, every expert
processes exactly T*k/E of the T*k token-expert pairs (the first T*k mod E experts one more),
so counting needs no routing values, which fake tensors do not have.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from typing import Any

import torch
import yaml

from dispatchprof.fake import fake_model

BALANCED_EXPERTS = "dispatchprof_balanced"


class ModelSpecError(ValueError):
    """A model name, path or hub id that cannot be turned into a config."""


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    model_type: str
    parameters: int
    config: dict
    auto: str = "causal_lm"


def catalog() -> dict[str, CatalogEntry]:
    """The bundled models by name."""
    text = resources.files("dispatchprof").joinpath("catalog.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)["models"]
    return {name: CatalogEntry(name, e["model_type"], e["parameters"], e["config"], e.get("auto", "causal_lm"))
            for name, e in data.items()}


def load_config(spec: str | os.PathLike) -> Any:
    """A transformers config from a catalog name, a config.json (or its folder), or a hub id."""
    import transformers

    text = os.fspath(spec)
    entry = {n.lower(): e for n, e in catalog().items()}.get(text.lower())
    if entry is not None:
        return transformers.AutoConfig.for_model(entry.model_type, **entry.config)
    path = os.path.join(text, "config.json") if os.path.isdir(text) else text
    if os.path.isfile(path):
        return _config_from_file(path)
    if text.endswith(".json") or os.sep in text and not _looks_like_hub_id(text):
        raise ModelSpecError(f"{text}: no such config file")
    if _looks_like_hub_id(text):
        return _config_from_hub(text)
    raise ModelSpecError(f"unknown model {text!r}; bundled models: {', '.join(catalog())} "
                         f"(or give a config.json path, a folder holding one, or a hub id such as org/name)")


def _looks_like_hub_id(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and all(parts) and not os.path.exists(text)


def _config_from_file(path: str) -> Any:
    import transformers

    from dispatchprof.export import read_json

    data = read_json(path, "config", ModelSpecError)
    if not isinstance(data, dict):
        raise ModelSpecError(f"{path}: a config.json holds a JSON object")
    if "auto_map" in data:
        raise ModelSpecError(f"{path}: this config asks for remote code (auto_map); dispatchprof never runs "
                             f"remote code (trust_remote_code is never set)")
    model_type = data.pop("model_type", None)
    if not model_type:
        raise ModelSpecError(f"{path}: missing field 'model_type' (llama, mistral, gpt2, ...)")
    try:
        return transformers.AutoConfig.for_model(model_type, **data)
    except ValueError as e:
        raise ModelSpecError(f"{path}: {e}") from None


def _config_from_hub(hub_id: str) -> Any:
    import transformers

    try:
        return transformers.AutoConfig.from_pretrained(hub_id, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001  (the hub client raises many types; all mean "not here")
        raise ModelSpecError(f"{hub_id}: could not load the config from the model hub ({type(e).__name__}); "
                             f"this machine may have no network: use a bundled model ({', '.join(catalog())}) "
                             f"or a local config.json") from None


def build_model(spec: Any, dtype: torch.dtype | None = torch.bfloat16) -> torch.nn.Module:
    """A weightless model (fake tensors) from a catalog name, path, hub id or config."""
    import transformers

    config = load_config(spec) if isinstance(spec, (str, os.PathLike)) else spec
    auto = "causal_lm"
    if isinstance(spec, (str, os.PathLike)):
        entry = {n.lower(): e for n, e in catalog().items()}.get(os.fspath(spec).lower())
        auto = entry.auto if entry is not None else auto
    kwargs: dict[str, Any] = {}
    if _is_moe(config):
        register_balanced_experts()
        kwargs["experts_implementation"] = BALANCED_EXPERTS
    cls = transformers.AutoModel if auto == "model" else transformers.AutoModelForCausalLM
    try:
        return fake_model(lambda: cls.from_config(config, **kwargs), dtype=dtype)
    except ValueError as e:
        raise ModelSpecError(f"transformers cannot build {type(config).__name__} as a "
                             f"{'model' if auto == 'model' else 'causal LM'}: {e}") from None


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
    weights and summed over k per token, as transformers' own implementations do."""
    num_tokens, hidden = hidden_states.shape[0], hidden_states.shape[-1]
    top_k = top_k_index.shape[-1]
    selected = hidden_states.repeat_interleave(top_k, dim=0)            # (T*k, H)
    outputs, start = [], 0
    for e, n in enumerate(balanced_split(num_tokens * top_k, self.num_experts)):
        if n == 0:
            continue
        x = selected[start:start + n]
        if getattr(self, "has_gate", True):
            gate, up = torch.nn.functional.linear(x, self.gate_up_proj[e]).chunk(2, dim=-1)
            h = self.act_fn(gate) * up
        else:
            h = self.act_fn(torch.nn.functional.linear(x, self.up_proj[e]))
        outputs.append(torch.nn.functional.linear(h, self.down_proj[e]))
        start += n
    out = torch.cat(outputs) * top_k_weights.reshape(-1, 1).to(selected.dtype)
    return out.view(num_tokens, top_k, hidden).sum(dim=1).to(hidden_states.dtype)
