"""A drop-in for DeepSpeed's flops profiler (deepspeed.profiling.flops_profiler).

Code written for DeepSpeed runs unchanged and gets the numbers DeepSpeed gives:

    prof = FlopsProfiler(model); prof.start_profile()
    loss = loss_fn(model(x), y); loss.backward(); optimizer.step()
    prof.get_total_macs()          # forward MACs only, as DeepSpeed
    prof.end_profile()

- Only ops run inside a module's forward count (a loss computed outside the model, backward and
  optimizer steps do not), as DeepSpeed, which hooks module forwards.
- ``flop_rules="deepspeed"`` (default) gives DeepSpeed's FLOP rules (2 x MACs for a Linear, its
  bias not counted, one FLOP per ReLU element, 0 for ``+`` and ``*``; see
  dispatchprof.flops_profiler.rules and docs/deepspeed.md). ``flop_rules="dispatchprof"`` gives
  ours: FLOPs = ADD + MULT of every op's reference algorithm. MACs are the same under both.
- While profiling, every module carries DeepSpeed's attributes ``__flops__``, ``__macs__`` (its
  own ops, children excluded), ``__params__`` (children included), ``__expert_params__``,
  ``__model_expert_params__``, ``__start_time__`` and ``__duration__`` (seconds of its forwards,
  counting included); ``end_profile()`` removes them and every hook. Outputs are bit-identical.
- ``get_model_profile`` has DeepSpeed's defaults (``print_profile=True, as_string=True``) and
  ``mode="forward" | "generate"``.
The counting itself is an OpCounter (``FlopsProfiler.profile`` is its full Profile).
"""

from __future__ import annotations

import io
import time
from contextlib import redirect_stdout
from typing import Any, Sequence

import torch
from torch import nn

from dispatchprof.count.counter import OpCounter
from dispatchprof.flops_profiler.rules import (
    DEFAULT_PRECISION, bytes_to_string, check_rules, duration_to_string, flops_to_string, macs_to_string,
    number_to_string, params_to_string, record_cost,
)
from dispatchprof.results.files import write_atomic
from dispatchprof.results.profile import Profile

#: Attributes set on every module while profiling, removed by end_profile().
MODULE_ATTRS = ("__flops__", "__macs__", "__params__", "__expert_params__", "__model_expert_params__",
                "__start_time__", "__duration__")
MODES = ("forward", "generate")


def get_module_flops(module: nn.Module) -> int:
    """FLOPs of ``module`` and its children (DeepSpeed sums children by occurrence)."""
    return module.__flops__ + sum(get_module_flops(c) for c in module.children())


def get_module_macs(module: nn.Module) -> int:
    return module.__macs__ + sum(get_module_macs(c) for c in module.children())


def get_module_duration(module: nn.Module) -> float:
    """Its measured forward time; a module never called (ModuleList) sums its children."""
    duration = module.__duration__
    if duration == 0:
        duration = sum(get_module_duration(c) for c in module.children())
    return duration


