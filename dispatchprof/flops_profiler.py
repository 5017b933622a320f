"""Entry points for users switching from DeepSpeed's flops profiler.

``get_model_profile`` and ``FlopsProfiler`` take DeepSpeed's arguments and return its kinds of
values, counted by dispatchprof's rules. The one difference in definitions: our FLOPs are
ADD + MULT of every op's reference algorithm (DeepSpeed approximates 2 x MACs for matmuls and
one FLOP per element for most element-wise functions). MACs agree with DeepSpeed's where it
covers the op. On real tensors, per-module forward latency is measured as DeepSpeed does, in
the counted pass (so it includes the counting overhead).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from dispatchprof import report, units
from dispatchprof.count.counter import OpCounter
from dispatchprof.results.files import write_atomic
from dispatchprof.results.profile import Profile


def _strings(flops: int, macs: int, params: int) -> tuple[str, str, str]:
    return units.si(flops, "FLOPs"), units.si(macs, "MACs"), units.si(params)


def _without(profile: Profile, ignore_modules: Sequence[type] | None, attr: str) -> int:
    """Total ``attr`` of the root minus the outermost modules of the ignored classes."""
    rows = profile.by_module()
    total = getattr(rows[""].inclusive, attr) if attr != "params" else rows[""].scope.params
    if not ignore_modules:
        return total
    names = {c.__name__ for c in ignore_modules}
    ignored = [n for n, r in rows.items() if n and r.scope.module_type in names]
    outer = [n for n in ignored if not any(n.startswith(o + ".") for o in ignored if o != n)]
    for n in outer:
        total -= getattr(rows[n].inclusive, attr) if attr != "params" else rows[n].scope.params
    return total


def model_profile_text(profile: Profile, *, module_depth: int = -1, top_modules: int = 1,
                       detailed: bool = True, ignore_modules: Sequence[type] | None = None) -> str:
    """The printed profile: totals, top modules per depth, and (detailed) the module tree."""
    flops, macs, params = (_without(profile, ignore_modules, a) for a in ("flops", "macs", "params"))
    real = profile.tensor_kind == "real"
    root = next(s for s in profile.scopes if s.name == "")
    lines = ["-------------------------- dispatchprof flops profile --------------------------",
             f"params:                      {units.si(params)}",
             f"fwd MACs:                    {units.si(macs, 'MACs')}",
             f"fwd FLOPs (ADD + MULT):      {units.si(flops, 'FLOPs')}"]
    if real and root.latency_s:
        lines += [f"fwd latency:                 {units.seconds(root.latency_s)}",
                  f"fwd FLOPS (FLOPs/latency):   {units.si(flops / root.latency_s, 'FLOP/s')}"]
    lines += ["", f"Top {top_modules} module types per depth (params, MACs"
              + (", measured latency)" if real else ")"),
              report.top_modules(profile, k=top_modules,
                                 metrics=("params", "macs", "latency") if real else ("params", "macs"))]
    if detailed:
        columns = ("type", "params", "%params", "macs", "flops", "%flops") + (("latency",) if real else ())
        lines += ["", "Per-module profile (inclusive)",
                  report.module_tree(profile, depth=module_depth, columns=columns)]
    lines += ["", report.LEGEND]
    return "\n".join(lines)


def get_model_profile(model: nn.Module, input_shape: tuple | None = None, args: Sequence[Any] | None = None,
                      kwargs: dict | None = None, print_profile: bool = True, detailed: bool = True,
                      module_depth: int = -1, top_modules: int = 1, warm_up: int = 1, as_string: bool = False,
                      output_file: str | None = None, ignore_modules: Sequence[type] | None = None):
    """Count one forward of ``model`` and return (flops, macs, params), as DeepSpeed's function.

    The input is ``torch.ones(input_shape)`` in the model's dtype and device, or ``args`` /
    ``kwargs``. ``warm_up`` uncounted forwards run first (so measured latencies on real tensors
    exclude first-call costs). ``print_profile`` prints the profile (to ``output_file`` instead).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"get_model_profile() takes an nn.Module, got {type(model).__name__}")
    args, kwargs = list(args or []), dict(kwargs or {})
    if input_shape is not None:
        if not isinstance(input_shape, tuple):
            raise TypeError(f"input_shape must be a tuple such as (1, 3, 224, 224), got {input_shape!r}")
        p = next(model.parameters(), None)
        args = [torch.ones(input_shape, dtype=p.dtype if p is not None else torch.float32,
                           device=p.device if p is not None else "cpu")]
    if not args and not kwargs:
        raise ValueError("get_model_profile() needs an input: input_shape=(...), args=[...] or kwargs={...}")
    with torch.no_grad():
        for _ in range(warm_up):
            model(*args, **kwargs)
        with OpCounter(model) as c:
            model(*args, **kwargs)
    profile = c.profile
    if print_profile:
        text = model_profile_text(profile, module_depth=module_depth, top_modules=top_modules,
                                  detailed=detailed, ignore_modules=ignore_modules)
        if output_file:
            write_atomic(output_file, text + "\n")
        else:
            print(text)
    values = tuple(_without(profile, ignore_modules, a) for a in ("flops", "macs", "params"))
    return _strings(*values) if as_string else values


