"""The bundled model catalog and config loading from names, files, folders and hub ids."""

import json
import os
import subprocess
import sys
import warnings

import pytest

from dispatchprof.llm.catalog import ModelSpecError, catalog, load_config
from dispatchprof.llm.models import build_model

MODELS_MD = {  # published parameter counts (MODELS.md)
    "llama-3.2-1b": 1_235_814_400, "llama-3.2-3b": 3_212_749_824, "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496, "llama-3.1-405b": 405_853_388_800, "llama-2-7b": 6_738_415_616,
    "mistral-7b": 7_241_732_096, "mixtral-8x7b": 46_702_792_704, "qwen2.5-7b": 7_615_616_512,
    # Qwen3-32B: 64 x 487,598,336 per layer (q 5120x8192, k and v 5120x1024, o 8192x5120, MLP 3 x 5120x25600,
    # two 5120 norms, q/k norms of 128) + 2 x 151936x5120 (embedding, LM head) + 5120 = 32,762,123,264 ("32.8B")
    "qwen3-32b": 32_762_123_264,
    # Qwen3-14B: 40 x 330,311,936 (q and o 5120x5120, k and v 5120x1024, MLP 3 x 5120x17408, norms 2 x 5120 + 2 x 128)
    # + 2 x 151936x5120 + 5120 = 14,768,307,200 ("14.8B")
    "qwen3-14b": 14_768_307_200,
    # CodeLlama-34B: 48 x 692,076,544 (q and o 8192x8192, k and v 8192x1024, MLP 3 x 8192x22016, norms 2 x 8192)
    # + 2 x 32000x8192 + 8192 = 33,743,970,304 ("33.7B")
    "codellama-34b": 33_743_970_304,
    # Llama-2-70B: 80 x 855,654,400 (as CodeLlama-34B with MLP 3 x 8192x28672) + 2 x 32000x8192 + 8192
    # = 68,976,648,192 ("69.0B")
    "llama-2-70b": 68_976_648_192,
    "gemma-2-9b": 9_241_705_984, "phi-3-mini": 3_821_079_552, "gpt2": 124_439_808, "bert-base": 109_482_240,
}


@pytest.mark.parametrize("name", sorted(MODELS_MD))
def test_catalog_parameter_counts_equal_the_published_ones(name):
    assert catalog()[name].parameters == MODELS_MD[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(name)
    assert sum(p.numel() for p in model.parameters()) == MODELS_MD[name]


def test_catalog_names_are_case_insensitive():
    assert load_config("Llama-3.2-1B").hidden_size == 2048


def test_config_json_file_and_folder(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 2, "vocab_size": 50}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_config(str(tmp_path / "config.json")).hidden_size == 32
    assert load_config(str(tmp_path)).num_hidden_layers == 1
    model = build_model(str(tmp_path))
    # embedding + untied head, q k v o, gate up down, three RMSNorms
    assert sum(p.numel() for p in model.parameters()) == 50 * 32 * 2 + 4 * 32 * 32 + 3 * 32 * 64 + 3 * 32


@pytest.mark.parametrize("content, message", [
    ("{not json", r"not a complete JSON config \(truncated or corrupt"),
    ('{"hidden_size": 3}', r"missing field 'model_type'"),
    ('{"model_type": "llama", "auto_map": {"AutoModel": "x.Y"}}', r"asks for remote code \(auto_map\); dispatchprof never runs"),
    ('{"model_type": "no-such-arch"}', r"no-such-arch"),
    ('[1, 2]', r"a config.json holds a JSON object"),
])
def test_bad_config_files(tmp_path, content, message):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(ModelSpecError, match=message):
        load_config(str(path))


def test_unknown_name_lists_the_catalog():
    with pytest.raises(ModelSpecError, match=r"unknown model 'llama-9'; bundled models: llama-3.2-1b, "):
        load_config("llama-9")
    with pytest.raises(ModelSpecError, match=r"missing.json: no such config file"):
        load_config("missing.json")


def test_hub_id_without_network_fails_clearly():
    # HF_HUB_OFFLINE makes the hub client fail at once instead of retrying: the same error path.
    code = ("from dispatchprof.llm.catalog import load_config\n"
            "try:\n    load_config('meta-llama/Llama-3.1-8B')\n"
            "except ValueError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
    assert "meta-llama/Llama-3.1-8B: could not load the config from the model hub" in out
    assert "use a bundled model" in out
