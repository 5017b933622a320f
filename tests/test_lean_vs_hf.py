"""The same Llama config in Hugging Face form and in the lean gpt-fast form (scripts/lean_llama.py):
HF builds cache objects, masks, rotary tables and output dataclasses in Python around every layer,
the lean form does not, so HF's measured model Python per decode step is usually larger; the lean
form dispatches more aten calls. Only the second is tested: the first is measured time.

Measured on the shared 2-core machine under load (6 layers, hidden 64, 16-token prompt, dgx-h100
host), single counts: lean 80k-224k calibration loops, HF 146k-2.0M (a descheduled thread's time
lands in a gap the steady rule cannot median away: outside the repeated layers); HF / lean from 0.65x
to 22x, hence the minimum of three counts each (lean ~80k, HF ~146k-316k). The lean form makes more aten
calls (835 against 517 with 4 layers: views and prim.device queries from its in-place cache
writes), so the dispatch part goes the other way and only the model Python separates the two.
Published figures disagree on the direction for Llama-2-7B on an A100 (gpt-fast's eager starting
point 25.5 tok/s, PyTorch blog, against HF's 44.5 tok/s, ML.ENERGY v1: different software and power
limits; scripts/data/host_time_rows.csv), so no ratio is asserted."""

from __future__ import annotations

import os
import sys

import torch
import transformers as tf

from dispatchprof import OpCounter, fake_inputs, fake_model
from dispatchprof.count.fake import fake_mode
from dispatchprof.llm.generation import count_steps
from dispatchprof.llm.models import build_model
from dispatchprof.results.hosttime import host_totals
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.hostprofile import load_host
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.timeline import step_time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from lean_llama import lean_from_config  # noqa: E402

CONFIG = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
PROMPT = 16


def lean_decode(device):
    """(model Python loops, predicted eager seconds) of one lean decode step after PROMPT tokens."""
    model = fake_model(lambda: lean_from_config(CONFIG, max_len=PROMPT + 8), dtype=torch.bfloat16)
    with fake_mode(model):
        model.setup_caches(1, torch.bfloat16)
        pos0, pos1 = torch.arange(PROMPT), torch.tensor([PROMPT])
    ids0, ids1 = fake_inputs(model, 1, PROMPT, high=200), fake_inputs(model, 1, 1, high=200)
    with torch.no_grad(), OpCounter(model, devices=[device]) as c:
        with c.phase("prefill"):
            model(ids0, pos0)
        start = c.records_counted
        with c.phase("decode"):
            model(ids1, pos1)
        end = c.records_counted
    return calls_and_seconds(c, start, end)


def hf_decode(device):
    """The same for the HF form (the CLI's count of a prefill and one decode step)."""
    c, spans = count_steps(build_model(CONFIG, dtype=torch.bfloat16), 1, [PROMPT, 1], scenarios_of([device]),
                           runtime="eager")
    return calls_and_seconds(c, spans[1].start, spans[1].end)


def calls_and_seconds(c, start, end):
    """(aten calls the host dispatched, predicted eager seconds) of records [start, end) of a count."""
    return host_totals(c.profile.records[start:end]).calls, step_time(c.simulations()[0].ops[start:end])


def test_the_lean_form_dispatches_more_aten_calls_per_decode_step():
    """What does not depend on the machine: the lean form's in-place cache writes dispatch more aten
    calls (views, prim.device queries) than HF's decode step, so its dispatch part of the eager host
    time is the larger; the model Python part, measured, goes the other way (module docstring: too
    noisy on a loaded machine for a test; scripts/validate_host_time.py reports it)."""
    device = load_device("H100-SXM").with_host(load_host("dgx-h100"))
    (lean_calls, lean_s), (hf_calls, hf_s) = lean_decode(device), hf_decode(device)
    assert hf_calls == 759 and lean_calls > hf_calls
    assert lean_s > 0 and hf_s > 0
