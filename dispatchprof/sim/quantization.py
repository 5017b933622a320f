"""Weights stored in a narrower dtype, and the modules a checkpoint leaves in the model's own.

A simulation's ``weight_dtype`` is None (every parameter in its counted dtype), a name of
`WEIGHT_BITS` (every parameter stored in it: ``"fp8"``, ``"fp4"``, ``"int4"``, ...), or a
`Quantized`: a dtype and the modules it does not cover. Published quantized checkpoints are the
latter: NVIDIA's NVFP4 DeepSeek-R1, MiniMax-M2.5, Qwen3.5 and Kimi-K2.5 and OpenAI's MXFP4
gpt-oss-120b store their experts (and some MLPs) in 4 bits and leave attention, the router and the
LM head in bf16, each listing those in its config (``exclude_modules``, ``modules_to_not_convert``,
``ignore``).

**Which modules a pattern keeps.** A pattern is a dotted module path with shell wildcards
(``fnmatch``: ``*`` matches any characters, dots included). It keeps the module at a path P when
it matches P itself, a run of P's components at P's end (``self_attn`` keeps
``model.layers.3.self_attn``), or a module above P (``self_attn`` keeps
``model.layers.3.self_attn.q_proj``; ``model.layers.*.self_attn`` too): the patterns of checkpoint
configs read as written. A kept module's parameters are read in their counted dtype, by time,
traffic and memory alike; every other parameter in the `Quantized` dtype.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fnmatch import fnmatchcase

from dispatchprof.sim.device import WEIGHT_BITS


@dataclass(frozen=True)
class Quantized:
    """Parameters stored in ``dtype`` (a key of `WEIGHT_BITS`) but those of the modules ``keep``'s
    patterns match (module docstring), which stay in their counted dtype."""

    dtype: str
    keep: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_weight_dtype(self.dtype)
        if isinstance(self.keep, str) or not all(isinstance(p, str) and p.strip(". ") for p in self.keep):
            raise ValueError(f"Quantized keep= must be a tuple of module path patterns such as ('self_attn', "
                             f"'lm_head'), got {self.keep!r}")

    def __str__(self) -> str:
        return f"{self.dtype} but {', '.join(self.keep)}" if self.keep else self.dtype

    def dtype_of(self, scope: str) -> str | None:
        """The dtype the parameters of module ``scope`` are stored in: None (counted) where a pattern keeps it."""
        return None if _kept(self.keep, scope) else self.dtype


#: What a simulation's ``weight_dtype`` may be.
WeightDtype = str | Quantized | None


@functools.lru_cache(maxsize=65536)
def _kept(patterns: tuple[str, ...], scope: str) -> bool:
    return any(keeps(p, scope) for p in patterns)


def keeps(pattern: str, scope: str) -> bool:
    """Whether ``pattern`` keeps the module at path ``scope`` (module docstring)."""
    return any(fnmatchcase(scope, p) for p in (pattern, f"*.{pattern}", f"{pattern}.*", f"*.{pattern}.*"))


def weight_dtype_of(weight_dtype: WeightDtype, scope: str) -> str | None:
    """The dtype module ``scope``'s parameters are stored in under ``weight_dtype`` (None: counted)."""
    return weight_dtype.dtype_of(scope) if isinstance(weight_dtype, Quantized) else weight_dtype


def parameter_bytes(weight_dtype: WeightDtype, name: str, p) -> float:
    """The bytes of parameter ``p`` (a tensor) named ``name`` ("model.layers.0.mlp.down_proj.weight")
    stored as ``weight_dtype`` stores its module's parameters: its own element size where kept."""
    stored = weight_dtype_of(weight_dtype, name.rpartition(".")[0])
    return p.numel() * (p.element_size() if stored is None else WEIGHT_BITS[stored] / 8)


def check_weight_dtype(weight_dtype: WeightDtype, where: str = "weight_dtype") -> None:
    """Refuse a ``weight_dtype`` that is none of None, a `WEIGHT_BITS` name or a `Quantized`."""
    if weight_dtype is None or isinstance(weight_dtype, Quantized) or weight_dtype in WEIGHT_BITS:
        return
    raise ValueError(f"{where} must be one of {tuple(WEIGHT_BITS)} or a Quantized, got {weight_dtype!r}")


def label(weight_dtype: WeightDtype) -> str | None:
    """``weight_dtype`` as reports and JSON name it (None stays None)."""
    return None if weight_dtype is None else str(weight_dtype)


__all__ = ["Quantized", "WeightDtype", "check_weight_dtype", "keeps", "label", "parameter_bytes", "weight_dtype_of"]
