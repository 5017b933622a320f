"""A decoder's training step timed from counts with few layers: the op table of the full depth
from the same model counted with 2, 3 and 4 layers.

A decoder whose layers are identical modules (`dispatchprof.llm.layer_repeat.layer_period` 1)
runs a training step as a prefix, one block of ops per layer and a suffix in each of its forward
and backward passes, and an optimizer step whose multi-tensor ops cover every parameter. The
first and the last layer are boundaries (the last layer's backward starts from the loss's
gradient), every other layer adds the same ops with the same times. So every quantity the step
split reads (`dispatchprof.train.count.OpTable`: how many ops share each exact timing, the busy
seconds of the other ops, collective seconds, FLOPs, dynamic joules, exposed host time; the
forward's peak, the bytes saved for backward) is affine in the depth L:

    v(L) = v(4) + (L - 4) (v(4) - v(3))

A decoder whose layers repeat after a prefix of k layers, or whose layer kinds alternate every p
layers (`dispatchprof.llm.layer_repeat.periodic_reason`: DeepSeek-V3's dense layers, gpt-oss's
sliding and full attention), is affine in its number of blocks of p layers instead: counted with
one, two and three blocks after its first k + 1 layers, then the r = (L - k - 1) mod p layers its
depth ends with (`depths`), and v(L) = v(d3) + (L - d3) / p (v(d3) - v(d2)).

**Check.** The same rule from the first two depths must give the third: every integer (op
counts per timing, FLOPs, bytes) exactly, every float (seconds, joules) to `FLOAT_TOLERANCE`
and absolute. Where it does not (layers that alternate or change kind past the counted ones, a
multi-tensor op whose time is not affine in its parameters), `LayerRepeatError` says why and the
caller counts the full depth. The record-level repetition of `dispatchprof.count.layer_repeat`
does not apply to a training step: its backward runs the layers in reverse order and ends each
at a boundary, and the optimizer's multi-tensor ops are one record over all layers' parameters.

The integers of the result equal a direct count's; its float sums (busy seconds of the ops other
than matrix products, collectives, joules, host) are the direct count's up to rounding (tests:
`tests/test_train_depth.py` compares both at full depth).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch

from dispatchprof.count.layer_repeat import LayerRepeatError
from dispatchprof.llm.layer_repeat import counted_depths, repeated_block, shallow_model, shallow_reason
from dispatchprof.sim.device import Device
from dispatchprof.train.count import (CountedModel, CountedStep, OpTable, count_model, model_sizes, op_table,
                                      simulate_model, step_from)

#: Tolerance of the check on float quantities (sums of seconds and joules): relative, and absolute
#: (10 ns, 10 nJ). A count's host uploads are made once per tensor storage
#: (`dispatchprof.sim.timing.moved_inputs`), and the optimizer's step counters are fresh 4-byte
#: tensors whose storage may reuse a freed one's address: 0.06 ns per counter, which differ between
#: counts (direct ones too; under 1 ns for an 8B model); a layer that differs changes far more.
FLOAT_TOLERANCE = (1e-9, 1e-8)


def depths(model: torch.nn.Module) -> tuple[int, ...]:
    """The three depths ``model`` is counted with: one, two and three blocks of the layers that
    repeat (`dispatchprof.llm.layer_repeat.counted_depths`): 2, 3 and 4 where every layer is the
    same. The first two predict the third (the check), the last two the full depth."""
    return counted_depths(model.config, blocks=3)


def repeat_reason(model: torch.nn.Module) -> str:
    """'' when ``model``'s training step can be timed from few layers, else why not."""
    return shallow_reason(model, blocks=3)


def repeated_step(model: torch.nn.Module, name: str, micro_batch: int, seq_len: int, device: Device, *,
                  tp: int = 1, fp8: bool = False, runtime: str = "compiled") -> CountedStep:
    """`dispatchprof.train.count.count_step` of ``model`` from counts with `depths` layers
    (module docstring); raises `LayerRepeatError` where that does not apply or the check fails."""
    m, table, activation_bytes = repeated_table(model, name, micro_batch, seq_len, device, tp=tp, runtime=runtime)
    return step_from(m, table, device, activation_bytes, fp8=fp8)


