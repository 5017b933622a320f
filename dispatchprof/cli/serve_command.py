"""``dispatchprof serve MODEL --device D``: serve requests (a trace or generated traffic at one
or more rates, or closed-loop clients at one or more concurrencies) with continuous batching on a
simulated device, under an engine's defaults; latency statistics, goodput, KV use, energy and
cost per token."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import warnings
from typing import Callable, Iterator, NamedTuple, Sequence

from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.cli.progress import ProgressBar
from dispatchprof.cli.options import (DTYPES, add_weight_dtype, check_outputs, input_files, model_dtype,
                                      resolve_weight_dtype, size)
from dispatchprof.results.files import write_atomic
from dispatchprof.serving.cost import KV_BITS
from dispatchprof.serving.engine import ROUTERS
from dispatchprof.serving.metrics import parse_duration
from dispatchprof.serving.render import plot_serving, requests_csv, summary_csv, summary_table, timeline_csv
from dispatchprof.serving.datasets import DATASETS, dataset_lengths
from dispatchprof.serving.engines import load_engines
from dispatchprof.serving.layout import layout_of
from dispatchprof.serving.requests import ARRIVALS, generate_requests, parse_length, read_trace
from dispatchprof.serving.serve import prepare_serving, simulate_serving
from dispatchprof.serving.serve_disagg import simulate_disaggregated
from dispatchprof.sim.links import LINKS
from dispatchprof.sim.runtime import RUNTIMES

FORMATS = ("table", "markdown", "json", "csv")
ENGINES = tuple(load_engines())
#: The most closed-loop clients a run takes (a benchmark's --max-concurrency rarely exceeds 4096).
MAX_CLIENTS = 1 << 16


def parser() -> Parser:
    p = Parser(prog="dispatchprof serve", description=(
        "Serve requests with continuous batching (vLLM style: paged KV cache, chunked prefill, preemption) "
        "on a simulated device. Step times come from the simulator of the counted model."))
    p.add_argument("model", help="a bundled model, a config.json, a folder holding one, or a hub id")
    p.add_argument("--device", required=True, metavar="NAME|FILE", help="the device each replica runs on")
    src = p.add_argument_group("requests (a trace, or generated traffic) and clients")
    src.add_argument("--requests", metavar="FILE", help="JSONL or CSV with arrival_s, prompt_tokens, output_tokens")
    src.add_argument("--rate", action="append", default=[], metavar="REQ_PER_S",
                     help="request rate, open loop (repeat or comma-separate for several rates)")
    src.add_argument("--concurrency", action="append", default=[], metavar="CLIENTS",
                     help="closed loop: this many clients, each sending its next request when the last one "
                          "finishes (repeat or comma-separate for several); arrival times are ignored")
    src.add_argument("--warmup", type=int, default=0, metavar="N",
                     help="leave the first N requests sent out of the statistics (default 0)")
    src.add_argument("--num-requests", type=size("num_requests"), default=1000)
    src.add_argument("--arrivals", choices=ARRIVALS, default="poisson")
    src.add_argument("--dataset", choices=tuple(DATASETS),
                     help="draw prompt and output lengths from this dataset's distribution")
    src.add_argument("--prompt-len", help="a number, uniform:LOW:HIGH or random:N (default 512)")
    src.add_argument("--output-len", help="a number, uniform:LOW:HIGH or random:N (default 128)")
    src.add_argument("--random-range-ratio", type=float, default=0.0, metavar="R",
                     help="random:N lengths are uniform over N(1-R)..N(1+R), as vllm bench serve (default 0)")
    src.add_argument("--seed", type=int, default=0)
    src.add_argument("--images", type=int, default=0, help="images per generated prompt (a trace has an images field)")
    src.add_argument("--image-size", type=size(), metavar="PIXELS",
                     help="image side: counts the model's image encoder into the time to first token")
    eng = p.add_argument_group("engine (figures left out come from --engine's preset, else the generic engine)")
    eng.add_argument("--engine", choices=ENGINES,
                     help="an engine's scheduler, CUDA graphs and host costs at its defaults (docs/serving.md)")
    eng.add_argument("--engine-version", metavar="VERSION", help="the engine's version (default: the newest preset)")
    eng.add_argument("--prefix-hit", type=float, default=0.0, metavar="RATE",
                     help="share of each prompt found in the prefix cache, in [0, 1] (default 0)")
    eng.add_argument("--max-seqs", type=size(), help="default 256")
    eng.add_argument("--max-batched-tokens", type=size(), help="default 8192")
    eng.add_argument("--no-chunked-prefill", action="store_true")
    eng.add_argument("--batch-wait-steps", type=int, metavar="N",
                     help="hold prompts back up to N steps for a fuller step, as TensorRT-LLM's "
                          "batch_wait_timeout_iters (needs --engine; default: the preset's, 0)")
    eng.add_argument("--batch-wait-ratio", type=float, metavar="R",
                     help="a step of R x the step budget's tokens ends the wait, as TensorRT-LLM's "
                          "batch_wait_max_tokens_ratio, in [0, 1] (needs --engine; default: the preset's, 0)")
    eng.add_argument("--block-size", type=size(), help="default 16")
    eng.add_argument("--kv-blocks", type=size(), help="KV blocks per replica (default: memory left after weights)")
    eng.add_argument("--memory-utilization", type=float, help="default 0.9")
    eng.add_argument("--replicas", type=size("replicas"), default=1)
    eng.add_argument("--router", choices=ROUTERS, default="round_robin")
    eng.add_argument("--dtype", type=model_dtype, default="bf16", help="bf16|bfloat16, fp16|float16, fp32|float32")
    add_weight_dtype(eng)
    eng.add_argument("--kv-dtype", choices=tuple(KV_BITS), help="KV-cache dtype (bytes, capacity and time follow)")
    eng.add_argument("--bound", action="store_true", help="the pure roofline (no efficiencies or overheads)")
    eng.add_argument("--runtime", choices=RUNTIMES, default="serving",
                     help="software stack of each engine: serving (default: an inference engine with CUDA graphs, "
                          "fused kernels, KV written in place), compiled, eager (every op launched from the host)")
    eng.add_argument("--tp", type=size(), help="tensor parallelism: devices per replica (default 1; with --ep, "
                                                "attention's: --ep / --dp-attention)")
    lay = p.add_argument_group("parallel layouts (docs/deploy.md)")
    lay.add_argument("--ep", type=size(), default=1, metavar="N",
                     help="expert parallelism: the replica's N GPUs each hold 1/N of every MoE layer's experts")
    lay.add_argument("--dp-attention", type=size(), default=1, metavar="A",
                     help="attention data-parallel groups beside --ep (each runs 1/A of the batch)")
    lay.add_argument("--expert-skew", type=float, default=1.0, metavar="F",
                     help="the busiest EP device's expert work over the mean (>= 1, default 1: balanced)")
    lay.add_argument("--pp", type=size(), default=1, metavar="N",
                     help="pipeline parallelism: the layers in N stages, N micro-batches in flight")
    pd = p.add_argument_group("disaggregated prefill/decode (docs/deploy.md)")
    pd.add_argument("--prefill-replicas", type=size("replicas"), metavar="P",
                    help="P replicas (of --device, --tp, --ep ...) run prefills only; needs --decode-replicas")
    pd.add_argument("--decode-replicas", type=size("replicas"), metavar="D", help="D replicas run decodes only")
    pd.add_argument("--decode-device", metavar="NAME|FILE", help="the decode replicas' device (default --device)")
    pd.add_argument("--decode-tp", type=size(), help="the decode replicas' tensor parallelism (default --tp)")
    pd.add_argument("--kv-link", choices=tuple(LINKS), default="ib-ndr",
                    help="the link each request's KV cache crosses from prefill to decode (default ib-ndr)")
    spec = p.add_argument_group("speculative decoding")
    spec.add_argument("--draft", metavar="MODEL", help="draft model (same vocabulary as the target)")
    spec.add_argument("--spec-tokens", type=size(), default=4, help="k tokens speculated per step")
    spec.add_argument("--acceptance", type=float, default=0.7, help="acceptance rate of a draft token")
    out = p.add_argument_group("output")
    out.add_argument("--slo-ttft", metavar="DURATION", help="TTFT objective with a unit, such as 200ms")
    out.add_argument("--slo-tpot", metavar="DURATION", help="TPOT objective with a unit, such as 50ms")
    out.add_argument("--price", metavar="DEVICE=USD_PER_H", help="price of one device per hour")
    out.add_argument("--format", choices=FORMATS, default="table")
    out.add_argument("--json", action="store_true", help="same as --format json")
    out.add_argument("--plot", metavar="FILE", help="latency CDFs (and throughput against rate): PNG")
    out.add_argument("--timeline", metavar="FILE", help="KV use and preemptions over time: CSV (first run)")
    out.add_argument("--requests-csv", metavar="FILE", help="per-request latencies: CSV (first run)")
    out.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    return p


def _parts(values: Sequence[str]) -> list[str]:
    """The values of a repeatable option, each of which may be comma-separated."""
    return [part for value in values for part in value.split(",")]


def rates_of(values: Sequence[str]) -> list[float]:
    rates = []
    for part in _parts(values):
        try:
            rate = float(part)
        except ValueError:
            raise UsageError(f"--rate takes requests per second such as 4 or 2,4,8, got {part!r}") from None
        if not rate > 0 or not math.isfinite(rate):
            raise UsageError(f"--rate must be a finite number > 0 requests per second, got {part!r}")
        rates.append(rate)
    return rates


def concurrencies_of(values: Sequence[str]) -> list[int]:
    out = []
    for part in _parts(values):
        try:
            clients = int(part)
        except ValueError:
            raise UsageError(f"--concurrency takes a whole number of clients such as 8 or 1,8,64, "
                             f"got {part!r}") from None
        if not 1 <= clients <= MAX_CLIENTS:
            raise UsageError(f"--concurrency must be a whole number of clients from 1 to {MAX_CLIENTS}, "
                             f"got {part!r}")
        out.append(clients)
    return out


def lengths_of(args) -> tuple:
    """(prompt, output) length distributions from --dataset, --prompt-len, --output-len."""
    if args.dataset is not None:
        if args.prompt_len is not None or args.output_len is not None:
            raise UsageError("give either --dataset or --prompt-len/--output-len, not both")
        return dataset_lengths(args.dataset)
    ratio = args.random_range_ratio
    if not 0 <= ratio < 1:
        raise UsageError(f"--random-range-ratio must be in [0, 1), got {ratio!r}")
    return (parse_length(args.prompt_len or "512", "--prompt-len", ratio),
            parse_length(args.output_len or "128", "--output-len", ratio))


def price_of(text: str | None, device: str) -> float | None:
    if text is None:
        return None
    name, sep, value = text.partition("=")
    try:
        price = float(value)
    except ValueError:
        price = -1.0
    if not sep or not name or not 0 <= price < math.inf:
        raise UsageError(f"--price takes DEVICE=USD_PER_H such as {device}=2.5, got {text!r}")
    if name.lower() != device.lower():
        raise UsageError(f"--price names device {name!r}, but the run is on {device!r}")
    return price


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    resolve_weight_dtype(args)
    if args.json:
        args.format = "json"
    check_outputs({"-o": args.output, "--plot": args.plot, "--timeline": args.timeline,
                   "--requests-csv": args.requests_csv},
                  inputs=[args.requests, args.device, *input_files(args.model),
                          *(input_files(args.draft) if args.draft else ())])
    slo_ttft = None if args.slo_ttft is None else parse_duration(args.slo_ttft, "--slo-ttft")
    slo_tpot = None if args.slo_tpot is None else parse_duration(args.slo_tpot, "--slo-tpot")
    price = price_of(args.price, args.device)
    rates, clients = rates_of(args.rate), concurrencies_of(args.concurrency)
    if args.requests and rates:
        raise UsageError("give either --requests FILE or --rate, not both")
    if clients and rates:
        raise UsageError("give either --rate (open loop) or --concurrency (closed loop), not both")
    if not 0 <= args.prefix_hit <= 1:
        raise UsageError(f"--prefix-hit must be a rate in [0, 1], got {args.prefix_hit!r}")
    if args.engine_version is not None and args.engine is None:
        raise UsageError("--engine-version needs --engine")
    batch_wait = batch_wait_figures(args)
    layout_of(args.tp, args.ep, args.dp_attention, args.pp, args.expert_skew)      # bad layouts before counting
    disaggregated = check_disaggregated(args)
    if args.requests:
        trace = read_trace(args.requests)
        traces = [(RunLabel(None, c), trace) for c in clients] or [(RunLabel(None, None), trace)]
    else:
        prompt, output = lengths_of(args)
        runs_of = [RunLabel(None, c) for c in clients] or [RunLabel(rate, None) for rate in (rates or [1.0])]
        traces = [(label, generate_requests(label.rate or 1.0, args.num_requests, prompt, output,
                                            arrivals=args.arrivals, seed=args.seed, images=args.images))
                  for label in runs_of]
    if not 0 <= args.warmup < len(traces[0][1]):
        raise UsageError(f"--warmup must be a whole number of requests from 0 to {len(traces[0][1]) - 1} "
                         f"(fewer than the requests), got {args.warmup}")
    if any(r.images for _, reqs in traces for r in reqs) and args.image_size is None:
        raise UsageError("requests with images need --image-size PIXELS (the encoder's input side)")
    with warnings.catch_warnings(), _bar() as bar:
        warnings.simplefilter("ignore")
        setup = prepare_serving(args.model, args.device, dtype=DTYPES[args.dtype], weight_dtype=args.weight_dtype,
                                kv_dtype=args.kv_dtype, bound=args.bound, draft=args.draft,
                                spec_tokens=args.spec_tokens, acceptance=args.acceptance, price_usd_per_h=price,
                                image_size=args.image_size, runtime=args.runtime, tp=args.tp,
                                engine=args.engine, engine_version=args.engine_version, ep=args.ep,
                                dp_attention=args.dp_attention, pp=args.pp, expert_skew=args.expert_skew,
                                progress=bar)
    setup = with_figures(setup, batch_wait)
    if disaggregated:
        runs = disaggregated_runs(args, setup, traces, slo_ttft, slo_tpot, batch_wait)
    else:
        runs = [(label, simulate_serving(setup, reqs, replicas=args.replicas, router=args.router,
                                         max_seqs=args.max_seqs, max_batched_tokens=args.max_batched_tokens,
                                         chunked_prefill=False if args.no_chunked_prefill else None,
                                         block_size=args.block_size, memory_utilization=args.memory_utilization,
                                         kv_blocks=args.kv_blocks, slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot,
                                         concurrency=label.concurrency, warmup=args.warmup,
                                         prefix_hit=args.prefix_hit))
                for label, reqs in traces]
    labelled = [(label.text(args.requests), r) for label, r in runs]
    if args.plot:
        plot_serving([(label.rate, r) for label, r in runs], args.plot)
    if args.timeline:
        write_atomic(args.timeline, timeline_csv(runs[0][1]))
    if args.requests_csv:
        write_atomic(args.requests_csv, requests_csv(runs[0][1]))
    text = render(labelled, runs, args.format)
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def batch_wait_figures(args) -> dict:
    """The batch-waiting figures --batch-wait-steps and --batch-wait-ratio set on the engine preset
    (docs/serving.md, the scheduler's rule 4), checked."""
    figures = {name: value for name, value in (("batch_wait_steps", args.batch_wait_steps),
                                               ("batch_wait_tokens_ratio", args.batch_wait_ratio)) if value is not None}
    if figures and args.engine is None:
        raise UsageError("--batch-wait-steps and --batch-wait-ratio need --engine (they change its preset)")
    if args.batch_wait_steps is not None and args.batch_wait_steps < 0:
        raise UsageError(f"--batch-wait-steps must be a whole number of steps >= 0, got {args.batch_wait_steps}")
    if args.batch_wait_ratio is not None and not 0 <= args.batch_wait_ratio <= 1:
        raise UsageError(f"--batch-wait-ratio must be a share of the step budget in [0, 1], got {args.batch_wait_ratio}")
    return figures


def with_figures(setup, figures: dict):
    """``setup`` with ``figures`` replaced on its engine preset."""
    return dataclasses.replace(setup, engine=dataclasses.replace(setup.engine, **figures)) if figures else setup


def check_disaggregated(args) -> bool:
    """Whether the run is disaggregated; the options only it takes are refused otherwise."""
    given = args.prefill_replicas is not None or args.decode_replicas is not None
    if given and (args.prefill_replicas is None or args.decode_replicas is None):
        raise UsageError("disaggregated serving needs both --prefill-replicas P and --decode-replicas D")
    if not given:
        for flag, value in (("--decode-device", args.decode_device), ("--decode-tp", args.decode_tp)):
            if value is not None:
                raise UsageError(f"{flag} needs --prefill-replicas and --decode-replicas")
        return False
    for flag, bad in (("--replicas", args.replicas != 1), ("--kv-blocks", args.kv_blocks is not None),
                      ("--draft", args.draft is not None), ("--pp", args.pp != 1)):
        if bad:
            raise UsageError(f"{flag} does not apply to a disaggregated run (--prefill-replicas, --decode-replicas)")
    return True


@contextlib.contextmanager
def _bar(prefix: str = "") -> Iterator[Callable[[int, int, str], None]]:
    """A progress bar on stderr for the step cost model's counts (silent off a terminal), its
    labels after ``prefix``; cleared when counting ends, however it ends."""
    bar = ProgressBar()
    try:
        yield lambda done, total, what: bar(done, total, prefix + what)
    finally:
        bar.close()


def disaggregated_runs(args, setup, traces, slo_ttft, slo_tpot, figures: dict) -> list:
    """(label, result) per trace: ``setup`` prefills, a decode setup counted on --decode-device
    (with --decode-tp, the rest as the prefill side, its engine preset with ``figures``) decodes."""
    decode_device = args.decode_device or args.device
    with warnings.catch_warnings(), _bar("decode side: ") as bar:
        warnings.simplefilter("ignore")
        decode = prepare_serving(args.model, decode_device, dtype=DTYPES[args.dtype], weight_dtype=args.weight_dtype,
                                 kv_dtype=args.kv_dtype, bound=args.bound, runtime=args.runtime,
                                 tp=args.decode_tp if args.decode_tp is not None else args.tp,
                                 engine=args.engine, engine_version=args.engine_version, ep=args.ep,
                                 dp_attention=args.dp_attention, expert_skew=args.expert_skew, progress=bar)
    decode = with_figures(decode, figures)
    return [(label, simulate_disaggregated(setup, decode, reqs, prefill_replicas=args.prefill_replicas,
                                           decode_replicas=args.decode_replicas, kv_link=args.kv_link,
                                           router=args.router, max_seqs=args.max_seqs,
                                           max_batched_tokens=args.max_batched_tokens,
                                           chunked_prefill=False if args.no_chunked_prefill else None,
                                           block_size=args.block_size, memory_utilization=args.memory_utilization,
                                           slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot, concurrency=label.concurrency,
                                           warmup=args.warmup, prefix_hit=args.prefix_hit))
            for label, reqs in traces]


class RunLabel(NamedTuple):
    """What distinguishes a run: its request rate (open loop) or its clients (closed loop)."""

    rate: float | None
    concurrency: int | None

    def text(self, trace: str | None) -> str:
        head = trace or ""
        if self.concurrency is not None:
            return f"{head} {self.concurrency} clients".strip()
        return head if self.rate is None else f"{self.rate:g} req/s"


def render(labelled, runs, fmt: str) -> str:
    if fmt == "json":
        if len(runs) == 1:
            return json.dumps(runs[0][1].to_dict(), indent=1) + "\n"
        return json.dumps({"runs": [{"rate_req_per_s": label.rate, "concurrency": label.concurrency, **r.to_dict()}
                                    for label, r in runs]}, indent=1) + "\n"
    if fmt == "csv":
        return summary_csv(labelled)
    return summary_table(labelled, "github" if fmt == "markdown" else "simple")


__all__ = ["parser", "run"]