class FlopsProfiler:
    """DeepSpeed's FlopsProfiler: start_profile(), run, stop_profile(), read, end_profile()."""

    def __init__(self, model: nn.Module, ds_engine: Any = None, recompute_fwd_factor: float = 0.0,
                 flop_rules: str = "deepspeed") -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"FlopsProfiler() takes an nn.Module, got {type(model).__name__}")
        check_rules(flop_rules)
        self.model = model
        self.ds_engine = ds_engine
        self.recompute_fwd_factor = recompute_fwd_factor
        self.flop_rules = flop_rules
        self.started = False
        self._counter: OpCounter | None = None
        self._handles: list[Any] = []
        self._ignore: tuple[type, ...] = ()
        self._depth = 0
        self._spans: list[tuple[int, int]] = []     # record index ranges of outermost forwards
        self._done = 0                              # spans already added to the modules
        self._span_start = 0
        self._starts: dict[int, list[float]] = {}

    # --- lifecycle -------------------------------------------------------------------------
    def start_profile(self, ignore_list: Sequence[type] | None = None) -> None:
        """Count the forwards of the model from now on; modules of the ``ignore_list`` types
        get no attributes of their own (their ops count in the nearest profiled parent)."""
        if self._counter is not None:
            raise RuntimeError("start_profile() called twice without end_profile()")
        self._ignore = tuple(ignore_list or ())
        self.reset_profile()
        for m in self.model.modules():
            self._handles += [m.register_forward_pre_hook(self._pre_hook),
                              m.register_forward_hook(self._post_hook, always_call=True)]
        self._counter = OpCounter(self.model)
        try:
            self._counter.__enter__()
        except BaseException:
            self._remove_hooks()
            self._remove_attrs()
            self._counter = None
            raise
        self.started = True

    def stop_profile(self) -> None:
        """Stop counting and remove every hook; the results stay readable until end_profile()."""
        if self._counter is not None and self._handles:
            self._counter.__exit__(None, None, None)
            self._remove_hooks()
            self._refresh()

    def reset_profile(self) -> None:
        """Zero every module's counters (DeepSpeed's reset)."""
        self._spans, self._span_start, self._done = [], self.records_counted, 0
        for m in self.model.modules():
            m.__flops__ = m.__macs__ = 0
            m.__params__ = sum(p.numel() for p in m.parameters())
            m.__expert_params__ = m.__model_expert_params__ = 0
            m.__start_time__ = m.__duration__ = 0

    def end_profile(self) -> None:
        """Stop, and remove the attributes from every module."""
        if not self.started:
            return
        self.stop_profile()
        self.started, self._counter = False, None
        self._remove_attrs()

    def _remove_attrs(self) -> None:
        for m in self.model.modules():
            for attr in MODULE_ATTRS:
                if attr in m.__dict__:
                    delattr(m, attr)

    @property
    def records_counted(self) -> int:
        return self._counter.records_counted if self._counter is not None else 0

    @property
    def profile(self) -> Profile:
        """The OpCounter profile of everything run while profiling (backward too)."""
        if self._counter is None or not self.started:
            raise RuntimeError("nothing profiled: call start_profile(), run the model, then stop_profile()")
        return self._counter.profile

    # --- hooks -----------------------------------------------------------------------------
    def _pre_hook(self, module: nn.Module, args: Any) -> None:
        if self._depth == 0:
            self._span_start = self.records_counted
        self._depth += 1
        self._starts.setdefault(id(module), []).append(time.perf_counter())

    def _post_hook(self, module: nn.Module, args: Any, output: Any) -> None:
        stack = self._starts.get(id(module))
        if stack:
            elapsed = time.perf_counter() - stack.pop()
            if type(module) not in self._ignore:
                module.__duration__ += elapsed
            module.__start_time__ = 0
        self._depth -= 1
        if self._depth == 0:
            self._spans.append((self._span_start, self.records_counted))
            self._refresh()

    def _remove_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles, self._depth, self._starts = [], 0, {}

    def _refresh(self) -> None:
        """Add the records of the forwards finished since the last call to their modules'
        ``__flops__`` / ``__macs__`` (each record is read once)."""
        if self._counter is None or self._done == len(self._spans):
            return
        profile = self._counter.profile
        types = {s.name: s.module_type for s in profile.scopes}
        parents = profile.parents()
        modules = dict(self.model.named_modules(remove_duplicate=False))
        for start, end in self._spans[self._done:]:
            for r in profile.records[start:end]:
                flops, macs = record_cost(r, types.get(r.scope, ""), self.flop_rules)
                if flops or macs:
                    module = modules[self._owner(r.scope, modules, parents)]
                    module.__flops__ += flops
                    module.__macs__ += macs
        self._done = len(self._spans)

    def _owner(self, scope: str, modules: dict[str, nn.Module], parents: dict[str, str | None]) -> str:
        """The nearest scope (itself or an ancestor) that is a profiled module of the model."""
        name: str | None = scope
        while name is not None and (name not in modules or type(modules[name]) in self._ignore):
            name = parents.get(name) if parents.get(name) != name else None
        return name if name is not None else ""

    # --- totals ----------------------------------------------------------------------------
    def _root(self) -> nn.Module:
        if not self.started or not hasattr(self.model, "__flops__"):
            raise RuntimeError("nothing profiled: call start_profile(), run the model, then stop_profile()")
        return self.model

    def get_total_flops(self, as_string: bool = False):
        total = get_module_flops(self._root())
        return number_to_string(total) if as_string else total

    def get_total_macs(self, as_string: bool = False):
        total = get_module_macs(self._root())
        return macs_to_string(total) if as_string else total

    def get_total_duration(self, as_string: bool = False):
        total = get_module_duration(self._root())
        return duration_to_string(total) if as_string else total

    def get_total_params(self, as_string: bool = False):
        root = self._root()
        total = root.__params__ + root.__expert_params__
        return params_to_string(total) if as_string else total

    # --- printed profiles --------------------------------------------------------------------
    def print_model_aggregated_profile(self, module_depth: int = -1, top_modules: int = 1) -> None:
        """Per depth, the ``top_modules`` module classes by params, MACs and forward latency
        (instances of a class summed). As DeepSpeed, depths 0 .. module_depth - 1 are printed,
        and module_depth=-1 prints every depth but the deepest."""
        if not hasattr(self.model, "__flops__"):
            print("no __flops__ attribute in the model, call this function after start_profile and "
                  "before end_profile")
            return
        info: dict[int, dict[str, list]] = {}

        def walk(module: nn.Module, depth: int) -> None:
            row = info.setdefault(depth, {}).setdefault(type(module).__name__, [0, 0, 0])
            row[0] += get_module_macs(module)
            row[1] += module.__params__ + module.__expert_params__
            row[2] += get_module_duration(module)
            for child in module.children():
                walk(child, depth + 1)

        walk(self.model, 0)
        depth = len(info) - 1 if module_depth == -1 else min(module_depth, len(info))
        print(f"Top {top_modules} modules in terms of params, MACs or fwd latency at different model depths:")
        for d in range(depth):
            def top(i: int, fmt: Any) -> dict[str, str]:
                ranked = sorted(info[d].items(), key=lambda kv: kv[1][i], reverse=True)[:top_modules]
                return {k: fmt(v[i]) for k, v in ranked}
            print(f"depth {d}:")
            print(f"    params      - {top(1, params_to_string)}")
            print(f"    MACs        - {top(0, macs_to_string)}")
            print(f"    fwd latency - {top(2, duration_to_string)}")

    def print_model_profile(self, profile_step: int = 1, module_depth: int = -1, top_modules: int = 1,
                            detailed: bool = True, output_file: str | None = None) -> None:
        """DeepSpeed's printed profile: summary, aggregated profile and (detailed) the module
        tree with each module's params, MACs, latency and FLOPS; to ``output_file`` if given."""
        if not self.started:
            return
        buf = io.StringIO()
        with redirect_stdout(buf):
            self._print_profile(profile_step, module_depth, top_modules, detailed)
        if output_file:
            write_atomic(output_file, buf.getvalue())
        else:
            print(buf.getvalue(), end="")

    def _print_profile(self, profile_step: int, module_depth: int, top_modules: int, detailed: bool) -> None:
        flops, macs, params = self.get_total_flops(), self.get_total_macs(), self.get_total_params()
        duration = self.get_total_duration()
        self.flops, self.macs, self.params = flops, macs, params
        line = "{:<70}  {:<8}".format
        print("\n-------------------------- DeepSpeed Flops Profiler --------------------------")
        print(f"Profile Summary at step {profile_step}:")
        print(NOTATIONS)
        print(line("params per GPU: ", params_to_string(params)))
        print(line("params of model = params per GPU * mp_size: ", params_to_string(params)))
        print(line("fwd MACs per GPU: ", macs_to_string(macs)))
        print(line("fwd flops per GPU: ", number_to_string(flops)))
        print(line("fwd flops of model = fwd flops per GPU * mp_size: ", number_to_string(flops)))
        print(line("fwd latency: ", duration_to_string(duration)))
        print(line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ",
                   flops_to_string(flops / duration if duration else 0)))
        print("\n----------------------------- Aggregated Profile per GPU -----------------------------")
        self.print_model_aggregated_profile(module_depth=module_depth, top_modules=top_modules)
        if detailed:
            print("\n------------------------------ Detailed Profile per GPU ------------------------------")
            print(DETAILED_HEADER)
            print(module_repr(self.model, lambda m: _flops_repr(m, params, macs, duration)))
        print("------------------------------------------------------------------------------")


