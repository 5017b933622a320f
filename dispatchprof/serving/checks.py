"""What serving refuses before it counts or runs: weights that cannot fit a replica, a draft model
of another vocabulary, prompts a fixed-window encoder cannot read. Each refusal is one line that
names what was wrong and what is allowed."""

from __future__ import annotations

from typing import Sequence

import torch

from dispatchprof.serving.requests import Request
from dispatchprof.sim.device import Device
from dispatchprof.sim.quantization import WeightDtype, parameter_bytes


def check_weights_fit(model: torch.nn.Module, devices: Sequence[Device], weight_dtype: WeightDtype, gpus: int) -> None:
    """Refuse, before any count, a model whose weights cannot fit on a replica of ``gpus`` GPUs
    even spread evenly over them: its parameters' bytes (in ``weight_dtype``, else their own dtype)
    / gpus above a device's memory capacity. Every layout holds at least that much per GPU (each
    weight is held at least once), so nothing this refuses could have run; the KV cache's share of
    memory is checked when the run starts (`dispatchprof.serving.serve.ServingSetup.cache`)."""
    total = sum(parameter_bytes(weight_dtype, name, p) for name, p in model.named_parameters())
    for d in devices:
        if d.memory_capacity_gb is not None and total / gpus > d.memory_capacity_gb * 1e9:
            raise ValueError(f"the weights ({total / 1e9:.2f} GB{f' in {weight_dtype}' if weight_dtype else ''}) "
                             f"need at least {total / gpus / 1e9:.2f} GB on each of the replica's {gpus} GPU(s), "
                             f"more than {d.name}'s {d.memory_capacity_gb:.2f} GB: use more GPUs (--tp, --ep) or "
                             f"smaller weights (--weight-dtype)")


def check_vocabulary(target: torch.nn.Module, draft: torch.nn.Module) -> None:
    """A draft model must share the target's vocabulary."""
    tv = getattr(target.config, "vocab_size", None)
    dv = getattr(draft.config, "vocab_size", None)
    if tv != dv:
        raise ValueError(f"the draft model has a vocabulary of {dv} tokens and the target {tv}: speculative "
                         f"decoding needs the same vocabulary")


def check_fixed_prompts(requests: Sequence[Request], positions: int) -> None:
    """Every prompt of a fixed-window encoder (Whisper) has its window's positions."""
    for i, r in enumerate(requests):
        if r.prompt_tokens != positions:
            raise ValueError(f"request {i} has prompt_tokens={r.prompt_tokens}; this model's encoder reads one fixed "
                             f"audio window of {positions} positions, so every request's prompt_tokens must be "
                             f"{positions}")


__all__ = ["check_fixed_prompts", "check_vocabulary", "check_weights_fit"]
