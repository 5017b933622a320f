"""A device is resolved once per run: a device YAML is parsed once for a whole generation, and every
consumer (simulator, capacity check, trace, roofline, reports) gets the same Device object."""

import json
import warnings

import pytest
import torch

from conftest import TINY_LLAMA, tiny_model
from dispatchprof import OpCounter, scenarios_of
from dispatchprof.cli import main
from dispatchprof.llm.generation import profile_generation
from dispatchprof.report.roofline import plot_roofline
from dispatchprof.sim import loader

# PIM-AI-1chip's figures (devices/pim_ai.yaml), under another name
MY_CHIP = """\
family: my chips
source: a test profile
devices:
  MyChip:
    memory_capacity_gb: 16
    memory_bandwidth_gb_per_s: 102.4
    memory_pj_per_bit: 0.95
    host_to_device_gb_per_s: 12.8
    host_to_device_pj_per_bit: 20
    device_to_host_gb_per_s: 12.8
    device_to_host_pj_per_bit: 20
    matrix_tflops: {fp32: 5, bf16: 5}
    vector_tflops: {fp32: 5, bf16: 5}
    pj_per_flop: 0.4
"""
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def my_chip(tmp_path):
    path = tmp_path / "my_chip.yaml"
    path.write_text(MY_CHIP)
    return str(path)


@pytest.fixture
def parses(monkeypatch):
    """The `where` of every profile document parsed from now on."""
    seen = []
    real = loader.parse_profile
    monkeypatch.setattr(loader, "parse_profile", lambda text, where: seen.append(where) or real(text, where))
    return seen


def test_a_device_yaml_is_parsed_once_per_generation(my_chip, parses):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = profile_generation(tiny_model(), 1, 8, 48, devices=[my_chip, "PIM-AI-4chip"])
    assert g.steps_counted >= 4                      # several counts, each simulated on MyChip
    assert parses.count(my_chip) == 1                # ... and the file was read once
    assert g.devices["MyChip"].ttft_s > 0


def test_every_simulation_of_a_run_shares_one_device_object(my_chip):
    scenarios = scenarios_of([my_chip])
    with OpCounter(devices=scenarios) as c:
        torch.nn.Linear(8, 4)(torch.randn(2, 8))
    sim = c.simulated()
    assert sim.placement.devices[0] is scenarios["MyChip"].devices[0]
    assert c.simulated().placement.devices[0] is sim.placement.devices[0]


def test_roofline_of_a_device_given_as_a_yaml_file(my_chip, tmp_path):
    with OpCounter(devices=my_chip) as c:
        torch.nn.Linear(64, 64)(torch.randn(16, 64))
    path = plot_roofline(c.simulated(), tmp_path / "roofline.png")
    assert open(path, "rb").read(8) == PNG


def test_cli_roofline_for_a_yaml_device(my_chip, tmp_path, capsys, parses):
    import transformers as tf

    config = tf.LlamaConfig(**TINY_LLAMA).to_dict()
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config))
    png = tmp_path / "r.png"
    code = main([str(config_path), "--batch", "1", "--prompt-len", "8", "--new-tokens", "12", "--device", my_chip,
                 "--roofline", str(png)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "MyChip" in out and open(png, "rb").read(8) == PNG
    assert parses.count(my_chip) == 1
