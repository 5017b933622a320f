"""What scripts/measure_gpu.py runs on a GPU: the device and its timers, and Hugging Face models
built from the bundled catalog configs (random bf16 weights) driven through generate, a bare
decode step and a profiled decode step. Times are seconds; ``args.tiny`` runs on the CPU with
scaled-down configs (`TINY`)."""

from __future__ import annotations

import statistics
import time

#: The scaled-down config of ``--tiny`` (tests measure_gpu.py without a GPU).
TINY = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32)


def device_of(args):
    import torch

    return torch.device("cpu" if args.tiny else "cuda")


def sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, dev, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` synchronised calls (after one warm-up)."""
    fn()
    sync(dev)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync(dev)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def hf_config(name: str, tiny: bool):
    from dispatchprof.llm.catalog import load_config

    cfg = load_config(name)
    if tiny:
        for k, v in TINY.items():
            if hasattr(cfg, k):
                setattr(cfg, k, v)
    return cfg


def build(name: str, args):
    import torch
    import transformers

    dev = device_of(args)
    cfg = hf_config(name, args.tiny)
    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with dev:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    finally:
        torch.set_default_dtype(old)
    return model.to(dtype=torch.bfloat16).eval()


def prompt_ids(model, batch: int, prompt: int, dev):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randint(10, min(model.config.vocab_size, 30000), (batch, prompt), generator=g).to(dev)


class StepClock:
    """A logits processor that timestamps every generate step (after synchronising the GPU)."""

    def __init__(self, dev) -> None:
        self.dev, self.stamps = dev, []

    def __call__(self, input_ids, scores):
        sync(self.dev)
        self.stamps.append(time.perf_counter())
        return scores


def generate_times(model, batch: int, prompt: int, new: int, dev, **kwargs) -> tuple[float, float]:
    """(TTFT, median TPOT) in seconds of one greedy generate of ``new`` tokens (no EOS set, so no
    sequence stops early and no min-length processor runs)."""
    import transformers

    ids = prompt_ids(model, batch, prompt, dev)
    clock = StepClock(dev)
    model.generation_config.eos_token_id = None  # every sequence runs ``new`` tokens, no EOS test
    sync(dev)
    t0 = time.perf_counter()
    model.generate(ids, attention_mask=ids.new_ones(ids.shape), max_new_tokens=new,
                   do_sample=False, logits_processor=transformers.LogitsProcessorList([clock]),
                   pad_token_id=0, **kwargs)
    sync(dev)
    stamps = clock.stamps
    return stamps[0] - t0, statistics.median(b - a for a, b in zip(stamps, stamps[1:]))


def step_times(step, dev, steps: int, warm: int = 3) -> tuple[float, float]:
    """(median wall, median host) seconds of ``step()`` over ``steps`` calls after ``warm`` more: the
    wall time synchronised, the host time until ``step`` returns (the GPU not waited for)."""
    walls, hosts = [], []
    for i in range(steps + warm):
        sync(dev)
        t = time.perf_counter()
        step()
        h = time.perf_counter()
        sync(dev)
        w = time.perf_counter()
        if i >= warm:
            walls.append(w - t)
            hosts.append(h - t)
    return statistics.median(walls), statistics.median(hosts)


def bare_decode(model, batch: int, prompt: int, dev, steps: int) -> tuple[float, float]:
    """(median wall, median host) seconds of one decode forward after a ``prompt`` prefill."""
    import torch

    ids = prompt_ids(model, batch, prompt, dev)
    with torch.no_grad():
        out = model(ids, use_cache=True)
        state = {"cache": out.past_key_values}
        nxt = out.logits[:, -1:].argmax(-1)

        def step():
            state["cache"] = model(nxt, past_key_values=state["cache"], use_cache=True).past_key_values
        return step_times(step, dev, steps)


def lean_decode(model, prompt: int, dev, steps: int, step=None) -> tuple[float, float]:
    """(median wall, median host) seconds of one lean-model decode step (``step(ids, pos)``, the
    model itself by default) after a ``prompt``-token prefill into its static cache."""
    import torch

    forward = model if step is None else step
    ids = _lean_ids(model, prompt, dev)
    with torch.no_grad():
        state = {"next": model(ids, torch.arange(prompt, device=dev))[:, -1:].argmax(-1), "pos": prompt}

        def one():
            pos = torch.tensor([state["pos"]], device=dev)
            state["next"] = forward(state["next"], pos)[:, -1:].argmax(-1)
            state["pos"] += 1
        return step_times(one, dev, steps)


def _lean_ids(model, prompt: int, dev):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randint(10, min(model.output.out_features, 30000), (1, prompt), generator=g).to(dev)


def free(dev) -> None:
    import gc

    import torch

    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def decode_busy(model, batch: int, context: int, dev, steps: int = 4) -> tuple[float, float, float, object]:
    """(kernels per step, summed kernel seconds per step, median synchronised wall seconds of the
    three decode steps before, the profile) of ``steps`` decode forwards after a ``context``-token
    prefill, kernels from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    ids = prompt_ids(model, batch, context, dev)
    with torch.no_grad():
        out = model(ids, use_cache=True)
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        walls = []
        for _ in range(3):
            sync(dev)
            t = time.perf_counter()
            cache = model(nxt, past_key_values=cache, use_cache=True).past_key_values
            sync(dev)
            walls.append(time.perf_counter() - t)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(steps):
                cache = model(nxt, past_key_values=cache, use_cache=True).past_key_values
            sync(dev)
    kernels = [e for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]
    busy = sum(e.time_range.elapsed_us() for e in kernels) * 1e-6
    return len(kernels) / steps, busy / steps, statistics.median(walls), prof
