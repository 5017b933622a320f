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
    (BASE.format(bw="'3.35e3'"), r"got str '3.35e3' \(a number in quotes is text: write it without quotes\)$"),
    (BASE.format(bw="0"), r"'memory_bandwidth_gb_per_s' must be > 0, got 0"),
    (BASE.format(bw="1") + "    compute_units: 10000000\n",
     r"^.*hostile.yaml: device 'X': field 'compute_units' = 10000000 is outside the physical range 1 \.\. 1e\+06"),
    (BASE.format(bw="1") + "    compute_units: 0\n", r"field 'compute_units' must be > 0, got 0"),
    (BASE.format(bw="1") + "    price_usd_per_hour: 1e9\n",
     r"field 'price_usd_per_hour' = 1000000000.0 is outside the physical range 1e-06 \.\. 1e\+06"),
    (BASE.format(bw="1") + "    price_usd_per_hour: -2\n", r"field 'price_usd_per_hour' must be > 0, got -2"),
    (BASE.format(bw="1") + "    gemm_tile: [128, 100000]\n", r"'gemm_tile' must be two whole numbers from 1 to 65536"),
    (BASE.format(bw="1") + "    matrix_pj_per_flop: {bf16: .nan}\n", r"'matrix_pj_per_flop.bf16' must be a finite"),
    (BASE.format(bw="1") + "    weight_only_efficiency: {int4: 0}\n",
     r"'weight_only_efficiency.int4' must be in \(0, 1\]"),
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


@pytest.mark.parametrize("written, value", [("3.35e3", 3350.0), ("1e3", 1000.0), ("2E+3", 2000.0), (".5e1", 5.0),
                                            ("3350", 3350), ("1_000", 1000)])
def test_numbers_with_an_exponent_read_as_yaml_1_2_writes_them(tmp_path, written, value):
    """PyYAML alone reads 3.35e3 (no sign in the exponent) as the text '3.35e3'."""
    path = tmp_path / "d.yaml"
    path.write_text(BASE.format(bw=written))
    assert load_device(path).memory_bandwidth_gb_per_s == value


def test_a_device_file_named_like_a_bundled_device_in_the_same_run_is_refused(tmp_path):
    """Two devices of one run under one name (case-insensitive) would replace each other in every table."""
    from dispatchprof.sim import scenarios_of

    path = tmp_path / "mine.yaml"
    path.write_text(BASE.format(bw="1").replace("  X:", "  h100-sxm:"))
    bundled = load_device("H100-SXM").file
    with pytest.raises(DeviceProfileError, match=rf"^two devices of this run are named 'H100-SXM': H100-SXM from "
                                                 rf"{bundled} and h100-sxm from {path}; each device of a run needs "
                                                 rf"its own name \(rename the device in its YAML file\)$"):
        scenarios_of(["H100-SXM", str(path)])
    assert [name for name, _ in scenarios_of([str(path)]).items] == ["h100-sxm"]      # alone it is fine
    assert [name for name, _ in scenarios_of(["H100-SXM", "h100-sxm"]).items] == ["H100-SXM"]   # same device: once
