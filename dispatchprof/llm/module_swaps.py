"""Swapping a built model's submodules by class name: the one loop `dispatchprof.llm.mla`,
`dispatchprof.llm.sinks_attention` and `dispatchprof.llm.gated_delta` share."""

from __future__ import annotations

from typing import Callable, Collection

from torch import nn


def swap_modules(model: nn.Module, classes: Collection[str], make: Callable[[nn.Module], nn.Module]) -> int:
    """Replace every submodule of ``model`` whose class name is in ``classes`` by ``make(child)``,
    in place (the children found first, then replaced); returns how many were replaced."""
    swaps = [(parent, name, child) for parent in model.modules()
             for name, child in parent.named_children() if type(child).__name__ in classes]
    for parent, name, child in swaps:
        setattr(parent, name, make(child))
    return len(swaps)
