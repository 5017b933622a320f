"""DeepSpeed's FLOP rules next to ours, on the cases docs/deepspeed.md quotes.

    python scripts/deepspeed_side_by_side.py

For each case: the forward FLOPs and MACs that dispatchprof.flops_profiler gives under
flop_rules="deepspeed" (the default) and under flop_rules="dispatchprof" (FLOPs = ADD + MULT of
every op's reference algorithm), and the numbers DeepSpeed v0.19.6's own profiler printed for the
same module and input (run with its profiler.py; None where it was not run).
"""

from __future__ import annotations

import torch
from torch import nn

from dispatchprof.flops_profiler import get_model_profile


class LeNet5(nn.Module):
    """DeepSpeed's unit-test model (tests/unit/profiling/flops_profiler)."""

    def __init__(self, n_classes: int = 10) -> None:
        super().__init__()
        self.feature_extractor = nn.Sequential(
            nn.Conv2d(1, 6, 5), nn.Tanh(), nn.AvgPool2d(2), nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(16, 120, 5), nn.Tanh())
        self.classifier = nn.Sequential(nn.Linear(120, 84), nn.Tanh(), nn.Linear(84, n_classes))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.classifier(torch.flatten(self.feature_extractor(x), 1))
        return logits, nn.functional.softmax(logits, dim=1)


class Upsample(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.interpolate(x, scale_factor=2)


class AddMM(nn.Module):
    def forward(self, a, b, c):
        return torch.addmm(a, b, c)


class MHA(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x)[0]


def cases():
    """(name, model, args, DeepSpeed's (flops, macs) as its profiler printed them)."""
    torch.manual_seed(0)
    yield "Linear(16, 32), input 2x8x16", nn.Linear(16, 32), [torch.randn(2, 8, 16)], (16384, 8192)
    yield ("MLP 64-256-10 with ReLU, batch 4", nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)),
           [torch.randn(4, 64)], None)
    yield "Conv2d(3, 4, 3, padding=1), 1x3x8x8", nn.Conv2d(3, 4, 3, padding=1), [torch.randn(1, 3, 8, 8)], \
        (14080, 6912)
    yield "torch.addmm(8x4, 8x16, 16x4)", AddMM(), [torch.randn(8, 4), torch.randn(8, 16), torch.randn(16, 4)], \
        (1056, 512)
    yield "interpolate(scale 2), 1x3x8x8", Upsample(), [torch.randn(1, 3, 8, 8)], (768, 0)
    yield "LayerNorm(16), 2x8x16", nn.LayerNorm(16), [torch.randn(2, 8, 16)], None
    yield "GELU, 2x8x16", nn.GELU(), [torch.randn(2, 8, 16)], None
    yield "Softmax(-1), 2x8x16", nn.Softmax(-1), [torch.randn(2, 8, 16)], None
    yield "Tanh, 2x8x16", nn.Tanh(), [torch.randn(2, 8, 16)], None
    yield "MultiheadAttention(16, 2), 2x8x16 (train)", MHA().train(), [torch.randn(2, 8, 16)], (41216, 20480)
    yield "LeNet5, batch 1024", LeNet5(), [torch.randn(1024, 1, 32, 32)], (866076672, 426516480)


def main() -> None:
    print(f"{'case':44} {'deepspeed rules':>22} {'dispatchprof rules':>22} {'DeepSpeed printed':>22}")
    for name, model, args, printed in cases():
        row = []
        for rules in ("deepspeed", "dispatchprof"):
            flops, macs, _ = get_model_profile(model, args=args, print_profile=False, as_string=False,
                                               flop_rules=rules)
            row.append(f"{flops:,} / {macs:,}")
        ds = "-" if printed is None else f"{printed[0]:,} / {printed[1]:,}"
        print(f"{name:44} {row[0]:>22} {row[1]:>22} {ds:>22}")
    print("(FLOPs / MACs of one forward)")


if __name__ == "__main__":
    main()
