"""The forward profile of a model that does not generate token by token: encoder-only models
(BERT) and encoder-decoder models (T5) run one forward pass, and their report is tokens/s of the
processed tokens, with no TTFT, TPOT or decode metrics.

An encoder reads ``batch x seq_len`` tokens. An encoder-decoder reads ``batch x seq_len`` tokens
into its encoder and ``batch x decoder_len`` tokens (teacher-forced) into its decoder, in one
forward; processed tokens = batch * (seq_len + decoder_len).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.llm.models import token_ids
from dispatchprof.results.profile import Profile
from dispatchprof.llm.shape_generic import ForwardStream
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import Simulation, simulate


@dataclass(frozen=True)
class ForwardProfile:
    """One forward pass: its counts, the tokens it processed and its simulation per device."""

    kind: str                         # "encoder" or "encoder-decoder"
    batch: int
    seq_len: int
    decoder_len: int                  # 0 for an encoder
    profile: Profile
    simulations: dict[str, Simulation]

    @property
    def tokens(self) -> int:
        """Tokens processed: batch * (seq_len + decoder_len)."""
        return self.batch * (self.seq_len + self.decoder_len)


def generates(model: torch.nn.Module) -> bool:
    """True for a decoder-only model that generates token by token (profile_generation);
    False for an encoder or an encoder-decoder (profile_forward)."""
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False):
        return False
    can = getattr(model, "can_generate", None)
    return bool(can()) if callable(can) else False


def model_kind(model: torch.nn.Module) -> str:
    """"decoder", "encoder" or "encoder-decoder"."""
    if generates(model):
        return "decoder"
    return "encoder-decoder" if getattr(model.config, "is_encoder_decoder", False) else "encoder"


def profile_forward(model: torch.nn.Module, batch: int, seq_len: int, decoder_len: int = 1, *,
                    devices: Any = None, weight_dtype: str | None = None, bound: bool = False,
                    runtime: str = "eager", tp: int = 1, stream: ForwardStream | None = None) -> ForwardProfile:
    """Count and simulate one forward pass (see the module docstring); ``runtime`` and ``tp`` as
    in OpCounter. ``stream`` (a `ForwardStream` of this model) gives the profile from its exact
    polynomials where it covers the sizes (dispatchprof.llm.shape_generic), else it is counted."""
    for name, value in (("batch", batch), ("seq_len", seq_len), ("decoder_len", decoder_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    kind = model_kind(model)
    if stream is not None:
        scenarios = scenarios_of(devices)
        profile = stream.profile(batch, seq_len, decoder_len)
        sims = {name: simulate(profile, scenarios[name], weight_dtype=weight_dtype, name=name, bound=bound,
                               runtime=runtime, tp=tp, step_starts=(0,)) for name in scenarios}
        return ForwardProfile(kind, batch, seq_len, decoder_len if kind == "encoder-decoder" else 0, profile, sims)
    kwargs = {"input_ids": token_ids(model, batch, seq_len)}
    if kind == "encoder-decoder":
        kwargs["decoder_input_ids"] = token_ids(model, batch, decoder_len)
    with torch.no_grad(), OpCounter(devices=devices, weight_dtype=weight_dtype, bound=bound, runtime=runtime,
                                        tp=tp) as c:
        with c.phase("forward"):
            model(**kwargs)
    return ForwardProfile(kind, batch, seq_len, decoder_len if kind == "encoder-decoder" else 0, c.profile,
                          {sim.name: sim for sim in c.simulations()})


def forward_to_dict(f: ForwardProfile, model: str = "", dtype: str = "") -> dict[str, Any]:
    """The JSON form of a forward profile (schema "dispatchprof.forward", docs/cli.md)."""
    devices = {}
    for name, sim in f.simulations.items():
        t = sim.total
        devices[name] = {"time_s": t.time_s, "energy_j": t.energy_j,
                         "tokens_per_s": f.tokens / t.time_s if t.time_s else 0.0,
                         "energy_per_token_j": t.energy_j / f.tokens, "fits": sim.fits()}
    return {"schema": "dispatchprof.forward", "version": 1, "model": model, "kind": f.kind, "dtype": dtype,
            "batch": f.batch, "seq_len": f.seq_len, "decoder_len": f.decoder_len, "tokens": f.tokens,
            "totals": asdict(f.profile.total()), "devices": devices, "profile": f.profile.to_dict()}
