"""The model as serving engines run it: the one list of module swaps every built model gets.

A model dispatchprof builds from a config (`dispatchprof.llm.models.build_model`, and the same
model built shallower, `dispatchprof.llm.layer_repeat.shallow_model`) has these modules replaced
over the same weights, each computing the same function in the form engines run it:

- multi-head latent attention (configs with ``kv_lora_rank``): `dispatchprof.llm.mla`, the
  latent-only cache, decodes absorbed and prefills expanded (the engines' MHA form);
- gpt-oss's attention with sinks: `dispatchprof.llm.sinks_attention`, one fused kernel;
- Qwen3.5's gated delta-nets: `dispatchprof.llm.gated_delta`, two fused ops.
"""

from __future__ import annotations

import torch

from dispatchprof.llm.gated_delta import fuse_gated_delta, has_gated_delta
from dispatchprof.llm.mla import absorb_mla, is_mla
from dispatchprof.llm.sinks_attention import fuse_sink_attention, has_sinks


def as_engines_run(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` (one dispatchprof built) with the swaps of the module docstring its config calls
    for, in place; returns it."""
    config = model.config
    if is_mla(config):
        absorb_mla(model)
    if has_sinks(config):
        fuse_sink_attention(model)
    if has_gated_delta(config):
        fuse_gated_delta(model)
    return model
