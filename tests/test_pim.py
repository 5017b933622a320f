"""PIM timing per unit (dispatchprof.sim.pim, pim_timing), worked by hand on a small made-up system
and on the bundled UPMEM profiles, and every promised bad-input message."""

import json

import pytest
import torch
import yaml

from dispatchprof import OpCounter
from dispatchprof.errors import DeviceProfileError
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.loader import parse_profile
from dispatchprof.sim.pim_timing import broadcast_s, gather_s, pim_op_times, scatter_s, serial_gather_s
from dispatchprof.sim.pim import PimSpecError

# 4 DPUs in 2 ranks at 100 MHz; per DPU: int32 add 10 MOPS, fp32 add 2 MOPS, fp32 mul 1 MOPS,
# bank 1 GB/s; per rank: 2 GB/s to the DPUs, 1 GB/s back, broadcast 4 GB/s.
SMALL = {
    "family": "test", "source": "hand-made for a test",
    "devices": {"Small": {
        "kind": "pim", "memory_capacity_gb": 1, "memory_bandwidth_gb_per_s": 4, "memory_pj_per_bit": 0,
        "host_to_device_gb_per_s": 4, "host_to_device_pj_per_bit": 0, "device_to_host_gb_per_s": 2,
        "device_to_host_pj_per_bit": 0, "matrix_tflops": {"fp32": 1e-5}, "vector_tflops": {"fp32": 1e-5},
        "pj_per_flop": 0,
        "pim": {"units": 4, "ranks": 2, "clock_mhz": 100, "max_tasklets": 24, "pipeline_tasklets": 11,
                "tasklets": 11, "mram_gb_per_s": 1, "host_to_rank_gb_per_s": 2, "rank_to_host_gb_per_s": 1,
                "broadcast_to_rank_gb_per_s": 4,
                "unit_mops": {"add": {"int32": 10, "fp32": 2}, "mul": {"int32": 5, "fp32": 1}}}}}}


def small(**pim) -> object:
    data = json.loads(json.dumps(SMALL))
    data["devices"]["Small"]["pim"].update(pim)
    return parse_profile(yaml.safe_dump(data), "small.yaml")[0]


def only(sim, op):
    return next(t for t in sim.ops if sim.records[t.record].op == op)


def test_vector_add_on_n_dpus_with_its_transfers():
    d = small()
    a, b = torch.ones(4000, dtype=torch.int32), torch.ones(4000, dtype=torch.int32)
    with OpCounter(devices=d) as c:
        a + b
    t = only(c.simulated("Small"), "aten.add")
    assert t.t_compute == pytest.approx(1000 / 10e6)            # 4000 adds over 4 DPUs at 10 MOPS = 100 us
    assert t.t_memory == pytest.approx(3 * 16_000 / (4 * 1e9))   # 48 kB over 4 banks of 1 GB/s = 12 us
    assert t.t_transfer == pytest.approx(2 * 16_000 / 4e9)       # two 16 kB inputs in over 2 ranks x 2 GB/s = 8 us
    assert t.time_s == pytest.approx(100e-6 + 8e-6)              # busy max(100, 12) + transfers
    spec = d.pim
    assert scatter_s(spec, 32_000, 4) == pytest.approx(8e-6)     # the same, from the PIM figures
    assert scatter_s(spec, 32_000, 2) == pytest.approx(16e-6)    # 2 DPUs fill one rank: 32 kB / 2 GB/s
    assert gather_s(spec, 16_000, 4) == pytest.approx(8e-6)      # the sum back: 16 kB / (2 x 1 GB/s)


def test_gemv_split_over_dpus_with_the_host_gather():
    d = small()
    lin, x = torch.nn.Linear(100, 8, bias=False), torch.ones(1, 100)
    with OpCounter(devices=d) as c:
        lin(x)
    sim = c.simulated("Small")
    t = only(sim, "aten.mm")
    # [1, 100] @ [100, 8]: 8 output columns -> 4 DPUs, 2 each; 800 MULT, 8 * 99 = 792 ADD
    assert t.t_compute == pytest.approx(800 / (4 * 1e6) + 792 / (4 * 2e6))   # 200 us + 99 us
    # traffic 400 B in + 3,200 B weights + 32 B out over 4 banks of 1 GB/s
    assert t.t_memory == pytest.approx(3632 / 4e9)
    # x (400 B) from the host: 400 / 4 GB/s; then the exchange: broadcast to 4 DPUs in 2 ranks:
    # 4 x 400 / (2 x 4 GB/s), gather of the 32-byte output: 32 / (2 x 1 GB/s)
    assert t.t_transfer == pytest.approx(400 / 4e9)
    assert t.t_comm == pytest.approx(1600 / 8e9 + 32 / 2e9)
    assert broadcast_s(d.pim, 400, 4) == pytest.approx(1600 / 8e9)


