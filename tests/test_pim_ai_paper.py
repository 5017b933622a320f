"""The PIM-AI paper's Llama-2-7B decode rate, in the setting its simulator's script runs, as a user runs
it here (the catalog's llama-2-7b, `profile_generation`, the bundled PIM-AI profiles).

The paper: C. Ortega, Y. Falevoz, R. Ayrignac (UPMEM), "PIM-AI: A Novel Architecture for
High-Efficiency LLM Inference", arXiv 2411.17309 (arxiv.org/html/2411.17309v1). What of it could be
read where this test was written is its abstract: "We have developed a simulator to evaluate the
performance of PIM-AI in various scenarios and demonstrate its significant advantages over
conventional architectures. In cloud-based scenarios, PIM-AI reduces the 3-year TCO per
queries-per-second by up to 6.94x compared to state-of-the-art GPUs, depending on the LLM model
used. In mobile scenarios, PIM-AI achieves a 10- to 20-fold reduction in energy per token compared
to state-of-the-art mobile SoCs". Its tables could not be retrieved as text (the stored copies hold
the opening of the page only), so the two figures below are the ones quoted in issue #37 ("the
PIM-AI paper figures ... 7.64 vs 7.69, 489.3 vs 492.2 tok/s"), attributed there to the paper and not
checked against its tables: 7.69 tok/s on PIM-AI-1chip and 492.2 tok/s on PIM-AI-4dimm.

The setting is that of the simulator the paper describes, the UPMEM LLM framework
(github.com/upmem/upmem_llm_framework, scripts_simulation/simulations_llama2_7B.py): Llama-2-7b-chat,
batch 1 (``bs = 1``), 64 prompt tokens (``in_tokens = 64``), ``max_length = out_tokens = 128`` (64
generated tokens), bf16 (the framework's default ``sim_data_type``), one device for every layer.

Why the two quoted figures go together: 492.2 / 7.69 = 64.0 = 6553.6 / 102.4 GB/s, the two
profiles' memory bandwidths (devices/pim_ai.yaml), as for a decode step bound by memory: both say
102.4e9 / 7.69 = 13.32 GB read per generated token. Ours, measured by this test's setting on
2026-11-26: a decode step (past 95) moves 13.39 GB: the weights' matrix products 13.22 GB (every
weight but the embedding table, 6,607,343,616 bf16 elements = 13.21 GB), the eager runtime's copy of
the KV cache on append (aten.cat, 0.10 GB), attention's read of the cache (0.05 GB), the pointwise
ops (0.02 GB) and one embedding row (16 KB). So ours is 7.62 tok/s and 487.7 tok/s (-0.9% from the
quoted paper figures): the framework charges a layer's weights and the KV cache it loads, not an
eager copy of the cache on append or the pointwise ops' traffic.

The earlier figures (7.64, 489.3) predate the count's parameter-gather rule (an embedding records
the rows it reads, op_formulas.registry.PARAMETER_GATHERS): the whole 262 MB table
(32,000 x 4,096 x 2 bytes) was charged per step. On this setting the code before that rule gives a
TPOT of 133.81 ms (7.47 tok/s) and today's 131.25 ms: the 2.56 ms between them is 262.1 MB / 102.4
GB/s. (The setting that gave 7.64 is not recorded anywhere in the history; this one is.)
"""

from pathlib import Path

import pytest

from dispatchprof.llm.generation import profile_generation
from dispatchprof.llm.models import build_model
from dispatchprof.sim.catalog import load_device

ROOT = Path(__file__).resolve().parent.parent
#: The quoted paper figures (issue #37), decode tokens/s of Llama-2-7B at batch 1.
PAPER = {"PIM-AI-1chip": 7.69, "PIM-AI-4dimm": 492.2}
#: The framework's script: batch 1, 64 prompt tokens, 128 tokens in all.
BATCH, PROMPT, NEW = 1, 64, 128 - 64


@pytest.fixture(scope="module")
def llama_2_7b_generation():
    model = build_model("llama-2-7b")
    return model, profile_generation(model, BATCH, PROMPT, NEW, devices=list(PAPER))


def weights_read_per_step(model) -> int:
    """Bytes of every bf16 weight a decode step reads: all of them but the embedding table, of
    which it reads one row per token (Llama-2 does not tie the table to the LM head)."""
    table = model.get_input_embeddings().weight
    return (sum(p.numel() for p in model.parameters()) - table.numel()) * 2


def test_weights_a_step_reads_by_hand(llama_2_7b_generation):
    model, _ = llama_2_7b_generation
    # 32 layers x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 norms) + 4096 final norm + 32000 x 4096 head
    assert weights_read_per_step(model) == (32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096)
                                            + 4096 + 32000 * 4096) * 2 == 13_214_687_232


@pytest.mark.parametrize("device", list(PAPER))
def test_decode_rate_beside_the_paper(llama_2_7b_generation, device, capsys):
    model, g = llama_2_7b_generation
    ours = g.devices[device].decode_tokens_per_s
    line = (f"Llama-2-7B bf16, batch 1, 64 + 64 tokens on {device}: decode {ours:.2f} tok/s "
            f"(paper, as quoted: {PAPER[device]} tok/s; {ours / PAPER[device] - 1:+.1%})")
    with capsys.disabled():
        print("\n" + line)
    assert line in (ROOT / "docs" / "pim.md").read_text(), line         # the docs show this run
    # a step is bound by memory: at least the weights it reads over the bandwidth, and at most 3%
    # more (the KV cache read and copied on append, activations, the per-element costs)
    floor_s = weights_read_per_step(model) / (load_device(device).memory_bandwidth_gb_per_s * 1e9)
    tpot = g.devices[device].tpot_mean_s
    assert floor_s < tpot < floor_s * 1.03
    # the explained difference: within the 3% the framework leaves out, below the paper's rate
    assert 0.97 < ours / PAPER[device] < 1.0


def test_the_two_devices_differ_by_their_bandwidths(llama_2_7b_generation):
    _, g = llama_2_7b_generation
    ratio = g.devices["PIM-AI-4dimm"].decode_tokens_per_s / g.devices["PIM-AI-1chip"].decode_tokens_per_s
    assert ratio == pytest.approx(6553.6 / 102.4, rel=0.005)        # 64, as 492.2 / 7.69
    assert PAPER["PIM-AI-4dimm"] / PAPER["PIM-AI-1chip"] == pytest.approx(64, rel=0.001)
