"""Configs from the model hub get every check a local config.json gets, and no config (file, hub or
bundled) can name code from the hub: remote code (auto_map) or a hub kernel (attn_implementation,
experts_implementation, use_kernels, kernel_config). The hub is a local cache built here: no network."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import constants

from dispatchprof.errors import ModelSpecError
from dispatchprof.llm.catalog import HUB_KERNEL_NAMES, check_loaded_config, load_config
from tests.test_cli_inputs import TINY

REVISION = "0123456789abcdef0123456789abcdef01234567"
#: Llama 3.1 8B's config.json as the hub serves it (eos_token_id is a list).
LLAMA_31 = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
            "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
            "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
            "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A hub cache holding what ``hub(repo, config)`` puts there; the hub itself unreachable."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    def put(repo: str, config: dict) -> str:
        folder = tmp_path / f"models--{repo.replace('/', '--')}"
        (folder / "refs").mkdir(parents=True)
        (folder / "refs" / "main").write_text(REVISION)
        (folder / "snapshots" / REVISION).mkdir(parents=True)
        (folder / "snapshots" / REVISION / "config.json").write_text(json.dumps(config))
        return repo
    return put


def test_a_hub_config_is_read_from_the_cache_and_built(hub):
    config = load_config(hub("meta-llama/Llama-3.1-8B", LLAMA_31))
    assert (config.num_hidden_layers, config.eos_token_id) == (32, [128001, 128008, 128009])


@pytest.mark.parametrize("edit, message", [
    ({"hidden_size": "abc"}, r"field 'hidden_size' must be a number \(as in llama configs\), got str 'abc'"),
    ({"num_attention_heads": 0}, r"field 'num_attention_heads' must be a whole number from 1 to 16,777,216, got 0"),
    ({"model_type": "lama"}, r"field 'model_type' = 'lama' is not a model type transformers knows; closest known: "),
    ({"auto_map": {"AutoConfig": "x.Y"}}, r"this config asks for remote code \(auto_map\)"),
    ({"eos_token_id": [1, "2"]}, r"field 'eos_token_id' must be a number"),
])
def test_a_hub_config_gets_every_check_of_a_local_file(hub, edit, message):
    repo = hub("org/bad", {**TINY, **edit})
    with pytest.raises(ModelSpecError, match=rf"^org/bad \(config.json from the model hub\): ({message})"):
        load_config(repo)


KERNELS = [
    ({"attn_implementation": "kernels-community/flash-attn3"}, "attn_implementation",
     "'kernels-community/flash-attn3'"),
    ({"_attn_implementation": "paged|org/kernel@v1:attn"}, "attn_implementation", "'paged|org/kernel@v1:attn'"),
    ({"attn_implementation": {"": "sdpa", "text_config": "evil/attn"}}, "attn_implementation", "'evil/attn'"),
    ({"experts_implementation": "sonicmoe"}, "experts_implementation", "'sonicmoe'"),
    ({"text_config": {"attn_implementation": "flash_attention_2"}}, "attn_implementation", "'flash_attention_2'"),
]


@pytest.mark.parametrize("edit, field, value", KERNELS)
def test_a_field_naming_a_hub_kernel_is_refused_in_a_file_and_from_the_hub(hub, tmp_path, edit, field, value):
    tail = (rf"field '{field}' = {value} loads a kernel from the model hub; dispatchprof never runs code from "
            r"the hub \(use eager or sdpa, or remove the field\)$")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, **edit}))
    with pytest.raises(ModelSpecError, match=rf"^{path}: {tail}"):
        load_config(path)
    with pytest.raises(ModelSpecError, match=rf"^org/k \(config.json from the model hub\): {tail}"):
        load_config(hub("org/k", {**TINY, **edit}))


@pytest.mark.parametrize("field", ["use_kernels", "kernel_config"])
def test_use_kernels_and_kernel_config_are_refused(tmp_path, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, field: True if field == "use_kernels" else {"kernel_mapping": {}}}))
    with pytest.raises(ModelSpecError, match=rf"^{path}: field '{field}' asks transformers to load kernels from the "
                                             r"model hub; dispatchprof never runs code from the hub"):
        load_config(path)


def test_local_implementations_pass_and_a_built_config_is_checked_too(tmp_path):
    for name in ("eager", "sdpa", "flex_attention", "paged|sdpa"):
        path = tmp_path / f"{name.replace('|', '_')}.json"
        path.write_text(json.dumps({**TINY, "attn_implementation": name}))
        assert load_config(path).num_hidden_layers == TINY["num_hidden_layers"]
    config = load_config(tmp_path / "eager.json")
    config._attn_implementation = "kernels-community/flash-attn3"     # set after loading (library use)
    with pytest.raises(ModelSpecError, match=r"^x: field 'attn_implementation' = 'kernels-community/flash-attn3'"):
        check_loaded_config(config, "x")
    assert HUB_KERNEL_NAMES == ("flash_attention_2", "flash_attention_3", "sonicmoe")


def test_a_hub_config_is_bounded_as_any_config(hub):
    with pytest.raises(ModelSpecError, match=r"^org/deep: field 'num_hidden_layers' = 100000: at most 512 layers"):
        load_config(hub("org/deep", {**TINY, "num_hidden_layers": 100_000}))


def test_a_hub_id_not_in_the_cache_fails_at_once_without_network(hub):
    with pytest.raises(ModelSpecError, match=r"^org/missing: could not load the config from the model hub: not in "
                                             r"the local cache and the hub cannot be reached"):
        load_config("org/missing")