NOTATIONS = ("Notations:\n"
             "data parallel size (dp_size), model parallel size(mp_size),\n"
             "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
             "number of floating-point operations (flops), floating-point operations per second (FLOPS),\n"
             "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
             "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n")
DETAILED_HEADER = ("Each module profile is listed after its name in the following order: \n"
                   "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
                   "percentage of total fwd latency, fwd FLOPS\n\n"
                   "Note: 1. A module can have torch.nn.module or torch.nn.functional to compute logits "
                   "(e.g. CrossEntropyLoss). They are not counted as submodules, thus not to be printed out. "
                   "However they make up the difference between a parent's MACs (or latency) and the sum of "
                   "its submodules'.\n"
                   "2. Number of floating-point operations is a theoretical estimation, thus FLOPS computed "
                   "using that could be larger than the maximum system throughput.\n"
                   "3. The fwd latency listed in the top module's profile is directly captured at the "
                   "module forward function in PyTorch, thus it's less than the fwd latency shown above "
                   "which is captured in DeepSpeed.\n")


def _flops_repr(module: nn.Module, total_params: int, total_macs: int, total_duration: float) -> str:
    """DeepSpeed's per-module line: params, MACs, latency (each with its share), FLOPS, extra_repr."""
    params = module.__params__ + module.__expert_params__
    flops, macs, duration = get_module_flops(module), get_module_macs(module), get_module_duration(module)

    def share(part: float, whole: float) -> float:
        return round(100 * part / whole, DEFAULT_PRECISION) if whole else 0

    items = [f"{params_to_string(params)} = {share(params, total_params):g}% Params",
             f"{macs_to_string(macs)} = {share(macs, total_macs):g}% MACs",
             f"{duration_to_string(duration)} = {share(duration, total_duration):g}% latency",
             flops_to_string(round(flops / duration, DEFAULT_PRECISION) if duration else 0)]
    if module.extra_repr():
        items.append(module.extra_repr())
    return ", ".join(items)


