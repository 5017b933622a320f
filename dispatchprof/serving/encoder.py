"""Prompts with images: the image encoder of a vision-language model, counted once per image.

A request's ``images`` run through the model's image encoder (``get_image_features``: the vision
tower and the projector of LLaVA-style models) before the step that starts its prefill; that
step's time and energy grow by images x the encoder's simulated cost, so the time to first token
includes it. The prompt's ``prompt_tokens`` include the image tokens the projector emits.
"""

from __future__ import annotations

from typing import Any

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.count.fake import fake_mode
from dispatchprof.llm.generation import model_dtype
from dispatchprof.sim.placement import Scenarios


def image_features_fn(model: torch.nn.Module) -> Any:
    """The model's image encoder entry point, or a ValueError naming the model."""
    for owner in (model, getattr(model, "model", None)):
        fn = getattr(owner, "get_image_features", None)
        if fn is not None:
            return fn
    raise ValueError(f"{type(model).__name__} has no image encoder (get_image_features): images in prompts "
                     f"need a vision-language model such as a LLaVA config")


def image_cost(model: torch.nn.Module, scenarios: Scenarios, image_size: int, *, weight_dtype: str | None = None,
               bound: bool = False, runtime: str = "eager", tp: int = 1) -> dict[str, tuple[float, float]]:
    """Per scenario, (seconds, joules: one device's) of one ``image_size`` x ``image_size`` RGB
    image through the encoder, simulated under ``runtime`` and ``tp``."""
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a whole number of pixels >= 1, got {image_size!r}")
    encode = image_features_fn(model)
    dtype = model_dtype(model)
    with fake_mode(model):
        pixels = torch.empty(1, 3, image_size, image_size, dtype=dtype)
    with torch.no_grad(), OpCounter(devices=scenarios, weight_dtype=weight_dtype, bound=bound, runtime=runtime,
                                        tp=tp) as c:
        encode(pixel_values=pixels)
    return {sim.name: (sim.total.time_s, sim.total.energy_j) for sim in c.simulations()}
