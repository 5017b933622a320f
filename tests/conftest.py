"""Shared helpers: the zoo (scripts/zoo.py) on the path, a one-call counter, and the tiny models
and the hand-made device profile that several test files build."""

from __future__ import annotations

import io
import os
import re
import sys
import warnings

import pytest
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

from dispatchprof import OpCounter  # noqa: E402
from op_formulas import CATEGORIES  # noqa: E402


def count(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` under a fresh OpCounter; return the counter."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            fn(*args, **kwargs)
    return c


def counts(cost_or_totals) -> dict[str, int]:
    """The non-zero arithmetic categories and MACs, as a dict (for compact asserts)."""
    keys = CATEGORIES + ("macs",)
    return {k: getattr(cost_or_totals, k) for k in keys if getattr(cost_or_totals, k)}


def only_record(c, op: str):
    """The single record of ``op`` in a counter (asserts there is exactly one)."""
    records = [r for r in c.profile.records if r.op == op]
    assert len(records) == 1, f"expected one {op}, got {[r.op for r in c.profile.records]}"
    return records[0]


def mlp() -> nn.Module:
    """The issue's MLP, seeded: Linear(64, 256), ReLU, Linear(256, 10)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


#: Forward MACs of `mlp` at batch 4: 4*64*256 + 4*256*10 = 65,536 + 10,240 = 75,776.
MLP_FWD_MACS = 75_776

#: The tiny decoder most tests build: 2 layers, hidden 64, 4 query heads and 2 KV heads (head_dim
#: 16), MLP 96, vocab 100, 256 positions.
TINY_LLAMA = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=100, max_position_embeddings=256)
#: A smaller one: 1 layer, hidden 16, 2 heads of 8 (no grouping), MLP 32, vocab 64.
MICRO_LLAMA = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                   num_attention_heads=2, num_key_value_heads=2)


def tiny_model(family: str = "llama", dtype: torch.dtype = torch.float32, **config) -> nn.Module:
    """A weightless (fake-tensor) decoder from ``build_model``: ``family`` is llama, mistral,
    gemma2, qwen2 or mixtral; its config is TINY_LLAMA with ``config`` on top; warnings silenced."""
    import transformers as tf

    from dispatchprof.llm.models import build_model

    cls = {"llama": tf.LlamaConfig, "mistral": tf.MistralConfig, "gemma2": tf.Gemma2Config,
           "qwen2": tf.Qwen2Config, "mixtral": tf.MixtralConfig}[family]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(cls(**{**TINY_LLAMA, **config}), dtype=dtype)


#: A hand-made one-device profile "Tiny": 1 GB, 10 GB/s and 1 pJ/bit memory, host links 1 GB/s
#: and 5 pJ/bit each way, 1 TFLOP/s fp32 matrix, 0.5 vector, 1 pJ/FLOP.
TINY_DEVICE_YAML = """\
family: test
source: hand-made for a test
devices:
  Tiny:
    memory_capacity_gb: 1
    memory_bandwidth_gb_per_s: 10
    memory_pj_per_bit: 1
    host_to_device_gb_per_s: 1
    host_to_device_pj_per_bit: 5
    device_to_host_gb_per_s: 1
    device_to_host_pj_per_bit: 5
    matrix_tflops: {fp32: 1}
    vector_tflops: {fp32: 0.5}
    pj_per_flop: 1
"""


def tiny_device_yaml(**fields) -> str:
    """TINY_DEVICE_YAML with each of ``fields`` (value as YAML text) replacing the device's field
    of that name, or added after the last one."""
    text = TINY_DEVICE_YAML
    for name, value in fields.items():
        text, found = re.subn(rf"^    {name}: .*$", f"    {name}: {value}", text, flags=re.M)
        if not found:
            text += f"    {name}: {value}\n"
    return text


class Terminal(io.StringIO):
    """A text stream that says it is a terminal (the CLI's progress bars draw on it)."""

    def isatty(self) -> bool:
        return True


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``dispatchprof ARGV`` in this process: (exit code, stdout, stderr)."""
    from dispatchprof.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _nothing_left_behind():
    """Every test must leave torch as it found it: no modes, no global module hooks."""
    yield
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o
    assert not m._global_forward_pre_hooks and not m._global_forward_hooks
    assert not o._global_optimizer_pre_hooks and not o._global_optimizer_post_hooks
    assert torch._C._len_torch_dispatch_stack() == 0
    assert torch._C._len_torch_function_stack() == 0
