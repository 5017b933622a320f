"""The bundled model catalog (catalog.yaml) and transformers configs from anywhere.

``load_config(spec)`` takes a catalog name ("llama-3.2-1b"), a path to a config.json or to a
folder holding one, or a hub id ("meta-llama/Llama-3.1-8B", only where the hub is reachable).
dispatchprof never runs remote code: a config that asks for it (``auto_map``) is refused.

A config.json is validated before any model is built: an unknown ``model_type`` names the
closest known ones; a field whose type differs from the type of transformers' default for that
model type (``"hidden_size": "abc"``) is refused naming the field; the sizes that shape the
model (`SIZE_FIELDS`) must be whole numbers from 1 to `MAX_SIZE` (a ``*_token_id`` field may be
a list of them, as Llama 3.1's ``eos_token_id`` is). A config from the hub is its config.json,
fetched alone and checked exactly as a local file is (the same function reads both). Every
config, bundled, from a file or from the hub, is refused when it asks for remote code
(``auto_map``), names code from the hub to run in place of an attention or experts layer
(`KERNEL_FIELDS`: a hub repository such as ``kernels-community/flash-attn3``, or a name that
transformers resolves to one, `HUB_KERNEL_NAMES`; ``use_kernels`` and ``kernel_config`` at any
depth), or has more than `MAX_LAYERS` layers or `MAX_EXPERTS` experts (`check_loaded_config`).
A hub id is looked up in the local cache first; when it is not there and the hub cannot be
reached within `HUB_CONNECT_TIMEOUT_S`, it fails at once instead of retrying.
"""

from __future__ import annotations

import difflib
import os
import socket
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from dispatchprof.errors import ModelSpecError
from dispatchprof.results.files import read_json


#: Fields that shape a model: each must be a whole number from 1 to MAX_SIZE where present.
SIZE_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "n_embd", "n_layer", "n_head", "n_positions", "d_model",
               "d_ff", "num_layers", "num_heads", "d_kv")
MAX_SIZE = 1 << 24
#: Layer counts (any of these fields) above this are refused: counting time grows with the layers
#: (the largest bundled model has 126; 1,000 layers already take minutes).
LAYER_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers", "encoder_layers", "decoder_layers")
MAX_LAYERS = 512
#: Expert counts above this are refused: every expert is a module built, held in memory and
#: counted (the largest bundled model has 256).
EXPERT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
MAX_EXPERTS = 1024
HUB_CONNECT_TIMEOUT_S = 3.0
#: Config fields whose value picks the code of an attention or experts layer; transformers 5.23
#: loads a value that names a hub repository (``org/name[@rev][:kernel]``,
#: transformers.integrations.hub_kernels.is_kernel) from the hub with the ``kernels`` package.
KERNEL_FIELDS = ("attn_implementation", "_attn_implementation", "_attn_implementation_internal",
                 "experts_implementation", "_experts_implementation", "_experts_implementation_internal")
#: Values of those fields that transformers 5.23 resolves to a hub kernel: flash attention falls
#: back to kernels-community/flash-attn2 or vllm-flash-attn3 when flash-attn is not installed
#: (modeling_flash_attention_utils.FLASH_ATTN_KERNEL_FALLBACK); "sonicmoe" runs
#: kernels-community/sonic-moe (integrations/sonicmoe.py).
HUB_KERNEL_NAMES = ("flash_attention_2", "flash_attention_3", "sonicmoe")
#: Fields that ask transformers to replace layers with hub kernels (from_pretrained arguments; in
#: a config they have no other use).
KERNEL_SWITCHES = ("use_kernels", "kernel_config")


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
    """A transformers config from a catalog name, a config.json (or its folder), or a hub id;
    wherever it came from, checked by `check_loaded_config`."""
    config = _load_config(spec)
    check_loaded_config(config, os.fspath(spec))
    return config


