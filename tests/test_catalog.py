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
    # Qwen3-8B: 36 x 192,946,432 (q and o 4096x4096, k and v 4096x1024, q/k norms 2 x 128, MLP 3 x 4096x12288,
    # norms 2 x 4096) + 2 x 151936x4096 + 4096 = 8,190,735,360 ("8.2B")
    "qwen3-8b": 8_190_735_360,
    # Qwen3-30B-A3B: 48 x 623,120,640 (attention 18,874,624: q 2048x4096, k and v 2048x512, o 4096x2048, q/k
    # norms 2 x 128; experts 128 x 3 x 2048x768 = 603,979,776; router 128x2048; norms 2 x 2048)
    # + 2 x 151936x2048 + 2048 = 30,532,122,624 ("30.5B")
    "qwen3-30b-a3b": 30_532_122_624,
    # Qwen3-235B-A22B: 94 x 2,487,755,008 (attention 71,303,424: q 4096x8192, k and v 4096x512, o 8192x4096,
    # q/k norms; experts 128 x 3 x 4096x1536 = 2,415,919,104; router 128x4096; norms 2 x 4096)
    # + 2 x 151936x4096 + 4096 = 235,093,634,560 ("235B")
    "qwen3-235b-a22b": 235_093_634_560,
    # DeepSeek-V3 (MLA, 128 heads): attention 187,107,328 per layer = q_a 7168x1536 + 1536 (norm)
    # + q_b 1536x(128x192) + kv_a 7168x(512+64) + 512 (norm) + kv_b 512x(128x256) + o (128x128)x7168;
    # 3 dense layers: + MLP 3 x 7168x18432 + norms 2 x 7168 = 583,483,392 each;
    # 58 MoE layers: + 256 experts x 3 x 7168x2048 + 1 shared expert (3 x 7168x2048) + router 256x7168 + norms
    # = 11,507,286,016 each (the router's e_score_correction_bias is a buffer, not a parameter);
    # + 2 x 129280x7168 + 7168 = 671,026,404,352 ("671B"; the hub's 685B adds the MTP module)
    "deepseek-v3": 671_026_404_352,
    "deepseek-r1": 671_026_404_352,  # the DeepSeek-V3 architecture
    # Kimi-K2 (DeepSeek-V3 code, 64 heads): attention 101,124,096 (as above with q_b 1536x(64x192),
    # kv_b 512x(64x256), o (64x128)x7168); 1 dense layer 497,500,160; 60 MoE layers of 384 experts:
    # 101,124,096 + 384 x 44,040,192 + 44,040,192 + 384x7168 + 14,336 = 17,059,364,864 each;
    # + 2 x 163840x7168 + 7168 = 1,026,408,209,408 ("1T")
    "kimi-k2": 1_026_408_209_408,
    # gpt-oss-120b: 36 x 3,213,080,192 (attention 26,550,144: q 2880x4096 + 4096, k and v 2880x512 + 512,
    # o 4096x2880 + 2880, 64 sinks; experts 128 x (2880x5760 + 5760 + 2880x2880 + 2880) = 3,186,155,520;
    # router 128x2880 + 128; norms 2 x 2880) + 2 x 201088x2880 + 2880 = 116,829,156,672 ("116.8B")
    "gpt-oss-120b": 116_829_156_672,
    # gpt-oss-20b: 24 x 823,186,976 (as gpt-oss-120b with 32 experts: 796,538,880 + router 92,192)
    # + 2 x 201088x2880 + 2880 = 20,914,757,184 ("20.9B")
    "gpt-oss-20b": 20_914_757_184,
    # Gemma-3-27B text: 62 x 412,898,560 (q 5376x4096, k and v 5376x2048, o 4096x5376, q/k norms 2 x 128,
    # MLP 3 x 5376x21504, four norms 4 x 5376) + 262208x5376 (tied) + 5376 = 27,009,346,304
    "gemma-3-27b": 27_009_346_304,
    # Mistral-Small-3 24B: 40 x 555,755,520 (q 5120x4096, k and v 5120x1024, o 4096x5120, MLP 3 x 5120x32768,
    # norms 2 x 5120) + 2 x 131072x5120 + 5120 = 23,572,403,200 ("24B")
    "mistral-small-3-24b": 23_572_403_200,
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


def test_an_moe_token_counts_its_active_parameters_work():
    # Qwen3-30B-A3B ("3.3B activated"), one token: top-8 of 128 experts under balanced routing = 8 experts.
    # MACs per layer: q 2048x4096 + k, v 2 x 2048x512 + o 4096x2048 = 18,874,368, router 2048x128 = 262,144,
    # 8 experts x 3 x 2048x768 = 37,748,736, attention's two products 2 x 32 heads x 128 = 8,192:
    # 56,893,440 x 48 layers + LM head 2048x151936 = 311,164,928 -> 3,042,050,048
    from dispatchprof import OpCounter
    from dispatchprof.llm.models import token_ids

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model("qwen3-30b-a3b")
    with OpCounter() as c:
        model(token_ids(model, 1, 1))
    assert c.get("macs") == 56_893_440 * 48 + 311_164_928 == 3_042_050_048