def module_repr(module: nn.Module, extra: Any) -> str:
    """``nn.Module.__repr__``'s layout with ``extra(module)`` as each module's extra_repr (the
    model's own extra_repr is never replaced). A ModuleList prints no line of its own, as its
    ``__repr__`` (which DeepSpeed's printout goes through) does not."""
    extra_lines = [] if isinstance(module, nn.ModuleList) else extra(module).split("\n")
    child_lines = []
    for key, child in module._modules.items():
        if child is None:
            continue
        text = module_repr(child, extra).replace("\n", "\n  ")
        child_lines.append(f"({key}): {text}")
    name = type(module).__name__
    if len(extra_lines) == 1 and not child_lines:
        return f"{name}({extra_lines[0]})"
    return f"{name}(\n  " + "\n  ".join(extra_lines + child_lines) + "\n)"


def get_model_profile(model: nn.Module, input_shape: tuple | None = None, args: Sequence[Any] | None = None,
                      kwargs: dict | None = None, print_profile: bool = True, detailed: bool = True,
                      module_depth: int = -1, top_modules: int = 1, warm_up: int = 1, as_string: bool = True,
                      output_file: str | None = None, ignore_modules: Sequence[type] | None = None,
                      mode: str = "forward", flop_rules: str = "deepspeed"):
    """Profile one forward (``mode="forward"``) or one ``model.generate`` call (``mode="generate"``)
    and return (flops, macs, params): DeepSpeed's strings (``'152.58 K', '75.78 KMACs', '18.96 K'``)
    or, with ``as_string=False``, ints.

    The input is ``input_shape`` (a tuple; a tensor of ones in the model's dtype and device) or
    ``args`` / ``kwargs``. ``warm_up`` unprofiled calls run first. The model runs in eval mode,
    as DeepSpeed; its training flag is restored afterwards.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"get_model_profile() takes an nn.Module, got {type(model).__name__}")
    if mode not in MODES:
        raise ValueError(f"get_model_profile(mode=...) must be one of {MODES}, got {mode!r}")
    check_rules(flop_rules)
    args, kwargs = list(args or []), dict(kwargs or {})
    if input_shape is not None:
        if type(input_shape) is not tuple or not input_shape:
            raise TypeError(f"input_shape must be a non-empty tuple such as (1, 3, 224, 224), got {input_shape!r}")
        p = next(model.parameters(), None)
        args = [torch.ones(input_shape, dtype=p.dtype if p is not None else torch.float32,
                           device=p.device if p is not None else "cpu")]
    if not args and not kwargs:
        raise ValueError("get_model_profile() needs an input: input_shape=(...), args=[...] or kwargs={...}")
    run = model.generate if mode == "generate" else model
    was_training = model.training
    model.eval()
    prof = FlopsProfiler(model, flop_rules=flop_rules)
    try:
        for _ in range(warm_up):
            run(*args, **kwargs)
        prof.start_profile(ignore_list=ignore_modules)
        run(*args, **kwargs)
        prof.stop_profile()
        values = prof.get_total_flops(), prof.get_total_macs(), prof.get_total_params()
        if print_profile:
            prof.print_model_profile(profile_step=warm_up, module_depth=module_depth, top_modules=top_modules,
                                     detailed=detailed, output_file=output_file)
    finally:
        prof.end_profile()
        model.train(was_training)
    if as_string:
        return number_to_string(values[0]), macs_to_string(values[1]), params_to_string(values[2])
    return values

