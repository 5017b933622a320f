"""The live side: `OpCounter` (its private dispatch modes, call -> record, the module tracker,
the tensor ledger) and weightless models on fake tensors."""

from dispatchprof.count.counter import CausalRule, OpCounter
from dispatchprof.count.fake import fake_inputs, fake_mode, fake_model

__all__ = ["CausalRule", "OpCounter", "fake_inputs", "fake_mode", "fake_model"]
