"""Random draws and dropout. Rule: 1 OTHER per drawn element.

Gamma draws (``_standard_gamma``; a rejection sampler whose trials depend on values) count 1
OTHER per element like every draw; their reparameterised gradient ``_standard_gamma_grad`` is
1 OTHER per element (a special function). A Dirichlet draw over n categories per row is n gamma
draws normalised by their sum: n OTHER + (n-1) ADD + n DIV; ``_dirichlet_grad`` is 1 OTHER
per element.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


@formula(aten.rand, aten.randn, aten.randint, aten.rand_like, aten.randn_like, aten.randint_like,
         aten.bernoulli, aten.bernoulli_, aten.normal, aten.normal_, aten.uniform, aten.uniform_,
         aten.exponential_, aten.random_, aten.randperm, aten.poisson, aten.multinomial,
         aten._standard_gamma, aten._standard_gamma_grad, aten._dirichlet_grad, aten.cauchy, aten.cauchy_,
         aten.exponential, aten.geometric, aten.geometric_, aten.log_normal, aten.log_normal_, aten.random,
         aten.binomial, aten.normal_functional)
def draw(*args: Any, result: Any, **kwargs: Any) -> Cost:
    """1 OTHER per element of the output (the mutated tensor for in-place draws)."""
    return Cost(other=first_meta(result).numel)


@formula(aten._fused_dropout)
def fused_dropout(x: TensorMeta, p: float, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """As native_dropout in training (p is the keep probability here): 1 OTHER + 1 CMP + 2 MULT."""
    return Cost(other=1, cmp=1, mult=2) * x.numel


@formula(aten.native_dropout)
def native_dropout(x: TensorMeta, p: float, train: Any = None, *, result: Any, **kwargs: Any) -> Cost:
    """Training: a draw (1 OTHER), the keep test (1 CMP), mask and 1/(1-p) scale (2 MULT) per
    element; evaluation (train False): a copy."""
    if train is False:
        return Cost()
    return Cost(other=1, cmp=1, mult=2) * x.numel


@formula(aten.native_dropout_backward)
def native_dropout_backward(grad: TensorMeta, mask: TensorMeta, scale: float, *, result: Any,
                            **kwargs: Any) -> Cost:
    """grad * mask * scale: 2 MULT per element."""
    return Cost(mult=2) * grad.numel


@formula(aten._sample_dirichlet)
def sample_dirichlet(alpha: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Per row of n categories: n gamma draws (OTHER), their sum (n-1 ADD), n DIV."""
    n = alpha.shape[-1] if alpha.shape else 1
    rows = alpha.numel // n if n else 0
    return Cost(other=n, add=max(n - 1, 0), div=n) * rows
