"""Op formulas: one registry of pure cost functions keyed on aten OpOverloadPackets.

Importing this package registers every family. See ``registry`` for the three op states
and ``cost`` for the `Cost` they return.
"""

from op_formulas import (  # noqa: F401  (imported for their registrations)
    activation, attention, collectives, conv, linalg, linear_attention, loss, matmul, moe, movement, norm, optim,
    pointwise, pool, quantized, random, reduction, resample, rnn, special, spectral, transformer_fastpath,
)
from op_formulas import complex_arith  # noqa: F401,E402  (refines formulas registered above)
from op_formulas import flex, sparse  # noqa: F401,E402  (sparse refines mm, add, ... after complex_arith)
from op_formulas import families  # noqa: F401,E402  (in-place twins copy the refined formulas: last)
from op_formulas.cost import CATEGORIES, Cost, T, TensorMeta
from op_formulas.registry import (
    OVERWRITES_SELF, ZERO_COST, UnsupportedCall, formula, lookup, registered, state_of, zero_cost,
)

__all__ = ["CATEGORIES", "Cost", "OVERWRITES_SELF", "T", "TensorMeta", "UnsupportedCall",
           "ZERO_COST", "formula", "lookup", "registered", "state_of", "zero_cost"]
