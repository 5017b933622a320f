"""`time_op` (dispatchprof.sim.timing) of one op at several shapes at once: every number of the
record an array, every term the scalar formula's value at each shape, bit for bit; a choice
between formulas that differs between the shapes is refused by name."""

import dataclasses

import numpy as np
import pytest

from conftest import tiny_device_yaml
from dispatchprof.results.records import OpRecord
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.timing import ShapeDependent, time_op
from op_formulas.cost import Cost

FIELDS = ("t_compute", "t_memory", "t_transfer", "t_overhead", "dynamic_j", "t_comm", "work", "traffic_bytes",
          "busy_s", "time_s", "energy_j")


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """A device with GEMM tiles, a last-level cache that the small shapes fit in, unoverlapped
    compute and weight-only figures (every branch time_op has for a roofline device)."""
    text = tiny_device_yaml(cache_capacity_mb=0.02, cache_bandwidth_gb_per_s=40, compute_units=6,
                            gemm_tile="[64, 32]", unoverlapped_fraction=0.25, launch_overhead_us=2,
                            matrix_memory_efficiency=0.8, weight_only_efficiency="{int8: 0.5}",
                            weight_only_kernel_us="{int8: 1.5}")
    path = tmp_path_factory.mktemp("dev") / "odd.yaml"
    path.write_text(text)
    return scenarios_of([str(path)]).items[0][1].devices[0]


def _mm(m, k=96, n=80):
    """aten.mm [m, k] x [k, n] in fp16 whose weight [k, n] is a parameter (counts by COUNTING.md)."""
    cost = Cost(add=m * n * (k - 1), mult=m * n * k, macs=m * n * k, bytes_read=(m * k + k * n) * 2,
                bytes_written=m * n * 2)
    return OpRecord("aten.mm", "lm_head", "forward", "float16", cost, param_bytes=k * n * 2, param_elements=k * n,
                    out_elements=m * n, shapes=((m, k), (k, n)))


def _at(ms: list[int], record) -> OpRecord:
    """The record of every m in ``ms``, its numbers arrays over them (as dispatchprof.sim.vector builds it)."""
    one = [record(m) for m in ms]
    arr = lambda get: np.array([get(r) for r in one], dtype=np.float64)   # noqa: E731
    cost = Cost(**{f.name: arr(lambda r, f=f: getattr(r.cost, f.name)) for f in dataclasses.fields(Cost)})
    shapes = tuple(tuple(arr(lambda r, a=a, b=b: r.shapes[a][b]) for b in range(len(s)))
                   for a, s in enumerate(one[0].shapes))
    return dataclasses.replace(one[0], cost=cost, param_bytes=arr(lambda r: r.param_bytes),
                               param_elements=arr(lambda r: r.param_elements),
                               out_elements=arr(lambda r: r.out_elements), shapes=shapes)


@pytest.mark.parametrize("weight_dtype", [None, "int8"])
def test_each_shape_equals_the_scalar_formula(odd, weight_dtype):
    # m from 1 (16-row tiles, in the cache) to 300 (5 row tiles of 64, out of the 20 kB cache):
    # tile and wave utilisation, cache and memory bandwidth all change across these shapes
    ms = [1, 7, 16, 17, 64, 65, 128, 300]
    got = time_op(0, _at(ms, _mm), [odd], set(), weight_dtype, False)
    for j, m in enumerate(ms):
        want = time_op(0, _mm(m), [odd], set(), weight_dtype, False)
        for f in FIELDS:
            assert np.broadcast_to(getattr(got, f), len(ms))[j] == getattr(want, f), (f, m)
    traffic = [(m * 96 + 96 * 80 + m * 80) * 2 for m in ms]
    assert traffic[0] <= 20_000 < traffic[-1]        # both bandwidths are used


def test_bandwidth_on_arrays_is_the_scalar_rule(odd):
    traffic = np.array([0.0, 20_000.0, 20_001.0, 1e9])
    got = odd.bandwidth_for(traffic, True)
    assert got.tolist() == [odd.bandwidth_for(t, True) for t in traffic.tolist()]
    assert got[1] == 40e9 * 0.8 and got[2] != got[1]     # 20 kB fits the cache (40 GB/s x 0.8), one byte more does not


def test_a_choice_that_differs_between_shapes_is_refused(odd):
    def maybe_mm(m):                                  # MACs at m > 0 only: matrix at some shapes, vector at others
        r = _mm(m)
        return dataclasses.replace(r, cost=dataclasses.replace(r.cost, macs=r.cost.macs if m > 1 else 0))

    with pytest.raises(ShapeDependent, match="aten.mm in lm_head: its MACs are zero at some shapes only"):
        time_op(0, _at([1, 2], maybe_mm), [odd], set(), None, False)
