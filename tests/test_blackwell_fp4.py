"""The NVFP4 kernel figures the Blackwell profiles ship (devices/nvidia.yaml, fitted by
scripts/fp4_fit.py on B200 rows): an fp4 GEMV streams its weights at 0.9 of the rate a plain one
reaches and pays 2.5 us more per kernel; fp8 weights pay neither."""

import dataclasses
import warnings

import pytest
import torch

from dispatchprof import OpCounter
from dispatchprof.sim.catalog import load_device


@pytest.mark.parametrize("name", ["B200", "GB200", "B300", "GB300"])
def test_blackwell_profiles_ship_the_b200_fp4_figures(name):
    d = load_device(name)
    assert d.weight_only_efficiency == {"fp4": 0.9}
    assert d.weight_only_kernel_us == {"int8": 4.6, "int4": 5.2, "fp4": 2.5}
    assert "scripts/fp4_fit.py" in load_device("B200").sources["weight_only_kernel_us"]


def _gemv(device, weight_dtype):
    lin = torch.nn.Linear(8192, 8192, bias=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter(devices=[device], weight_dtype=weight_dtype) as c:
            lin(torch.ones(1, 8192))
    return c.simulated().ops[-1]


def test_an_fp4_gemv_on_b200_streams_at_0_9_and_pays_2_5_us_more():
    shipped = load_device("B200")
    plain = dataclasses.replace(shipped, name="B200-plain", weight_only_efficiency={},
                                weight_only_kernel_us={"int8": 4.6, "int4": 5.2})
    fp4, base = _gemv(shipped, "fp4"), _gemv(plain, "fp4")
    assert fp4.t_memory == pytest.approx(base.t_memory / 0.9, rel=1e-12)
    assert fp4.t_overhead - base.t_overhead == pytest.approx(2.5e-6, rel=1e-12)
    fp8, fp8_plain = _gemv(shipped, "fp8"), _gemv(plain, "fp8")          # fp8 is not listed: unchanged
    assert (fp8.t_memory, fp8.t_overhead) == (fp8_plain.t_memory, fp8_plain.t_overhead)
