"""The ``--runtime`` option's help, one text for every subcommand that simulates a generation or
a forward pass (profile, sweep): what each runtime means and what the default does per device kind."""

RUNTIME_HELP = (
    "software stack simulated. eager (the default, for every device kind): every op launched from the host, "
    "as plain PyTorch runs a model; on a GPU each op pays its launch and host cost, so a small batch is "
    "bound by the host; the phone SoC profiles set no launch or host cost, and the PIM profiles publish none (simulated "
    "as 0, reported UNKNOWN), so there eager differs from serving only by what serving fuses. compiled: torch.compile + CUDA graphs. "
    "serving: an inference engine (one graph per step, fused pointwise chains, flash attention, last-position "
    "logits): the runtime to compare devices under for vLLM, SGLang or TensorRT-LLM deployments. Every result "
    "prints the runtime it was simulated under")