def test_a_matrix_times_a_vector_splits_the_matrix_rows():
    d = small()
    a, x = torch.ones(8, 100), torch.ones(100, 1)
    with OpCounter(devices=d) as c:
        a @ x
    t = only(c.simulated("Small"), "aten.mm")
    # [8, 100] @ [100, 1]: the matrix is the larger operand, its 8 rows split over 4 DPUs; x broadcast
    assert t.t_compute == pytest.approx(800 / (4 * 1e6) + 792 / (4 * 2e6))
    assert t.t_comm == pytest.approx(4 * 400 / 8e9 + 32 / 2e9)


def test_a_sum_gathers_one_partial_per_dpu():
    d = small()
    x = torch.ones(4000, dtype=torch.int32)
    with OpCounter(devices=d) as c:
        x.sum()
    r = c.profile.records[0]
    times = pim_op_times(r, d, "int32", 1.0, 16_000 + 8)
    assert times.units == 4 and times.t_compute == pytest.approx(3999 / (4 * 10e6))
    assert times.t_exchange == pytest.approx(4 * 8 / 2e9)        # 4 int64 partials back over 2 ranks x 1 GB/s


def test_an_embedding_lookup_gathers_no_partials():
    # one token's row of a [100, 2] table: 2 output elements on 4 DPUs, but a lookup reduces nothing
    # (a decode step on UPMEM-2556 paid 2,556 x 4 KB of made-up partials, 3.5 ms, before this rule)
    d = small()
    table, ids = torch.nn.Embedding(100, 2), torch.tensor([7])
    with OpCounter(devices=d) as c:
        table(ids)
    r = c.profile.records[0]
    assert r.op == "aten.embedding" and r.out_elements == 2
    times = pim_op_times(r, d, "fp32", 1.0, 8 + 8)
    assert times.units == 4 and times.t_exchange == 0 and times.exchange_bytes == 0


def test_a_float_multiply_costs_the_emulated_rate():
    d = load_device("UPMEM-2556")
    x = torch.ones(2556 * 1000)
    with OpCounter(devices=d) as c:
        x * x
    t = only(c.simulated("UPMEM-2556"), "aten.mul")
    assert t.t_compute == pytest.approx(1000 / 1.91e6)          # 1,000 fp32 MULT per DPU at 1.91 MOPS = 523.6 us
    xi = torch.ones(2556 * 1000, dtype=torch.int32)
    with OpCounter(devices=d) as c:
        xi * xi
    assert only(c.simulated("UPMEM-2556"), "aten.mul").t_compute == pytest.approx(1000 / 25.8e6)    # 38.8 us (fitted)


def test_the_640_dpu_system_runs_its_rates_at_267_mhz():
    d = load_device("UPMEM-640")
    assert d.pim.usable_units == 640 and d.pim.units_per_rank == 64
    assert d.pim.ops_per_s("add", "int32") == pytest.approx(58.56e6 * 267 / 350)
    assert load_device("UPMEM-2556").pim.usable_units == 2556                    # 2,560 built, 4 disabled


def test_too_few_tasklets_leave_the_pipeline_part_empty():
    x = torch.ones(4000, dtype=torch.int32)
    with OpCounter(devices=small(tasklets=4)) as c:
        x + x
    assert only(c.simulated("Small"), "aten.add").t_compute == pytest.approx(1000 / (10e6 * 4 / 11))   # 275 us
    with OpCounter(devices=small(tasklets=16)) as c:
        x + x
    assert only(c.simulated("Small"), "aten.add").t_compute == pytest.approx(1000 / 10e6)    # full past 11


def test_profiles_without_pim_keep_the_roofline():
    assert all(load_device(n).pim is None for n in ("PIM-AI-1chip", "PIM-AI-4dimm", "CXL-PIM-BC", "SAM-LPDDR5PIM"))


@pytest.mark.parametrize("pim, message", [
    ({"units": 6, "ranks": 4}, "field 'pim.units' = 6 is not divisible by 'pim.ranks' = 4"),
    ({"tasklets": 25}, "field 'pim.tasklets' = 25 is above the hardware's 24 threads per unit (allowed: 1 .. 24)"),
    ({"unit_mops": {"sub": {"int32": 1}}}, "unknown op class 'sub'; allowed: add, mul, div"),
    ({"unit_mops": {"add": {"int3": 1}}}, "unknown dtype 'int3'"),
    ({"disabled_units": 4}, "field 'pim.disabled_units' must be a whole number from 0 to units - 1, got 4"),
    ({"clock_mhz": 0}, "field 'pim.clock_mhz' must be a number in (0, 1e6], got 0"),
    ({"serial_transfer_us": -1}, "field 'pim.serial_transfer_us' must be a number in (0, 1e6], got -1"),
])
def test_bad_pim_profiles_name_the_field(pim, message):
    with pytest.raises(DeviceProfileError, match="small.yaml: device 'Small'") as e:
        small(**pim)
    assert message in str(e.value)


def test_a_dtype_without_a_rate_names_the_ones_the_profile_has():
    x = torch.ones(400, dtype=torch.int64)
    with OpCounter(devices=small()) as c:
        x + x
    with pytest.raises(ValueError, match=r"device 'Small' \(aten.add, ADD in int64\): no add throughput for dtype "
                                         r"'int64' on this PIM unit; it has: fp32, int32"):
        c.simulated("Small")


