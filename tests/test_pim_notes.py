"""'Where the time goes' under a PIM system's generation tables (dispatchprof.report.pim_notes), worked
by hand, and present in a real generation on the bundled UPMEM profile."""

import torch

from dispatchprof.llm.generation import profile_generation
from dispatchprof.report.pim_notes import pim_time_note
from dispatchprof.results.generation import DeviceGeneration, PhaseTiming
from dispatchprof.sim.catalog import load_device

from conftest import tiny_model


def generation(prefill: PhaseTiming, decode: PhaseTiming) -> DeviceGeneration:
    return DeviceGeneration(name="UPMEM-2556", ttft_s=prefill.time_s, tpot_first_s=0, tpot_mean_s=0,
                            tpot_last_s=0, prefill=prefill, decode=decode, tokens_per_s=0,
                            decode_tokens_per_s=0, energy_per_token_j=0, capacity=())


def test_the_three_parts_by_hand():
    # prefill 5 s: 3 s of compute-bound ops, 1 s of memory-bound ones; decode 5 s: 3 s and 0.5 s;
    # total 10 s: compute 6 s (60%), MRAM 1.5 s (15%), the rest 2.5 s (25%)
    g = generation(PhaseTiming(time_s=5, compute_bound_s=3, memory_bound_s=1),
                   PhaseTiming(time_s=5, compute_bound_s=3, memory_bound_s=0.5))
    assert pim_time_note(g, [load_device("UPMEM-2556")]) == (
        "UPMEM-2556: where the time goes (prefill + decode): DPU compute 6.00 s (60.0%), MRAM 1.50 s "
        "(15.0%), host transfers and exchanges between DPUs through the host 2.50 s (25.0%)")
    assert pim_time_note(g, [load_device("H100-SXM")]) == ""           # no pim mapping: no note


def test_a_generation_on_upmem_splits_its_whole_time():
    model = tiny_model(dtype=torch.float32)
    g = profile_generation(model, 1, 8, 3, devices=["UPMEM-2556"]).devices["UPMEM-2556"]
    note = pim_time_note(g, [load_device("UPMEM-2556")])
    assert note.startswith("UPMEM-2556: where the time goes (prefill + decode): DPU compute ")
    parts = g.prefill.compute_bound_s + g.decode.compute_bound_s + g.prefill.memory_bound_s + g.decode.memory_bound_s
    assert 0 < parts <= g.total_time_s
    # the rest is what the note calls host transfers and exchanges: positive on UPMEM (every GEMM
    # on more than one DPU broadcasts its vector and gathers its output through the host)
    assert g.total_time_s - parts > 0
