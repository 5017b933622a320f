"""Bounds on sizes, each with its reason in the message: layers and experts of any config (bundled,
file or hub), and the size of a sweep, checked before anything is built."""

from __future__ import annotations

import json
import re

import pytest
import transformers

from dispatchprof.cli import main
from dispatchprof.errors import ModelSpecError
from dispatchprof.llm import sweep as sweep_module
from dispatchprof.llm.catalog import MAX_EXPERTS, MAX_LAYERS, check_loaded_config, load_config
from tests.test_cli_inputs import TINY

MIXTRAL = {**TINY, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}


@pytest.mark.parametrize("config, message", [
    ({**TINY, "num_hidden_layers": 100_000},
     r"field 'num_hidden_layers' = 100000: at most 512 layers \(time: counting grows with the layers, and 1,000 "
     r"layers already take minutes\)"),
    ({**MIXTRAL, "num_local_experts": 5000}, r"field 'num_local_experts' = 5000: at most 1,024 experts \(memory and "
                                             r"time: every expert is a module that is built and counted\)"),
    ({**MIXTRAL, "num_experts_per_tok": 9}, r"field 'num_experts_per_tok' must be from 1 to the 8 experts, got 9"),
])
def test_layer_and_expert_counts_are_bounded_with_the_reason(tmp_path, config, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ModelSpecError, match=rf"^{path}: {message}$"):
        load_config(path)
    assert (MAX_LAYERS, MAX_EXPERTS) == (512, 1024)


def test_the_limits_are_inclusive():
    config = transformers.MixtralConfig(**{k: v for k, v in MIXTRAL.items() if k != "model_type"})
    config.num_hidden_layers, config.num_local_experts = MAX_LAYERS, MAX_EXPERTS
    check_loaded_config(config, "x")
    config.num_hidden_layers += 1
    with pytest.raises(ModelSpecError, match="at most 512 layers"):
        check_loaded_config(config, "x")


def test_a_config_from_anywhere_asking_for_remote_code_is_refused():
    """A config object (as the hub gives it) is checked too, not only config.json files."""
    config = transformers.LlamaConfig(**{k: v for k, v in TINY.items() if k != "model_type"})
    config.auto_map = {"AutoModelForCausalLM": "evil.Model"}
    with pytest.raises(ModelSpecError, match=r"^org/model: this config asks for remote code \(auto_map\)"):
        check_loaded_config(config, "org/model")


def test_a_huge_layer_count_fails_in_one_line_before_counting(capsys, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({**TINY, "num_hidden_layers": 16_777_216}))
    assert main([str(path), "--prompt-len", "4", "--new-tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert err == f"dispatchprof: error: {path}: field 'num_hidden_layers' = 16777216: at most 512 layers (time: " \
                  f"counting grows with the layers, and 1,000 layers already take minutes)\n"


def test_a_sweep_checks_its_size_before_building_anything(capsys, monkeypatch):
    def never(*args):
        raise AssertionError("the product was built")
    monkeypatch.setattr(sweep_module, "shapes", never)
    big = ",".join(str(n) for n in range(1, 65))                 # 64 x 64 x 2 = 8,192 shapes
    message = ("the sweep has 8,192 model shapes (1 models x 64 batch sizes x 64 prompt lengths x 2 new-token "
               "counts); at most 4,096, since each is counted once and 4,096 already take hours (split it)")
    with pytest.raises(ValueError, match=rf"^{message}$".replace("(", r"\(").replace(")", r"\)")):
        sweep_module.sweep(["llama-3.2-1b"], ["L4"], range(64), range(64), (1, 2))
    assert main(["sweep", "llama-3.2-1b", "--device", "L4", "--batch", big, "--prompt-len", big,
                 "--new-tokens", "1,2"]) == 2
    assert capsys.readouterr().err == f"dispatchprof: error: {message}\n"


@pytest.mark.parametrize("flags, message", [(["--top", "-5"], "--top must be >= 0, got -5"),
                                            (["--depth", "-2"], r"--depth must be -1 \(all\) or >= 0, got -2")])
def test_report_refuses_the_table_options_profile_refuses(capsys, tmp_path, flags, message):
    for argv in (["report", str(tmp_path / "p.json")], ["llama-3.2-1b"]):
        assert main([*argv, *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and re.search(message, err)
