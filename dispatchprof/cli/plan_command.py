"""``dispatchprof plan MODEL --device D --rate R | --concurrency N --slo-ttft T --slo-tpot T``:
the layouts of `dispatchprof.serving.plan` simulated under the same requests with ``serve``;
the Pareto front and the fewest-GPU layout meeting the SLOs, with its engine command lines."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Sequence

from dispatchprof.cli.options import size
from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.report.render import render
from dispatchprof.serving.metrics import parse_duration
from dispatchprof.serving.plan import Candidate, Outcome, candidates, cheapest, engine_commands, pareto, search
from dispatchprof.serving.requests import generate_requests, parse_length


def parser() -> Parser:
    p = Parser(prog="dispatchprof plan", description=(
        "Search tensor-, expert-parallel and disaggregated layouts of MODEL on DEVICE under the given traffic "
        "(each simulated with serve) for the fewest GPUs meeting the SLOs."))
    p.add_argument("model", help="a bundled model, a config.json, a folder holding one, or a hub id")
    p.add_argument("--device", required=True, metavar="NAME|FILE")
    p.add_argument("--rate", type=float, metavar="REQ_PER_S", help="open-loop request rate")
    p.add_argument("--concurrency", type=size(), metavar="CLIENTS", help="closed-loop clients")
    p.add_argument("--slo-ttft", required=True, metavar="DURATION", help="mean TTFT objective, such as 500ms")
    p.add_argument("--slo-tpot", required=True, metavar="DURATION", help="mean TPOT objective, such as 50ms")
    p.add_argument("--max-gpus", type=size(), default=8, help="GPUs at most (default 8)")
    p.add_argument("--num-requests", type=size("num_requests"), default=200)
    p.add_argument("--prompt-len", default="1024", help="a number, uniform:LOW:HIGH or random:N (default 1024)")
    p.add_argument("--output-len", default="128", help="a number, uniform:LOW:HIGH or random:N (default 128)")
    p.add_argument("--engine", choices=("vllm", "sglang", "trtllm"), help="the engine preset every layout runs under")
    p.add_argument("--no-disaggregated", action="store_true", help="aggregated layouts only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    if (args.rate is None) == (args.concurrency is None):
        raise UsageError("give one of --rate (open loop) or --concurrency (closed loop)")
    if args.rate is not None and not args.rate > 0:
        raise UsageError(f"--rate must be a number > 0 requests per second, got {args.rate!r}")
    slo_ttft, slo_tpot = parse_duration(args.slo_ttft, "--slo-ttft"), parse_duration(args.slo_tpot, "--slo-tpot")
    requests = generate_requests(args.rate or 1.0, args.num_requests, parse_length(args.prompt_len, "--prompt-len"),
                                 parse_length(args.output_len, "--output-len"), seed=args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes, errors = evaluate_all(args, requests)
    if not outcomes:
        raise UsageError(f"no layout of {args.model} on at most {args.max_gpus} x {args.device} can be served: "
                         f"{errors[0] if errors else 'none tried'}")
    front = pareto(outcomes)
    best, nearest = cheapest(outcomes, slo_ttft, slo_tpot)
    sys.stdout.write(render_plan(args, outcomes, front, best, nearest, slo_ttft, slo_tpot))
    return 0


def evaluate_all(args, requests) -> tuple[list[Outcome], list[str]]:
    """Every candidate simulated (the design counted once, its setups planned once per tp / ep /
    dp-attention), and why the ones left out could not be (does not fit in memory, not servable)."""
    from dispatchprof.llm.models import build_model
    from dispatchprof.serving.repeat import CountMemo
    from dispatchprof.serving.layout import moe_of
    from dispatchprof.serving.serve import prepare_serving, simulate_serving
    from dispatchprof.serving.serve_disagg import simulate_disaggregated

    model = build_model(args.model, generator=True)
    counts = CountMemo(model)                       # one count of the design for every layout
    config = model.config
    moe = moe_of(config)
    setups: dict = {}
    errors: list[str] = []

    def setup(c: Candidate):
        key = (c.tp, c.ep, c.dp_attention)
        if key not in setups:
            try:
                layout = dict(ep=c.ep, dp_attention=c.dp_attention) if c.ep > 1 else dict(tp=c.tp)
                setups[key] = prepare_serving(model, args.device, engine=args.engine, counts=counts, **layout)
            except ValueError as e:                 # not servable so
                setups[key] = None
                errors.append(str(e))
        return setups[key]

    def evaluate(c: Candidate) -> Outcome | None:
        s = setup(c)
        if s is None:
            return None
        try:
            if c.disaggregated:
                r = simulate_disaggregated(s, s, requests, prefill_replicas=c.prefill, decode_replicas=c.decode,
                                           concurrency=args.concurrency)
            else:
                r = simulate_serving(s, requests, replicas=c.replicas, concurrency=args.concurrency)
        except ValueError as e:                     # does not fit in memory
            errors.append(f"{c.text()}: {e}")
            return None
        m = r.summary
        return Outcome(c, m.output_tokens_per_s_per_gpu, m.ttft_s.mean, m.tpot_s.mean)

    heads = config.num_attention_heads
    outcomes = search(candidates(heads, args.max_gpus, moe[0] if moe else None, not args.no_disaggregated), evaluate)
    return outcomes, errors


def render_plan(args, outcomes, front, best, nearest, slo_ttft, slo_tpot) -> str:
    if args.json:
        row = lambda o: {"layout": o.candidate.text(), "gpus": o.candidate.gpus,
                         "tokens_per_s_per_gpu": o.tokens_per_s_per_gpu,
                         "tokens_per_s_per_user": o.tokens_per_s_per_user, "ttft_s": o.ttft_s, "tpot_s": o.tpot_s}
        return json.dumps({"front": [row(o) for o in front], "best": row(best) if best else None,
                           "nearest": [row(o) for o in nearest], "tried": len(outcomes),
                           "commands": engine_commands(args.model, best.candidate) if best else []}, indent=1) + "\n"
    table = render([[o.candidate.text(), o.candidate.gpus, f"{o.tokens_per_s_per_gpu:.1f}",
                     f"{o.tokens_per_s_per_user:.1f}", f"{o.ttft_s * 1e3:.1f}", f"{o.tpot_s * 1e3:.2f}",
                     "yes" if o.meets(slo_ttft, slo_tpot) else "no"] for o in front],
                   ["layout", "GPUs", "tok/s/GPU", "tok/s/user", "TTFT ms", "TPOT ms", "meets SLOs"], "simple")
    lines = [f"{len(outcomes)} layouts of {args.model} on {args.device} simulated; the Pareto front:", table, ""]
    if best is not None:
        lines.append(f"Fewest GPUs meeting TTFT <= {slo_ttft * 1e3:g} ms and TPOT <= {slo_tpot * 1e3:g} ms: "
                     f"{best.candidate.text()} ({best.candidate.gpus} GPUs, {best.tokens_per_s_per_gpu:.1f} tok/s/GPU)")
        lines += ["  " + c for c in engine_commands(args.model, best.candidate)]
    else:
        lines.append("No layout meets the SLOs; the closest: " +
                     "; ".join(f"{o.candidate.text()} (TTFT {o.ttft_s * 1e3:.1f} ms, TPOT {o.tpot_s * 1e3:.2f} ms)"
                               for o in nearest))
    return "\n".join(lines) + "\n"


__all__ = ["parser", "run"]