def test_the_cli_says_it_in_one_line(capsys, tmp_path, monkeypatch):
    from dispatchprof.cli import main
    from tests.test_cli_inputs import TINY
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    data = json.loads(json.dumps(SMALL))
    data["devices"]["Small"]["pim"]["unit_mops"] = {"add": {"int32": 10}}
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(data))
    bad = json.loads(json.dumps(SMALL))
    bad["devices"]["Small"]["pim"]["ranks"] = 3
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    monkeypatch.chdir(tmp_path)
    no_rate = "(aten.add, ADD in int64): no add throughput for dtype 'int64' on this PIM unit; it has: int32"
    for device, message in (("small.yaml", no_rate),
                            ("bad.yaml", "field 'pim.units' = 4 is not divisible by 'pim.ranks' = 3")):
        code = main(["tiny.json", "--prompt-len", "8", "--new-tokens", "2", "--top", "0", "--device", device])
        out, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_program_allocating_60_dpus_uses_one_rank():
    from dispatchprof.sim.pim_timing import on_units
    d = on_units(load_device("UPMEM-2556"), 60)
    assert (d.name, d.pim.usable_units, d.pim.ranks, d.host_to_device_gb_per_s) == ("UPMEM-2556@60", 60, 1, 2.14)
    assert on_units(load_device("UPMEM-2556"), 480).host_to_device_gb_per_s == 4.12     # 8 x 2.14 capped at 4.12
    assert on_units(load_device("UPMEM-2556"), 65).pim.ranks == 2
    with pytest.raises(ValueError, match="device 'UPMEM-2556' has 2556 usable units; asked for 2557"):
        on_units(load_device("UPMEM-2556"), 2557)


def test_a_few_dpus_transfer_at_their_own_serial_figures():
    spec = load_device("UPMEM-2556").pim
    assert scatter_s(spec, 0.0831e9, 1) == pytest.approx(1.0)           # one DPU: 0.0831 GB/s, not a rank's 2.14
    assert scatter_s(spec, 0.0831e9 * 20, 20) == pytest.approx(1.0)     # 20 DPUs: 20 x 0.0831 = 1.66 GB/s < 2.14
    assert scatter_s(spec, 2.14e9, 26) == pytest.approx(1.0)            # 26 DPUs: 26 x 0.0831 = 2.16: the rank's 2.14
    assert gather_s(spec, 0.149e9 * 10, 10) == pytest.approx(1.0)       # 10 DPUs: 10 x 0.149 = 1.49 GB/s < 1.75
    assert gather_s(spec, 1.75e9, 64) == pytest.approx(1.0)             # one full rank: 1.75 GB/s


def test_ranks_add_up_to_the_hosts_ceiling():
    spec = load_device("UPMEM-2556").pim
    assert scatter_s(spec, 4.12e9, 128) == pytest.approx(1.0)           # two ranks: min(2 x 2.14, 4.12) = 4.12
    assert scatter_s(spec, 2.14e9, 64) == pytest.approx(1.0)            # one rank: 2.14 GB/s
    assert gather_s(spec, 2.99e9, 2556) == pytest.approx(1.0)           # 40 ranks: min(40 x 1.75, 2.99) = 2.99
    d = small(host_to_units_max_gb_per_s=3)                             # the small system: 2 ranks x 2 GB/s
    assert scatter_s(d.pim, 30_000, 4) == pytest.approx(10e-6)          # capped: 30 kB / 3 GB/s
    assert scatter_s(small().pim, 32_000, 4) == pytest.approx(8e-6)     # no ceiling: 32 kB / 4 GB/s


def test_a_serial_read_back_pays_a_fixed_cost_per_dpu():
    spec = small(unit_to_host_gb_per_s=0.5, serial_transfer_us=100).pim
    assert serial_gather_s(spec, 1e6, 4) == pytest.approx(1e6 / 0.5e9 + 4 * 100e-6)   # 2 ms + 0.4 ms
    with pytest.raises(PimSpecError, match="gives no serial unit -> host bandwidth"):
        serial_gather_s(small().pim, 1e6, 4)


def test_an_integer_division_is_charged_once_a_float_one_with_its_rounding():
    from dispatchprof.sim.device import dtype_key
    from dispatchprof.sim.pim_timing import charged_counts
    device = load_device("UPMEM-2556")
    for dtype, charged_other in ((torch.int32, 0), (torch.float32, 1000)):
        x = torch.empty(1000, dtype=dtype, device="meta")
        with OpCounter() as c:
            torch.div(x, 8, rounding_mode="floor")
        [r] = c.profile.records
        assert (r.cost.div, r.cost.other) == (1000, 1000)                  # the count: a DIV and its rounding
        key = dtype_key(r.dtype)                                            # as the simulator passes it
        assert charged_counts(r, key)["other"] == charged_other
        t = pim_op_times(r, device, key, 1.0, 0.0)
        rate = {torch.int32: 11.27e6, torch.float32: 0.34e6}[dtype]     # div MOPS of one DPU
        assert t.units == 1000 and t.t_compute == pytest.approx((1 + charged_other / 1000) / rate)
