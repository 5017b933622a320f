"""Device profiles: every bundled device loads, and every promised error message."""

import textwrap

import pytest

from conftest import TINY_DEVICE_YAML
from dispatchprof import Device, DeviceProfileError, list_devices, load_device
from dispatchprof.sim.catalog import catalog

DEVICES_MD = [  # every device of DEVICES.md
    "PIM-AI-1chip", "PIM-AI-4chip", "PIM-AI-1dimm", "PIM-AI-2dimm", "PIM-AI-4dimm", "PIM-AI-6dimm",
    "PIM-AI-8dimm", "PIM-AI-10dimm", "PIM-AI-12dimm", "PIM-AI-16dimm", "PIM-AI-24dimm", "CXL-PIM-BC",
    "CXL-PIM-nBC", "SAM-LPDDR5PIM", "A17Pro", "Dimensity9300", "Snapdragon8gen3", "V100", "A100-40GB",
    "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "B200", "L4", "L40S", "A6000", "RTX-4090", "MI300X",
    "MI250X-GCD"]  # issue #14 adds one GCD of an MI250X
ADDED = ["GB200",    # issue #33: the GB200 rows of AIConfigurator's silicon sample (NVIDIA's GB200 NVL72 table)
         "B300", "GB300", "MI325X", "MI355X"]  # issue #35: the 2025 GPUs (tests/test_frontier_devices.py)
ADDED += ["UPMEM-2556", "UPMEM-640"]   # issue #37: the PrIM systems (devices/upmem.yaml)


def test_every_device_of_the_reference_is_bundled_with_a_source():
    assert set(list_devices()) == set(DEVICES_MD + ADDED)
    for name in DEVICES_MD + ADDED:
        d = load_device(name)
        assert d.source and all(d.source_of(f) for f in ("memory_bandwidth_gb_per_s", "matrix_tflops"))


@pytest.mark.parametrize("name, field, value", [
    ("PIM-AI-1chip", "memory_bandwidth_gb_per_s", 102.4),
    ("PIM-AI-4chip", "device_to_host_gb_per_s", 51.2),
    ("PIM-AI-4chip", "host_to_device_pj_per_bit", 80),
    ("PIM-AI-4dimm", "memory_bandwidth_gb_per_s", 6553.6),
    ("CXL-PIM-nBC", "host_to_device_gb_per_s", 0.6),
    ("SAM-LPDDR5PIM", "pj_per_flop", 0.8),
    ("H100-PCIe", "memory_bandwidth_gb_per_s", 2000),
    ("H200", "memory_bandwidth_gb_per_s", 4800),
    ("MI300X", "memory_capacity_gb", 192),
    ("GB200", "memory_capacity_gb", 186),
    ("GB200", "memory_bandwidth_gb_per_s", 8000),
])
def test_reference_figures(name, field, value):
    assert getattr(load_device(name), field) == value


def test_peaks_by_dtype_and_kind():
    h100 = load_device("H100-SXM")
    assert h100.peak_flops("bf16", matrix=True) == 989.4 * 1e12
    assert h100.peak_flops("bf16", matrix=False) == 66.9 * 1e12        # no bf16 vector figure: fp32's
    assert h100.peak_flops("int64", matrix=False) == 66.9 * 1e12
    assert load_device("PIM-AI-4chip").peak_flops("int4", matrix=True) == 128 * 1e12
    assert load_device("V100").peak_flops("bf16", matrix=True) == 15.7 * 1e12   # no bf16 tensor cores


def test_lookup_is_case_insensitive_and_exact():
    assert load_device("pim-ai-1CHIP").name == "PIM-AI-1chip"
    with pytest.raises(DeviceProfileError, match=r"unknown device 'H100'; known devices: PIM-AI-1chip, .*H100-PCIe"):
        load_device("H100")
    with pytest.raises(TypeError, match="takes a device name or a YAML path, got int"):
        load_device(3)


GOOD = TINY_DEVICE_YAML


