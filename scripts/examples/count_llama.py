"""Count a Llama-3.2-1B-shaped model on fake tensors: no weights, no download, a few seconds.

    python scripts/examples/count_llama.py [--batch 1] [--seq 200]

Prints the totals, the cost of each module down to depth 2, and the ten most expensive ops.
"""

from __future__ import annotations

import argparse
import warnings

import torch
import transformers
from tabulate import tabulate

from dispatchprof import OpCounter, fake_inputs, fake_model

# Llama-3.2-1B (MODELS.md): 1,235,814,400 parameters.
LLAMA_3_2_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
                    rope_theta=500000.0, max_position_embeddings=131072, rms_norm_eps=1e-5)


def g(n: int) -> str:
    return f"{n / 1e9:,.2f} G"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=200)
    args = p.parse_args()
    warnings.simplefilter("ignore")

    config = transformers.LlamaConfig(**LLAMA_3_2_1B)
    model = fake_model(lambda: transformers.LlamaForCausalLM(config), dtype=torch.bfloat16)
    ids = fake_inputs(model, args.batch, args.seq, high=config.vocab_size)
    with torch.no_grad(), OpCounter() as c:
        model(ids)

    t = c.total()
    root = c.by_module()[""].scope
    print(f"llama-3.2-1b (bf16, fake tensors), batch {args.batch}, sequence {args.seq}: one forward pass")
    print(tabulate([["FLOPs (ADD+MULT)", g(t.flops)], ["MACs", g(t.macs)], ["ADD", g(t.add)], ["MULT", g(t.mult)],
                    ["DIV", g(t.div)], ["SQRT", g(t.sqrt)], ["EXP", g(t.exp)], ["CMP", g(t.cmp)],
                    ["OTHER", g(t.other)], ["PARAMS", f"{root.params:,}"],
                    ["bytes read + written", f"{t.bytes / 1e9:,.2f} GB"],
                    ["peak live activations", f"{root.peak_bytes / 1e6:,.1f} MB"],
                    ["unknown ops", len(c.unknown_ops())]], tablefmt="simple"))
    print()
    rows = [[name or "(root)", s.scope.module_type, s.scope.calls, g(s.inclusive.flops), g(s.inclusive.macs),
             f"{100 * s.inclusive.flops / t.flops:.1f}%", f"{s.inclusive.bytes / 1e6:,.0f}"]
            for name, s in c.by_module().items() if s.scope.depth <= 2 or name.startswith("model.layers.0")]
    print(tabulate(rows, headers=["module", "type", "calls", "FLOPs", "MACs", "% FLOPs", "MB moved"]))
    print()
    ops = [[op, s.totals.calls, g(s.totals.flops), g(s.totals.macs), f"{s.totals.bytes / 1e6:,.0f}"]
           for op, s in list(c.by_operator().items())[:10]]
    print(tabulate(ops, headers=["aten op", "calls", "FLOPs", "MACs", "MB moved"]))


if __name__ == "__main__":
    main()