def check_loaded_config(config: Any, where: str) -> None:
    """Refuse a config (or its text config) that asks for remote code, has more than `MAX_LAYERS`
    layers or `MAX_EXPERTS` experts, or routes each token to more experts than it has; the
    message gives the reason for the bound."""
    for c in (config, getattr(config, "text_config", None)):
        if c is None:
            continue
        if getattr(c, "auto_map", None):
            raise ModelSpecError(f"{where}: this config asks for remote code (auto_map); dispatchprof never runs "
                                 f"remote code (trust_remote_code is never set)")
        for name in ("_attn_implementation", "_experts_implementation", *KERNEL_SWITCHES):
            _check_kernel_field(where, name, getattr(c, name, None))
        _bounded(c, where, LAYER_FIELDS, MAX_LAYERS, "layers", "time: counting grows with the layers, and "
                 "1,000 layers already take minutes")
        experts = _bounded(c, where, EXPERT_FIELDS, MAX_EXPERTS, "experts", "memory and time: every expert is a "
                           "module that is built and counted")
        top_k = getattr(c, "num_experts_per_tok", None)
        if experts and isinstance(top_k, int) and not 1 <= top_k <= experts:
            raise ModelSpecError(f"{where}: field 'num_experts_per_tok' must be from 1 to the {experts} experts, "
                                 f"got {top_k}")


def check_kernel_fields(where: str, data: Any) -> None:
    """Refuse a config mapping (sub-configs included, at any depth) with a `KERNEL_FIELDS` value
    that names a hub repository or a `HUB_KERNEL_NAMES` entry, or a `KERNEL_SWITCHES` field set."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in KERNEL_FIELDS or key in KERNEL_SWITCHES:
                    _check_kernel_field(where, key, value)
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


def _check_kernel_field(where: str, name: str, value: Any) -> None:
    """One field's value (a name, or a mapping of sub-config -> name) against the kernel rules."""
    if name in KERNEL_SWITCHES:
        if value:
            raise ModelSpecError(f"{where}: field {name!r} asks transformers to load kernels from the model hub; "
                                 f"dispatchprof never runs code from the hub (remove the field)")
        return
    for v in value.values() if isinstance(value, dict) else [value]:
        text = v.removeprefix("paged|") if isinstance(v, str) else ""
        if "/" in text or ":" in text or text in HUB_KERNEL_NAMES:
            raise ModelSpecError(f"{where}: field {name.lstrip('_').removesuffix('_internal')!r} = {_short(v)} "
                                 f"loads a kernel from the model hub; dispatchprof never runs code from the hub "
                                 f"(use eager or sdpa, or remove the field)")


