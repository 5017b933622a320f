"""``dispatchprof train MODEL --device D --devices N``: one training step of a model on N GPUs
with data parallelism / ZeRO / FSDP, tensor, pipeline and context parallelism; step time and its
parts, tokens/s per GPU, MFU, energy, memory per GPU (dispatchprof.train, docs/training.md).
A configuration that does not fit in memory prints its result, then one line on stderr saying
by how much and which component is largest, and exits 2."""

from __future__ import annotations

import sys
import warnings
from typing import Sequence, get_args

from dispatchprof.cli.options import add_format, as_json, check_outputs, emit, input_files, size, table_fmt
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.train.layout import Recompute, TrainLayout
from dispatchprof.train.render import DEFAULT_TOKENS, training_csv, training_table, training_to_dict
from dispatchprof.results.files import write_atomic
from dispatchprof.sim.links import SCALE_OUT_GB_PER_S
from dispatchprof.train.step import profile_training
from dispatchprof.train.trace import trace_json


def parser() -> Parser:
    p = Parser(prog="dispatchprof train", description=(
        "Simulate one training step (forward, backward, AdamW) of a model counted on fake tensors, split over "
        "GPUs by data parallelism (ZeRO 0-3 / FSDP), tensor, pipeline and context parallelism."))
    p.add_argument("model", help="a bundled model, a config.json, a folder holding one, or a hub id")
    p.add_argument("--device", required=True, metavar="NAME|FILE", help="the GPU every rank runs on")
    p.add_argument("--devices", type=size(), default=1, help="GPUs in all")
    p.add_argument("--nodes", type=size(), help="nodes the GPUs are spread over (default: devices / 8, at least 1)")
    p.add_argument("--scale-out", type=float, default=SCALE_OUT_GB_PER_S, metavar="GB/S",
                   help="each GPU's network bandwidth across nodes, GB/s one way (default %(default)g: one 400 Gb/s "
                        "NIC per GPU, as DGX H100; DGX A100: 25)")
    par = p.add_argument_group("parallelism")
    z = par.add_mutually_exclusive_group()
    z.add_argument("--fsdp", action="store_true", help="fully sharded data parallel (the same as --zero 3)")
    z.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage of the data parallelism")
    par.add_argument("--tp", type=size(), default=1, help="tensor-parallel size (with sequence parallelism)")
    par.add_argument("--pp", type=size(), default=1, help="pipeline-parallel stages")
    par.add_argument("--vp", type=size(), default=1, help="model chunks per stage (interleaved 1F1B)")
    par.add_argument("--schedule", choices=("1f1b", "interleaved"), help="pipeline schedule (default: "
                     "interleaved when --vp > 1, else 1f1b)")
    par.add_argument("--tp-overlap", action="store_true",
                     help="tensor-parallel communication overlapped with the GEMMs (Megatron/Transformer Engine)")
    par.add_argument("--no-sequence-parallel", dest="sequence_parallel", action="store_false",
                     help="tensor parallelism without sequence parallelism (pipeline receives all-gathered over tp)")
    par.add_argument("--cp", type=size(), default=1, help="context-parallel size (the sequence split)")
    b = p.add_argument_group("batch and numerics")
    b.add_argument("--micro-batch", type=size(), default=1, help="sequences per micro-batch")
    b.add_argument("--global-batch", type=size(), help="sequences per step (default: micro-batch x data-parallel size)")
    b.add_argument("--seq-len", type=size(), default=4096)
    b.add_argument("--recompute", choices=get_args(Recompute), default="none",
                   help="selective: the attention core again (Megatron); op: every other matmul and the pointwise "
                        "ops again (torchtitan's per-op policy); full: each layer's forward again")
    b.add_argument("--fp8", action="store_true", help="linears in FP8 (attention and the rest in bf16)")
    b.add_argument("--runtime", choices=("compiled", "eager"), default="compiled",
                   help="compiled: fused pointwise kernels (Megatron, TE, torch.compile); eager: one kernel per op")
    p.add_argument("--tokens", type=float, default=DEFAULT_TOKENS, help="tokens to train, for the time to train")
    add_format(p, ("table", "markdown", "json", "csv"))
    p.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of stdout")
    p.add_argument("--trace", metavar="FILE", help="write a Perfetto timeline (Chrome trace JSON) of one step on one GPU")
    return p


def layout_of(args) -> TrainLayout:
    """The layout the arguments describe; UsageError for --nodes that do not divide --devices."""
    per_node = min(args.devices, 8)
    if args.nodes is not None:
        if args.devices % args.nodes:
            raise UsageError(f"--nodes {args.nodes} does not divide --devices {args.devices}")
        per_node = args.devices // args.nodes
    model = args.tp * args.pp * args.cp
    dp = args.devices // model if args.devices % model == 0 else 1
    schedule = args.schedule or ("interleaved" if args.vp > 1 else "1f1b")
    return TrainLayout(args.devices, args.micro_batch, args.global_batch or args.micro_batch * dp, args.seq_len,
                       tp=args.tp, pp=args.pp, cp=args.cp, zero=3 if args.fsdp else args.zero, schedule=schedule,
                       vp=args.vp, recompute=args.recompute, fp8=args.fp8, gpus_per_node=per_node,
                       tp_overlap=args.tp_overlap, sequence_parallel=args.sequence_parallel)


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    check_outputs({"-o": args.output, "--trace": args.trace}, inputs=[args.device, *input_files(args.model)])
    if not args.tokens > 0:
        raise UsageError(f"--tokens must be > 0, got {args.tokens!r}")
    if not args.scale_out > 0:
        raise UsageError(f"--scale-out must be > 0 GB/s, got {args.scale_out!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = profile_training(args.model, args.device, layout_of(args), runtime=args.runtime,
                                  scale_out_gb_per_s=args.scale_out)
    if args.format == "json":
        text = as_json(training_to_dict(result, args.tokens))
    elif args.format == "csv":
        text = training_csv(result)
    else:
        text = training_table(result, table_fmt(args.format), args.tokens)
    emit(text, args.output)
    if args.trace:
        write_atomic(args.trace, trace_json(result))
    if result.fits is False:
        print(f"dispatchprof train: {result.over_capacity()}", file=sys.stderr)
        return 2
    return 0
