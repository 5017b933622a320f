"""Host CPU calibration: a measured profile that loads, written atomically."""

import os

import pytest

from dispatchprof import DeviceProfileError, OpCounter, load_device
from dispatchprof.sim.calibrate import Calibration, measure, write_profile


def test_measured_profile_loads_and_simulates(tmp_path):
    cal = measure(matmul_n=64, vector_elements=1024, vector_reps=4, copy_bytes=1 << 20, repeats=2)
    assert all(v > 0 for v in (*cal.matrix_flops.values(), *cal.vector_flops.values(), cal.copy_bytes_per_s))
    path = write_profile(tmp_path / "cpu.yaml", cal)
    d = load_device(path)
    assert d.name == "host-cpu" and d.kind == "cpu"
    assert d.matrix_tflops["fp32"] == pytest.approx(cal.matrix_flops["fp32"] / 1e12, rel=1e-3)
    assert d.memory_bandwidth_gb_per_s == pytest.approx(cal.read_bytes_per_s / 1e9, rel=1e-3)
    assert d.host_to_device_gb_per_s == pytest.approx(cal.copy_bytes_per_s / 1e9, rel=1e-3)
    assert d.launch_overhead_us == pytest.approx(cal.launch_overhead_s * 1e6, rel=1e-3) and d.launch_overhead_us > 0
    assert "measured by dispatchprof calibrate" in d.source and "assumed" in d.source_of("pj_per_flop")
    import torch
    with OpCounter(devices=str(path)) as c:
        torch.ones(10) * 2
    assert c.simulated().total.time_s > 0


def test_a_profile_that_would_not_load_is_never_written(tmp_path):
    broken = Calibration({"fp32": 1e9}, {"fp32": 1e9}, copy_bytes_per_s=0.0, memory_bytes=None, threads=1)
    with pytest.raises(DeviceProfileError, match="memory_bandwidth_gb_per_s' must be > 0"):
        write_profile(tmp_path / "cpu.yaml", broken)
    assert os.listdir(tmp_path) == []
