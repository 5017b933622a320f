"""The zoo's diffusion and timm families (issue #40), built from their own configs with no weights,
as scripts/zoo.py's entries; present only where diffusers or timm imports.

diffusers: a UNet2DConditionModel (cross-attention down/up blocks), an AutoencoderKL (encode,
sample, decode), a DiT (``DiTTransformer2DModel``, class-conditioned, adaLN-zero), the SD3 and
Flux transformers (joint attention, rotary embeddings on Flux), and a 2-step sampling loop (a
UNet under a DDIM scheduler, then its latents through the VAE decoder). Every one runs forward,
a loss and backward, like the other zoo models; the sampling loop backpropagates through both
steps. timm: a dozen families by ``timm.create_model(name, pretrained=False)`` at a small image
size; where torchvision cannot load (torch 2.13 CPU has no CPU torchvision wheel on the registry),
timm imports against placeholder torchvision modules (scripts/torchvision_absent.py), installed
when the first timm model is built. scripts/coverage.py runs them; tests/test_zoo_extra.py a few.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

import torch
from torch import nn

BATCH = 2
LATENT = 8          # latent side (pixels / 8 for the VAE)
TEXT_LEN, TEXT_DIM = 4, 32


def _has(module: str) -> bool:
    """True when ``module`` imports here."""
    if importlib.util.find_spec(module) is None:
        return False
    try:
        importlib.import_module(module)
    except Exception:   # noqa: BLE001 - a broken install (e.g. a CUDA torchvision on CPU torch) is 'absent'
        return False
    return True


def _unet():
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(
        sample_size=LATENT, in_channels=4, out_channels=4, block_out_channels=(16, 32), layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=TEXT_DIM, attention_head_dim=8, norm_num_groups=8)


def _unet_inputs() -> dict:
    return {"sample": torch.randn(BATCH, 4, LATENT, LATENT), "timestep": torch.tensor([10, 500]),
            "encoder_hidden_states": torch.randn(BATCH, TEXT_LEN, TEXT_DIM)}


def _vae():
    from diffusers import AutoencoderKL
    return AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                         up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), layers_per_block=1,
                         latent_channels=4, norm_num_groups=4, sample_size=16)


class VAEStep(nn.Module):
    """Encode, sample the posterior (one reparameterised draw), decode: a VAE training forward."""

    def __init__(self) -> None:
        super().__init__()
        self.vae = _vae()

    def forward(self, x: torch.Tensor) -> dict:
        posterior = self.vae.encode(x).latent_dist
        z = posterior.sample()
        return {"recon": self.vae.decode(z).sample, "kl": posterior.kl()}


def _dit():
    from diffusers import DiTTransformer2DModel
    return DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=2,
                                 sample_size=LATENT, patch_size=2, num_embeds_ada_norm=10, norm_num_groups=4)


def _sd3():
    from diffusers import SD3Transformer2DModel
    return SD3Transformer2DModel(sample_size=LATENT, patch_size=2, in_channels=4, out_channels=4, num_layers=2,
                                 attention_head_dim=8, num_attention_heads=2, joint_attention_dim=TEXT_DIM,
                                 caption_projection_dim=16, pooled_projection_dim=16, pos_embed_max_size=8)


def _sd3_inputs() -> dict:
    return {"hidden_states": torch.randn(BATCH, 4, LATENT, LATENT),
            "encoder_hidden_states": torch.randn(BATCH, TEXT_LEN, TEXT_DIM),
            "pooled_projections": torch.randn(BATCH, 16), "timestep": torch.tensor([10, 500])}


def _flux():
    from diffusers import FluxTransformer2DModel
    return FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                  attention_head_dim=8, num_attention_heads=2, joint_attention_dim=TEXT_DIM,
                                  pooled_projection_dim=16, axes_dims_rope=(2, 2, 4))


def _flux_inputs() -> dict:
    side = LATENT // 2          # Flux packs 2x2 latent patches of 4 channels into 16-channel tokens
    axes = (torch.zeros(1), torch.arange(float(side)), torch.arange(float(side)))   # (frame, row, column) ids
    img_ids = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1)
    return {"hidden_states": torch.randn(BATCH, side * side, 16),
            "encoder_hidden_states": torch.randn(BATCH, TEXT_LEN, TEXT_DIM),
            "pooled_projections": torch.randn(BATCH, 16), "timestep": torch.tensor([0.1, 0.9]),
            "img_ids": img_ids.reshape(-1, 3).float(), "txt_ids": torch.zeros(TEXT_LEN, 3)}


class TwoStepSampler(nn.Module):
    """Text-to-image sampling in two DDIM steps with classifier-free guidance (the UNet runs on
    the conditional and unconditional halves of one batch), then the VAE decoder on the latents.
    The scheduler's timesteps are fixed at construction (Python ints), so no step reads a value."""

    def __init__(self) -> None:
        super().__init__()
        from diffusers import DDIMScheduler
        self.unet, self.vae = _unet(), _vae()
        self.scheduler = DDIMScheduler(num_train_timesteps=1000)
        self.scheduler.set_timesteps(2)
        # DDIM's "leading" spacing of 2 steps over 1000 (the timesteps set_timesteps makes), as
        # Python ints: reading them back from its tensor would need values on fake tensors
        self.steps = list(range(0, 1000, 1000 // 2))[::-1]
        self.guidance = 5.0

    def forward(self, latents: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        context = torch.cat([torch.zeros_like(text), text])
        for t in self.steps:
            noise = self.unet(torch.cat([latents, latents]), t, encoder_hidden_states=context).sample
            uncond, cond = noise.chunk(2)
            latents = self.scheduler.step(uncond + self.guidance * (cond - uncond), t, latents).prev_sample
        return self.vae.decode(latents / self.vae.config.scaling_factor).sample


def _diffusers_entries(entry_cls: type) -> dict[str, Any]:
    sample_mse = lambda out: out.sample.float().square().mean()        # noqa: E731
    return {
        "sd-unet": entry_cls("sd-unet", _unet, _unet_inputs, sample_mse),
        "sd-vae": entry_cls("sd-vae", VAEStep, lambda: {"x": torch.randn(BATCH, 3, 16, 16)},
                            lambda out: out["recon"].float().square().mean() + out["kl"].mean()),
        "dit": entry_cls("dit", _dit, lambda: {"hidden_states": torch.randn(BATCH, 4, LATENT, LATENT),
                                               "timestep": torch.tensor([10, 500]),
                                               "class_labels": torch.tensor([1, 7])}, sample_mse),
        "sd3": entry_cls("sd3", _sd3, _sd3_inputs, sample_mse),
        "flux": entry_cls("flux", _flux, _flux_inputs, sample_mse),
        "sd-sampling": entry_cls("sd-sampling", TwoStepSampler,
                                 lambda: {"latents": torch.randn(1, 4, LATENT, LATENT),
                                          "text": torch.randn(1, TEXT_LEN, TEXT_DIM)},
                                 lambda out: out.float().square().mean()),
    }


#: timm families: zoo name -> (timm model name, image side). Small variants, no weights.
TIMM_MODELS = {
    "timm-vit": ("vit_tiny_patch16_224", 32), "timm-deit": ("deit_tiny_patch16_224", 32),
    "timm-convnext": ("convnext_atto", 32), "timm-efficientnet": ("efficientnet_b0", 32),
    "timm-regnet": ("regnetx_002", 32), "timm-swin": ("swin_tiny_patch4_window7_224", 56),
    "timm-mobilenetv3": ("mobilenetv3_small_050", 32), "timm-resnest": ("resnest14d", 32),
    "timm-coatnet": ("coatnet_nano_rw_224", 64), "timm-maxvit": ("maxvit_nano_rw_256", 64),
    "timm-eva": ("eva02_tiny_patch14_224", 28), "timm-beit": ("beit_base_patch16_224", 32),
    "timm-sequencer": ("sequencer2d_s", 32),
}


#: Fewer blocks for the base-size transformers (the zoo wants every op, not the depth).
TIMM_KWARGS = {"timm-beit": {"depth": 2}, "timm-vit": {"depth": 2}, "timm-deit": {"depth": 2}, "timm-eva": {"depth": 2}}


def _timm_build(name: str, model_name: str, side: int) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision_absent
        torchvision_absent.install()        # timm imports torchvision; see that module
        import timm
        kwargs = {"img_size": side} if _is_transformer(model_name) else {}   # CNNs take any size
        return timm.create_model(model_name, pretrained=False, num_classes=10, **kwargs, **TIMM_KWARGS.get(name, {}))
    return build


def _is_transformer(model_name: str) -> bool:
    return model_name.split("_")[0] in ("vit", "deit", "swin", "eva02", "beit", "coatnet", "maxvit")


def _timm_entries(entry_cls: type) -> dict[str, Any]:
    out = {}
    for name, (model_name, side) in TIMM_MODELS.items():
        out[name] = entry_cls(name, _timm_build(name, model_name, side),
                              lambda side=side: {"x": torch.randn(BATCH, 3, side, side)},
                              lambda logits: logits.float().logsumexp(-1).mean())
    return out


HAS_DIFFUSERS = _has("diffusers")
HAS_TIMM = importlib.util.find_spec("timm") is not None     # imported when a timm model is built
DIFFUSERS_NAMES = ("sd-unet", "sd-vae", "dit", "sd3", "flux", "sd-sampling")
#: The names this environment can build (diffusers and timm are optional).
NAMES = (DIFFUSERS_NAMES if HAS_DIFFUSERS else ()) + (tuple(TIMM_MODELS) if HAS_TIMM else ())


def entries(entry_cls: type) -> dict[str, Any]:
    """The families whose library imports, as ``entry_cls(name, build, inputs, loss)``."""
    e: dict[str, Any] = {}
    if HAS_DIFFUSERS:
        e.update(_diffusers_entries(entry_cls))
    if HAS_TIMM:
        e.update(_timm_entries(entry_cls))
    return e
