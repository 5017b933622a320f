"""A model whose attention keeps only its top-k keys per query (GLM-5's sparse-attention indexer)
is refused by the serving cost model before any count: its attention work stops growing with the
context at k tokens, where the fitted features grow with every cached token."""

import pytest
import torch

from dispatchprof.llm.catalog import load_config
from dispatchprof.serving.cost import fit_design
from dispatchprof.sim.placement import scenarios_of


class _Counted(torch.nn.Module):
    """A module carrying ``config``; counting it would fail (it has no forward), so a refusal
    must come before any count."""

    def __init__(self, config):
        super().__init__()
        self.config = config


def test_glm5_is_refused_before_counting():
    config = load_config("glm-5")
    assert config.index_topk == 2048
    with pytest.raises(ValueError, match=r"^GlmMoeDsaConfig attends to its top 2048 keys per query .* the serving "
                                         r"cost model does not cover this model$"):
        fit_design(_Counted(config), scenarios_of("H200"))


def test_a_dense_config_is_not_refused_by_that_rule():
    """Without index_topk the rule passes and counting starts (here: the module cannot run)."""
    config = load_config("deepseek-v3")
    assert getattr(config, "index_topk", None) is None
    with pytest.raises(Exception) as e:
        fit_design(_Counted(config), scenarios_of("H200"))
    assert "keys per query" not in str(e.value)
