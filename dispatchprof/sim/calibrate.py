"""Measure this machine's CPU and write it as a device profile ("host-cpu").

Measured: matmul throughput per dtype (work counted as dispatchprof counts it: an n x n
matmul is n*n*(2n-1) ADD + MULT), element-wise throughput per dtype (one MULT per element, on
a tensor that stays in cache), memory bandwidth as matmuls see it (a few rows through a weight
far larger than the caches), copy bandwidth (a clone), the last-level cache's size (sysfs) and
the bandwidth of element-wise ops inside it, the overhead of one eager module op (a chain of
tiny nn.Linear), and the installed memory. Not measured: energy, which is written as a stated assumption.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
import yaml

from dispatchprof.results.files import write_atomic
from dispatchprof.sim.loader import parse_profile

CALIBRATED_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Calibration:
    """Measured figures of this machine (FLOP/s and bytes/s)."""

    matrix_flops: dict[str, float]
    vector_flops: dict[str, float]
    copy_bytes_per_s: float
    memory_bytes: int | None
    threads: int
    launch_overhead_s: float = 0.0     # wall time per op of a chain of tiny modules
    read_bytes_per_s: float = 0.0      # weight bytes/s of a matmul streaming a weight from memory
    cache_bytes: int | None = None     # last-level cache size
    cache_read_bytes_per_s: float = 0.0   # element-wise traffic/s on tensors that fit in it


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()                                            # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(matmul_n: int = 1024, vector_elements: int = 1 << 18, vector_reps: int = 50,
            copy_bytes: int = 1 << 28, repeats: int = 5) -> Calibration:
    """Time the kernels above; sizes are parameters so that tests can run it small."""
    matrix, vector = {}, {}
    for key, dtype in CALIBRATED_DTYPES.items():
        a = torch.randn(matmul_n, matmul_n).to(dtype)
        b = torch.randn(matmul_n, matmul_n).to(dtype)
        matrix[key] = matmul_n * matmul_n * (2 * matmul_n - 1) / _median_seconds(lambda: a @ b, repeats)
        x = torch.randn(vector_elements).to(dtype)
        out = torch.empty_like(x)

        def many_muls() -> None:
            for _ in range(vector_reps):
                torch.mul(x, x, out=out)

        vector[key] = vector_elements * vector_reps / _median_seconds(many_muls, repeats)
    big = torch.empty(copy_bytes // 4, dtype=torch.float32).fill_(1.0)
    copy = 2 * copy_bytes / _median_seconds(lambda: big.clone(), repeats)
    chain = torch.nn.Sequential(*[torch.nn.Linear(1, 1) for _ in range(50)])
    tiny = torch.ones(1, 1)
    with torch.no_grad():
        overhead = _median_seconds(lambda: chain(tiny), repeats) / 50    # one eager module op
    # memory as matmuls see it: a few rows through a weight far larger than the caches
    rows = 8
    weight = torch.randn(max(copy_bytes // 4 // 4096, 64), 4096)
    x = torch.randn(rows, weight.shape[0])
    read = weight.numel() * 4 / _median_seconds(lambda: x @ weight, repeats)
    cache = _last_level_cache()
    cache_read = 0.0
    if cache:
        a = torch.ones(cache // 16, dtype=torch.float32)          # three such tensors fit in the cache
        out = torch.empty_like(a)
        reps = 20

        def cached_muls() -> None:
            for _ in range(reps):
                torch.mul(a, a, out=out)

        cache_read = reps * 2 * a.numel() * 4 / _median_seconds(cached_muls, repeats)
    return Calibration(matrix, vector, copy, _installed_memory(), torch.get_num_threads(), overhead,
                       read, cache, cache_read)


def _last_level_cache() -> int | None:
    """Size of the largest CPU cache in bytes (Linux sysfs), or None."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
            scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        return None
    return max(sizes) if sizes else None


def _installed_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def profile_yaml(cal: Calibration, name: str = "host-cpu") -> dict:
    """The device-profile document of a calibration."""
    gbs = _sig(cal.copy_bytes_per_s / 1e9)
    memory = _sig((cal.read_bytes_per_s or cal.copy_bytes_per_s) / 1e9)
    when = time.strftime("%Y-%m-%d")
    return {
        "family": "host CPU",
        "source": (f"measured by dispatchprof calibrate on {when} on {platform.machine()} "
                   f"({platform.processor() or 'unknown processor'}), torch {torch.__version__}, "
                   f"{cal.threads} threads"),
        "devices": {name: {
            "kind": "cpu",
            "memory_capacity_gb": None if cal.memory_bytes is None else round(cal.memory_bytes / 1e9, 3),
            "memory_bandwidth_gb_per_s": memory,
            "memory_pj_per_bit": 20,
            "host_to_device_gb_per_s": gbs,
            "host_to_device_pj_per_bit": 0,
            "device_to_host_gb_per_s": gbs,
            "device_to_host_pj_per_bit": 0,
            "matrix_tflops": {k: _sig(v / 1e12) for k, v in cal.matrix_flops.items()},
            "vector_tflops": {k: _sig(v / 1e12) for k, v in cal.vector_flops.items()},
            "pj_per_flop": 1.0,
            "launch_overhead_us": _sig(cal.launch_overhead_s * 1e6),
            **({"cache_capacity_mb": _sig(cal.cache_bytes / 1e6),
                "cache_bandwidth_gb_per_s": _sig(cal.cache_read_bytes_per_s / 1e9)}
               if cal.cache_bytes and cal.cache_read_bytes_per_s else {}),
            "sources": {
                "memory_pj_per_bit": "assumed, not measured: DRAM access energy of the order of 20 pJ/bit",
                "pj_per_flop": "assumed, not measured: about 1 pJ per FLOP for a CPU core",
                "host_to_device_gb_per_s": "the host is the device: its own copy bandwidth, no link energy",
                "memory_capacity_gb": "installed memory (sysconf)",
                "memory_bandwidth_gb_per_s": "weight bytes / time of an 8-row matmul through a weight far "
                                             "larger than the caches (memory as matmuls see it)",
                "cache_bandwidth_gb_per_s": "bytes read and written / time of an element-wise mul on "
                                            "tensors that fit in the last-level cache",
                "launch_overhead_us": "time per op of a chain of tiny nn.Linear modules (eager overhead)",
                "cache_capacity_mb": "the largest CPU cache (sysfs)",
            },
        }},
    }


def calibrated_device(cal: Calibration, name: str = "host-cpu"):
    """The Device of a calibration, without writing a file."""
    text = yaml.safe_dump(profile_yaml(cal, name), sort_keys=False)
    return parse_profile(text, f"<calibration {name}>")[0]


def _sig(x: float) -> float:
    """``x`` to 6 significant digits (readable YAML, no loss that matters)."""
    return float(f"{x:.6g}")


def write_profile(path: str | os.PathLike, cal: Calibration, name: str = "host-cpu") -> str:
    """Write the profile atomically, after checking that it loads: a profile that would not load
    is never written."""
    text = "# Written by dispatchprof calibrate; units are in the field names.\n" + \
        yaml.safe_dump(profile_yaml(cal, name), sort_keys=False)
    parse_profile(text, os.fspath(path))
    return write_atomic(path, text)