def write(tmp_path, text, name="dev.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_users_own_yaml_loads_like_a_bundled_one(tmp_path):
    d = load_device(write(tmp_path, GOOD))
    assert isinstance(d, Device) and d.name == "Tiny" and d.vector_tflops == {"fp32": 0.5}
    assert d.compute_efficiency == 1 and d.launch_overhead_us == 0 and d.cost_weights["exp"] == 1
    assert load_device(str(write(tmp_path, GOOD))).source == "hand-made for a test"


@pytest.mark.parametrize("edit, message", [
    (("pj_per_flop: 1", "pj_per_flop: 1\n    flops: 3"), r"device 'Tiny': unknown field 'flops'; allowed: source, "),
    (("    pj_per_flop: 1\n", ""), r"device 'Tiny': missing field 'pj_per_flop'"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    pj_per_flop: 2"), r"duplicated key 'pj_per_flop' at line 15"),
    (("memory_bandwidth_gb_per_s: 10", "memory_bandwidth_gb_per_s: fast"),
     r"device 'Tiny': field 'memory_bandwidth_gb_per_s' must be int or float, got str 'fast'"),
    (("memory_bandwidth_gb_per_s: 10", "memory_bandwidth_gb_per_s: 0"),
     r"device 'Tiny': field 'memory_bandwidth_gb_per_s' must be > 0, got 0"),
    (("host_to_device_gb_per_s: 1", "host_to_device_gb_per_s: -3"),
     r"device 'Tiny': field 'host_to_device_gb_per_s' must be > 0, got -3"),
    (("memory_bandwidth_gb_per_s: 10", "memory_bandwidth_gb_per_s: .nan"),
     r"field 'memory_bandwidth_gb_per_s' must be a finite number, got nan"),
    (("matrix_tflops: {fp32: 1}", "matrix_tflops: {fp31: 1}"),
     r"field 'matrix_tflops' has unknown key 'fp31'; allowed: fp64, fp32"),
    (("vector_tflops: {fp32: 0.5}", "vector_tflops: {bf16: 0.5}"), r"'vector_tflops' needs an 'fp32' entry"),
    (("pj_per_flop: 1", "pj_per_flop: true"), r"field 'pj_per_flop' must be int or float, got bool True"),
    (("source: hand-made for a test\n", ""), r"missing field 'source'"),
    (("family: test", "famly: test"), r"unknown top-level key 'famly'; allowed: family, source, defaults, devices"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    compute_efficiency: 1.5"),
     r"field 'compute_efficiency' must be in \(0, 1\], got 1.5"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    expert_matrix_efficiency: {bf16: 1.2}"),
     r"field 'expert_matrix_efficiency.bf16' must be in \(0, 1\], got 1.2"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    expert_matrix_efficiency: {bf17: 0.5}"),
     r"field 'expert_matrix_efficiency' has unknown key 'bf17'; allowed: fp64, fp32, tf32, bf16"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_efficiency: {bf16: 0}"),
     r"field 'attention_efficiency.bf16' must be in \(0, 1\], got 0"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {bf16: [[4, 0.2]]}"),
     r"field 'attention_work_curve.bf16' must be a list of two or more \[GFLOP, fraction\] points"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {bf16: [[4, 0.2], [4, 0.5]]}"),
     r"'attention_work_curve.bf16' .*with GFLOP rising.*got GFLOP \[4, 4\]"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {bf16: [[0, 0.2], [4, 0.5]]}"),
     r"'attention_work_curve.bf16' .*each above 0"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {bf16: [[4, 0.2], [16, 1.5]]}"),
     r"'attention_work_curve.bf16': the fraction at 16 GFLOP must be in \(0, 1\], got 1.5"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {bf16: [[4, 0.2], [16, '0.5']]}"),
     r"'attention_work_curve.bf16' must be a list of two or more"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {bf17: [[4, 0.2], [16, 0.5]]}"),
     r"field 'attention_work_curve' has unknown key 'bf17'; allowed: fp64"),
    (("pj_per_flop: 1", "pj_per_flop: 1\n    attention_work_curve: {}"),
     r"field 'attention_work_curve' must not be empty"),
])
def test_strict_loading_names_file_device_and_field(tmp_path, edit, message):
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(DeviceProfileError, match=message) as err:
        load_device(path)
    assert str(path) in str(err.value)


def test_unreadable_and_non_yaml_files(tmp_path):
    with pytest.raises(DeviceProfileError, match=r"missing.yaml: cannot read the device profile"):
        load_device(tmp_path / "missing.yaml")
    with pytest.raises(DeviceProfileError, match="not valid YAML"):
        load_device(write(tmp_path, "devices: [unclosed"))
    with pytest.raises(DeviceProfileError, match=r"could not determine a constructor for the tag"):
        load_device(write(tmp_path, "devices: !!python/object:os.system {}"))


def test_file_with_several_devices_needs_a_name(tmp_path):
    two = GOOD + GOOD.split("devices:\n")[1].replace("Tiny", "Tiny2")
    path = write(tmp_path, two)
    with pytest.raises(DeviceProfileError, match=r"holds Tiny, Tiny2; pick one with load_device"):
        load_device(path)
    assert load_device(path, name="tiny2").name == "Tiny2"


def test_catalog_is_loaded_once():
    assert catalog() is catalog()