class FlopsProfiler:
    """DeepSpeed's FlopsProfiler interface over an OpCounter.

    >>> prof = FlopsProfiler(model); prof.start_profile()
    >>> model(x); prof.stop_profile()
    >>> prof.get_total_flops(), prof.get_total_macs(), prof.get_total_params()
    >>> prof.print_model_profile(); prof.end_profile()
    """

    def __init__(self, model: nn.Module, ds_engine: Any = None, recompute_fwd_factor: float = 0.0) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"FlopsProfiler() takes an nn.Module, got {type(model).__name__}")
        self.model = model
        self._counter: OpCounter | None = None
        self._ignore: Sequence[type] | None = None
        self.started = False

    def start_profile(self, ignore_list: Sequence[type] | None = None) -> None:
        """Count every forward from now until stop_profile()."""
        if self.started:
            raise RuntimeError("start_profile() called twice without stop_profile()")
        self._ignore = ignore_list
        self._counter = OpCounter(self.model)
        self._counter.__enter__()
        self.started = True

    def stop_profile(self) -> None:
        """Stop counting; the results stay readable."""
        if self.started and self._counter is not None:
            self._counter.__exit__(None, None, None)
        self.started = False

    def reset_profile(self) -> None:
        """Forget the results (and stop, if running)."""
        self.stop_profile()
        self._counter = None

    def end_profile(self) -> None:
        """Stop and release everything (DeepSpeed's final call)."""
        self.reset_profile()

    @property
    def profile(self) -> Profile:
        if self._counter is None:
            raise RuntimeError("nothing profiled: call start_profile(), run the model, then stop_profile()")
        return self._counter.profile

    def get_total_flops(self, as_string: bool = False):
        v = _without(self.profile, self._ignore, "flops")
        return units.si(v, "FLOPs") if as_string else v

    def get_total_macs(self, as_string: bool = False):
        v = _without(self.profile, self._ignore, "macs")
        return units.si(v, "MACs") if as_string else v

    def get_total_params(self, as_string: bool = False):
        v = _without(self.profile, self._ignore, "params")
        return units.si(v) if as_string else v

    def get_total_duration(self, as_string: bool = False):
        """Measured forward latency of the model (real tensors; counting overhead included)."""
        v = next(s for s in self.profile.scopes if s.name == "").latency_s
        return units.seconds(v) if as_string else v

    def print_model_profile(self, profile_step: int = 1, module_depth: int = -1, top_modules: int = 1,
                            detailed: bool = True, output_file: str | None = None) -> None:
        text = f"profile step: {profile_step}\n" + model_profile_text(
            self.profile, module_depth=module_depth, top_modules=top_modules, detailed=detailed,
            ignore_modules=self._ignore)
        if output_file:
            write_atomic(output_file, text + "\n")
        else:
            print(text)
