"""dispatchprof next to the tools users already run: FLOPs, MACs, params and wall time.

    python scripts/compare_peers.py [--markdown]        # install peers: pip install '.[peers]'

Models (real tensors, random weights, CPU): GPT-2 (124M) and BERT-base at batch 1 x 128 tokens,
Llama-3.2-1B at 1 x 64 tokens, and a ResNet-style CNN at 1 x 3 x 64 x 64. Peers: torch's
FlopCounterMode, fvcore, ptflops, thop, calflops and DeepSpeed's flops profiler. A peer that is
not installed or fails on a model is reported as such, not hidden. docs/comparison.md explains
every difference by rule.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import warnings
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PEERS = ("dispatchprof", "FlopCounterMode", "fvcore", "ptflops", "thop", "calflops", "deepspeed")


def models() -> dict[str, Callable[[], tuple[torch.nn.Module, dict]]]:
    import transformers as tf

    import zoo

    def hf(name: str, seq: int):
        def build():
            from dispatchprof.llm.catalog import catalog, load_config
            entry = catalog()[name]
            cls = tf.AutoModel if entry.auto == "model" else tf.AutoModelForCausalLM
            torch.manual_seed(0)
            model = cls.from_config(load_config(name)).eval()
            return model, {"input_ids": torch.randint(0, 1000, (1, seq))}
        return build

    def cnn():
        torch.manual_seed(0)
        return zoo.ResNetish().eval(), {"x": torch.randn(1, 3, 64, 64)}

    return {"gpt2": hf("gpt2", 128), "bert-base": hf("bert-base", 128), "llama-3.2-1b": hf("llama-3.2-1b", 64),
            "resnet-style CNN": cnn}


class FirstOutput(torch.nn.Module):
    """Returns a model's first output as a plain tensor (for tracing tools)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any) -> torch.Tensor:
        out = self.model(*args)
        return out if isinstance(out, torch.Tensor) else out[0]


def run_peer(peer: str, model: torch.nn.Module, inputs: dict) -> tuple[Any, Any, Any]:
    """(FLOPs, MACs, params) as the peer reports them; None where it reports nothing."""
    args = tuple(inputs.values())
    if peer == "dispatchprof":
        from dispatchprof import OpCounter
        with OpCounter(model) as c:
            model(**inputs)
        return c.total().flops, c.total().macs, c.by_module()[""].scope.params
    if peer == "FlopCounterMode":
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as f:
            model(**inputs)
        return f.get_total_flops(), None, None
    if peer == "fvcore":
        from fvcore.nn import FlopCountAnalysis, parameter_count
        # fvcore traces with torch.jit, which cannot return transformers' ModelOutput: trace a
        # wrapper that returns the first output instead (what fvcore users do).
        a = FlopCountAnalysis(FirstOutput(model), args).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        return None, a.total(), parameter_count(model)[""]
    if peer == "ptflops":
        from ptflops import get_model_complexity_info
        macs, params = get_model_complexity_info(model, (1,), input_constructor=lambda _: dict(inputs),
                                                 as_strings=False, print_per_layer_stat=False, verbose=False)
        return None, macs, params
    if peer == "thop":
        from thop import profile
        macs, params = profile(model, inputs=args, verbose=False)
        return None, macs, params
    if peer == "calflops":
        from calflops import calculate_flops
        flops, macs, params = calculate_flops(model, kwargs=dict(inputs), print_results=False,
                                              output_as_string=False)
        return flops, macs, params
    if peer == "deepspeed":
        from deepspeed.profiling.flops_profiler import get_model_profile
        flops, macs, params = get_model_profile(model, kwargs=dict(inputs), print_profile=False,
                                                as_string=False, warm_up=0)
        return flops, macs, params
    raise ValueError(peer)


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if v >= 1e9:
        return f"{v / 1e9:,.3f} G"
    return f"{v / 1e6:,.3f} M" if v >= 1e6 else f"{v:,.0f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--models", nargs="+")
    args = p.parse_args(argv)
    from tabulate import tabulate

    import torchvision_absent
    torchvision_absent.install()        # calflops imports transformers -> timm -> torchvision (a CUDA build here)

    warnings.simplefilter("ignore")
    rows = []
    for name, build in models().items():
        if args.models and name not in args.models:
            continue
        model, inputs = build()
        for peer in PEERS:
            start = time.perf_counter()
            try:
                with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    flops, macs, params = run_peer(peer, model, inputs)
                rows.append([name, peer, fmt(flops), fmt(macs), fmt(params), f"{time.perf_counter() - start:.2f}"])
            except ImportError:
                rows.append([name, peer, "not installed", "", "", ""])
            except Exception as e:  # noqa: BLE001  (a peer's failure is a result to report)
                rows.append([name, peer, f"failed: {type(e).__name__}", str(e).splitlines()[0][:50] if str(e) else "",
                             "", f"{time.perf_counter() - start:.2f}"])
        del model
    print(tabulate(rows, headers=["model", "tool", "FLOPs", "MACs", "params", "wall s"],
                   tablefmt="github" if args.markdown else "simple"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