def _bounded(config: Any, where: str, names: tuple[str, ...], limit: int, what: str, reason: str) -> int:
    """The largest of the fields ``names`` that the config sets (0 if none), each checked to be a
    whole number from 0 to ``limit``."""
    largest = 0
    for name in names:
        value = getattr(config, name, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
            raise ModelSpecError(f"{where}: field {name!r} = {_short(value)}: at most {limit:,} {what} ({reason})")
        largest = max(largest, value)
    return largest


def _load_config(spec: str | os.PathLike) -> Any:
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
    from dispatchprof.results.suggest import did_you_mean
    raise ModelSpecError(f"unknown model {text!r}; bundled models: {', '.join(catalog())} "
                         f"(or give a config.json path, a folder holding one, or a hub id such as org/name)"
                         + did_you_mean(text, catalog()))


def _looks_like_hub_id(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and all(parts) and not os.path.exists(text)


def _config_from_file(path: str, where: str | None = None) -> Any:
    """A config.json checked and built; ``where`` names it in errors (default: ``path``)."""
    import transformers

    where = where or path
    data = read_json(path, "config", ModelSpecError)
    if not isinstance(data, dict):
        raise ModelSpecError(f"{where}: a config.json holds a JSON object")
    if "auto_map" in data:
        raise ModelSpecError(f"{where}: this config asks for remote code (auto_map); dispatchprof never runs "
                             f"remote code (trust_remote_code is never set)")
    check_kernel_fields(where, data)
    model_type = data.pop("model_type", None)
    if not model_type:
        raise ModelSpecError(f"{where}: missing field 'model_type' (llama, mistral, gpt2, ...)")
    check_config_fields(where, model_type, data)
    try:
        return transformers.AutoConfig.for_model(model_type, **data)
    except (ValueError, TypeError) as e:
        raise ModelSpecError(f"{where}: {e}") from None


def check_config_fields(path: str, model_type: Any, data: dict) -> None:
    """Refuse an unknown model type (naming the closest known ones), a field whose type differs
    from its default's for that model type, and a size outside 1 .. MAX_SIZE."""
    from transformers import CONFIG_MAPPING

    known = list(CONFIG_MAPPING.keys())
    if not isinstance(model_type, str) or model_type not in known:
        close = difflib.get_close_matches(str(model_type), known, n=5, cutoff=0.5)
        hint = f"closest known: {', '.join(close)}" if close else f"known types include {', '.join(known[:8])}, ..."
        raise ModelSpecError(f"{path}: field 'model_type' = {model_type!r} is not a model type transformers "
                             f"knows; {hint}")
    defaults = CONFIG_MAPPING[model_type]()
    for key, value in data.items():
        default = getattr(defaults, key, None)
        expected = _expected_type(default)
        if key.endswith("_token_id") and _whole_numbers(value):
            continue
        if expected is not None and value is not None and not _is_type(value, expected):
            raise ModelSpecError(f"{path}: field {key!r} must be {expected} (as in {model_type} configs), "
                                 f"got {type(value).__name__} {_short(value)}")
    for key in SIZE_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
            raise ModelSpecError(f"{path}: field {key!r} must be a whole number from 1 to {MAX_SIZE:,}, "
                                 f"got {_short(value)}")


def _expected_type(default: Any) -> str | None:
    for t, name in ((bool, "true or false"), (int, "a number"), (float, "a number"), (str, "a string"),
                    (list, "a list"), (dict, "a mapping")):
        if isinstance(default, t):
            return name
    return None


def _is_type(value: Any, expected: str) -> bool:
    if expected == "true or false":
        return isinstance(value, bool)
    if expected == "a number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"a string": str, "a list": (list, tuple), "a mapping": dict}[expected])


def _whole_numbers(value: Any) -> bool:
    """A non-empty list of whole numbers (several end-of-sequence token ids, as in Llama 3.1)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _config_from_hub(hub_id: str) -> Any:
    """The hub repository's config.json alone (local cache first), read and checked as a local file."""
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(hub_id, "config.json", local_files_only=True)
    except Exception:  # noqa: BLE001  (not in the local cache: ask the hub, if it can be reached)
        path = None
    if path is None and not hub_reachable():
        raise ModelSpecError(f"{hub_id}: could not load the config from the model hub: not in the local cache and "
                             f"the hub cannot be reached (no network); use a bundled model ({_some_models()}) "
                             f"or a local config.json")
    if path is None:
        try:
            path = hf_hub_download(hub_id, "config.json")
        except Exception as e:  # noqa: BLE001  (the hub client raises many types; all mean "not here")
            raise ModelSpecError(f"{hub_id}: could not load the config from the model hub ({type(e).__name__}); "
                                 f"this machine may have no network: use a bundled model ({_some_models()}) "
                                 f"or a local config.json") from None
    return _config_from_file(path, f"{hub_id} (config.json from the model hub)")


def _some_models() -> str:
    """A few bundled model names and how many there are (a hub error stays one short line)."""
    names = list(catalog())
    return f"{', '.join(names[:3])}, ... {len(names)} in all" if len(names) > 3 else ", ".join(names)


def hub_reachable(timeout_s: float = HUB_CONNECT_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the model hub opens within ``timeout_s`` (False at once when
    huggingface_hub is set offline)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    host = constants.ENDPOINT.split("://", 1)[-1].split("/", 1)[0]
    name, _, port = host.partition(":")
    try:
        with socket.create_connection((name, int(port or 443)), timeout=timeout_s):
            return True
    except OSError:
        return False


def catalog_entry(spec: Any) -> CatalogEntry | None:
    """The catalog entry a model spec names (case-insensitive), or None."""
    if not isinstance(spec, (str, os.PathLike)):
        return None
    return {n.lower(): e for n, e in catalog().items()}.get(os.fspath(spec).lower())
