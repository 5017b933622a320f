"""Hostile inputs: each gets a clear error and leaves nothing half-written."""

import json
import os

import pytest

from dispatchprof import DeviceProfileError, load_device

BASE = """source: hostile test
devices:
  X:
    memory_capacity_gb: 1
    memory_bandwidth_gb_per_s: {bw}
    memory_pj_per_bit: 1
    host_to_device_gb_per_s: 1
    host_to_device_pj_per_bit: 1
    device_to_host_gb_per_s: 1
    device_to_host_pj_per_bit: 1
    matrix_tflops: {{fp32: 1}}
    vector_tflops: {{fp32: 1}}
    pj_per_flop: 1
"""

BOMB = """a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
devices: *e
"""


@pytest.mark.parametrize("text, message", [
    (BOMB, r"anchors and aliases are not allowed in device profiles \(line 1\)"),
    ("devices: !include other.yaml\n", r"not valid YAML: could not determine a constructor for the tag '!include'"),
    ("devices: !!python/object/apply:os.system ['echo pwned']\n", r"not valid YAML"),
    (BASE.format(bw="1.0e+400"), r"'memory_bandwidth_gb_per_s' must be a finite number, got inf"),
    (BASE.format(bw=".inf"), r"must be a finite number, got inf"),
    (BASE.format(bw=".nan"), r"must be a finite number, got nan"),
    (BASE.format(bw="1" + "0" * 400), r"must be at most 1e\+12, got 1000.* \(check the unit in the field's name\)"),
    (BASE.format(bw="3.35 TB/s"), r"'memory_bandwidth_gb_per_s' must be int or float, got str '3.35 TB/s'"),
    (BASE.format(bw="-5"), r"'memory_bandwidth_gb_per_s' must be > 0, got -5"),
    ("[1, 2, 3]\n", r"a device profile is a mapping"),
    ("", r"a device profile is a mapping"),
])
def test_hostile_device_yaml(tmp_path, text, message):
    """Alias bombs, unknown tags, huge numbers, NaN/inf, wrong units: one clear DeviceProfileError each."""
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    with pytest.raises(DeviceProfileError, match=message):
        load_device(path)


def test_hostile_config_json_never_runs_remote_code(tmp_path):
    """A config asking for remote code is refused and its code never runs."""
    from dispatchprof.llm.catalog import ModelSpecError, load_config

    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.Evil"}}))
    with pytest.raises(ModelSpecError, match="asks for remote code"):
        load_config(str(tmp_path))
    assert not marker.exists()


def test_cli_outputs_are_never_half_written(tmp_path, capsys):
    """A failed run leaves the previous output file untouched and no temporary file."""
    from dispatchprof.cli import main

    target = tmp_path / "out.json"
    target.write_text("previous result")
    code = main(["llama-3.2-1b", "--device", "no-such-device", "--format", "json", "-o", str(target)])
    assert code == 2 and target.read_text() == "previous result"
    assert os.listdir(tmp_path) == ["out.json"]
