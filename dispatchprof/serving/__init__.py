"""Serving what-ifs: requests (trace files or generated), a continuous-batching scheduler with a
paged KV cache, preemption and replicas, timed by a step cost model fitted to a few counted
compositions; latency percentiles, goodput, KV use, energy and cost per token."""

from dispatchprof.serving.metrics import Latency, RequestResult, ServingSummary, parse_duration
from dispatchprof.serving.requests import Request, generate_requests, read_trace
from dispatchprof.serving.serve import (
    ServingResult, ServingSetup, expected_tokens, prepare_serving, simulate_serving,
)

__all__ = ["Latency", "Request", "RequestResult", "ServingResult", "ServingSetup", "ServingSummary", "expected_tokens",
           "generate_requests", "parse_duration", "prepare_serving", "read_trace", "simulate_serving"]
