"""GPU calibration without a GPU: issue #14's H100 figures as a fake sweep, the fitted profile
worked by hand, the command's table, JSON and errors."""

import dataclasses
import json
import os

import pytest

from dispatchprof import load_device
from dispatchprof.cli import main
from dispatchprof.sim import calibrate_gpu
from dispatchprof.sim.calibrate_gpu import GpuCalibration, fit_calibration, write_gpu_profile
from dispatchprof.sim.gemm_fit import predicted_s

N = 12288
# Issue #14, one H100 SXM, fp16 [M, 12288] x [12288, 12288]: 165 TFLOP/s at M=64, 618 at M=256,
# ~780 on large shapes; a GEMV at 2.1 TB/s (M = 1: 2N - 1 FLOPs per weight of 2 bytes), copy 3.0 TB/s.
GEMV_FLOPS = (2 * N - 1) * N / (N * N * 2 / 2.1e12)
H100 = GpuCalibration("NVIDIA H100 80GB HBM3", {1: GEMV_FLOPS, 64: 165e12, 256: 618e12, 8192: 780e12},
                      copy_bytes_per_s=3.0e12, gemv_bytes_per_s=2.1e12, kernel_s=2e-6, host_op_s=7e-6,
                      compute_units=132, memory_bytes=80 * 10**9)


def test_the_fit_pins_the_peak_on_the_largest_gemm_and_predicts_the_others():
    fit = fit_calibration(H100)
    assert (fit.matrix_memory_efficiency, fit.unoverlapped_fraction) == (0.85, 0.0)
    # M = 8192: 6144 tiles of 128x128 in 47 waves of 132 SMs -> 6144 / 6204 used; the kernel
    # (measured time - 2 us launch) is all compute, so peak = 780 T * t / (t - 2 us) / (6144 / 6204)
    t_big = 8192 * N * (2 * N - 1) / 780e12
    assert fit.matrix_tflops == pytest.approx(780 * t_big / (t_big - 2e-6) / (6144 / 6204), rel=1e-12)
    points = {m: (t, p) for m, t, p in fit.points}
    assert points[8192][1] == pytest.approx(points[8192][0], rel=1e-12)
    # M = 64: memory-bound; (64*N + N*N) * 2 bytes read + 64*N * 2 written at 0.85 * 3.0 TB/s, + 2 us
    assert points[64][1] == pytest.approx(305_135_616 / (0.85 * 3.0e12) + 2e-6, rel=1e-12)
    assert points[64][1] / points[64][0] - 1 == pytest.approx(0.0387, abs=5e-4)


def test_the_fitted_profile_beats_the_gemv_ratio_it_replaced(tmp_path):
    fit = fit_calibration(H100)
    d = load_device(write_gpu_profile(tmp_path / "gpu.yaml", H100, fit))
    assert (d.matrix_memory_efficiency, d.unoverlapped_fraction, d.compute_efficiency) == (0.85, 0.0, 1.0)
    assert (d.launch_overhead_us, d.host_overhead_us, d.compute_units, d.gemm_tile) == (2, 7, 132, (128, 128))
    assert "mean |error| 7.4% over its 4 shapes" in d.source_of("matrix_tflops")
    # the loaded profile simulates the sweep as the fit said (peak written to 6 digits)
    for m, _, p in fit.points:
        assert predicted_s(d, m, N) == pytest.approx(p, rel=1e-5)
    # the old profile (peak = largest throughput, mme = GEMV / copy = 0.7, u = 0) is worse on the same sweep
    old = dataclasses.replace(d, matrix_tflops={"fp16": 780.0}, matrix_memory_efficiency=0.7)
    old_error = sum(abs(predicted_s(old, m, N) / t - 1) for m, t, _ in fit.points) / len(fit.points)
    assert fit.mean_error < old_error


def test_calibrate_gpu_prints_the_sweep_and_writes_the_profile(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(calibrate_gpu, "measure_gpu", lambda: H100)
    path = tmp_path / "h100.yaml"
    assert main(["calibrate", "--gpu", "-o", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {path}" in out and "+3.9%" in out and "unoverlapped_fraction 0 (mean |error| 7.4%)" in out
    assert load_device(path).name == "this-gpu"
    assert main(["calibrate", "--gpu", "-o", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "dispatchprof.gpu_calibration" and doc["measured"]["gemm_flops"]["64"] == 165e12
    assert [p["m"] for p in doc["fit"]["points"]] == [1, 64, 256, 8192]


def test_a_sweep_faster_than_the_copy_is_refused_and_nothing_is_written(monkeypatch, capsys, tmp_path):
    slow_copy = GpuCalibration("broken", {1: GEMV_FLOPS, 8192: 780e12}, copy_bytes_per_s=1e9,
                               gemv_bytes_per_s=2.1e12, kernel_s=2e-6, host_op_s=7e-6, compute_units=132,
                               memory_bytes=80 * 10**9)
    monkeypatch.setattr(calibrate_gpu, "measure_gpu", lambda: slow_copy)
    assert main(["calibrate", "--gpu", "-o", str(tmp_path / "gpu.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reproduces the [8192, 12288] GEMM" in err[0]
    assert os.listdir(tmp_path) == []


def test_without_cuda_the_gpu_calibration_says_so(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)      # so on a GPU machine too
    with pytest.raises(RuntimeError, match="calibrating a GPU needs CUDA"):
        calibrate_gpu.measure_gpu()