def repeated_table(model: torch.nn.Module, name: str, micro_batch: int, seq_len: int, device: Device, *,
                   tp: int = 1, runtime: str = "compiled") -> tuple[CountedModel, OpTable, int]:
    """The counted model (without its profile), op table and forward peak bytes of ``model``'s
    step at full depth from counts with `depths` layers (module docstring); raises
    `LayerRepeatError` where that does not apply or the check fails."""
    reason = repeat_reason(model)
    if reason:
        raise LayerRepeatError(reason)
    counted_at = depths(model)
    parts = []
    for n in counted_at:
        counted = count_model(shallow_model(model, n), name, micro_batch, seq_len)
        table = op_table(simulate_model(counted, device, tp=tp, runtime=runtime))
        parts.append(_flat(counted, table))
    keys = list(dict.fromkeys(k for p in reversed(parts) for k in p))     # the 4-layer count's order first
    two, three, four = ({k: p.get(k, 0) for k in keys} for p in parts)
    _check(two, three, four)
    extra = (model.config.num_hidden_layers - counted_at[-1]) // repeated_block(model.config)[1]   # blocks
    full = {k: _line(three[k], four[k], extra) for k in keys}
    negative = [k for k, v in full.items() if v < 0]
    if negative:
        raise LayerRepeatError(f"{negative[0]} falls below 0 at full depth: the layers are not repeatable")
    m = CountedModel(name, micro_batch, seq_len, *model_sizes(model), None, full["head_bytes"], full["op_saved_bytes"])
    return m, _table(full), full["activation_bytes"]


def _flat(counted: CountedModel, table: OpTable) -> dict[Any, float]:
    """Every quantity of a few-layer count the step reads, by a key that names it: a timing row's
    count, a busy row's seconds, each phase sum, the host time, the forward's bytes."""
    out: dict[Any, float] = {}
    for row in table.rows:
        if row[2] == "linear":
            out[("row", *row[:7])] = row[7]
        else:
            out[("busy", *row[:3])] = row[4]
    for phase, sums in table.sums.items():
        for i, v in enumerate(sums):
            out[("sum", phase, i)] = v
    out["host_s"] = table.host_s
    out["activation_bytes"] = dict(counted.profile.phase_peaks).get("forward", 0)
    out["head_bytes"], out["op_saved_bytes"] = counted.head_bytes, counted.op_saved_bytes
    return out


def _line(shorter: float, longer: float, extra: int) -> float:
    """The value at ``extra`` layers (blocks of layers) past the longer count's depth."""
    return longer + extra * (longer - shorter)


def _check(two: dict, three: dict, four: dict) -> None:
    """The 2- and 3-layer counts predict the 4-layer count (module docstring; blocks of layers
    likewise, the messages name them as layers)."""
    for key, seen in four.items():
        want = _line(two.get(key, 0), three.get(key, 0), 1)
        exact = isinstance(seen, int) and isinstance(want, int)
        if (want != seen) if exact else not close(want, seen):
            raise LayerRepeatError(f"{key}: {seen!r} with 4 layers, {want!r} from 2 and 3: the layers are not "
                                   f"repeatable")


def close(a: float, b: float) -> bool:
    """Whether two float quantities agree within `FLOAT_TOLERANCE`."""
    rel, absolute = FLOAT_TOLERANCE
    return abs(a - b) <= rel * max(abs(a), abs(b)) + absolute


def _table(full: dict) -> OpTable:
    """The `OpTable` of the full depth from its flat quantities (`_flat`'s keys, in their order)."""
    rows = []
    for key, v in full.items():
        if isinstance(key, tuple) and key[0] == "row" and v:
            rows.append((*key[1:], v))
        elif isinstance(key, tuple) and key[0] == "busy":
            rows.append((*key[1:], 0.0, v, 0.0, 0.0, 1))
    sums = {}
    for key, v in full.items():
        if isinstance(key, tuple) and key[0] == "sum":
            sums.setdefault(key[1], []).append(v)
    return OpTable(tuple(rows), {p: tuple(v) for p, v in sums.items()}, full["host_s"])


__all__ = ["FLOAT_TOLERANCE", "close", "depths", "repeat_reason", "repeated_step", "repeated_table"]
