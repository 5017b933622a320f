"""The bundled model catalog (catalog.yaml) and transformers configs from anywhere.

``load_config(spec)`` takes a catalog name ("llama-3.2-1b"), a path to a config.json or to a
folder holding one, or a hub id ("meta-llama/Llama-3.1-8B", only where the hub is reachable).
dispatchprof never runs remote code: a config that asks for it (``auto_map``) is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from dispatchprof.errors import ModelSpecError
from dispatchprof.results.files import read_json


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    model_type: str
    parameters: int
    config: dict
    auto: str = "causal_lm"


def catalog() -> dict[str, CatalogEntry]:
    """The bundled models by name."""
    text = resources.files("dispatchprof.llm").joinpath("catalog.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)["models"]
    return {name: CatalogEntry(name, e["model_type"], e["parameters"], e["config"], e.get("auto", "causal_lm"))
            for name, e in data.items()}


def load_config(spec: str | os.PathLike) -> Any:
    """A transformers config from a catalog name, a config.json (or its folder), or a hub id."""
    import transformers

    text = os.fspath(spec)
    entry = catalog_entry(text)
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


def catalog_entry(spec: Any) -> CatalogEntry | None:
    """The catalog entry a model spec names (case-insensitive), or None."""
    if not isinstance(spec, (str, os.PathLike)):
        return None
    return {n.lower(): e for n, e in catalog().items()}.get(os.fspath(spec).lower())
