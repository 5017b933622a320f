"""A padded attention mask: the op streams of real and fake tensors differ by transformers'
value checks only (docs/counting.md, "Where real and fake op streams differ")."""

import warnings
from collections import Counter

import torch

import zoo
from dispatchprof import OpCounter, fake_mode


def _run(kind):
    model, inputs, _ = zoo.build("llama", kind)
    model.eval()
    ids = inputs["input_ids"]
    if kind == "fake":
        with fake_mode(model):
            mask = torch.ones(ids.shape, dtype=torch.long)     # fake: no values, padded or not
    else:
        mask = torch.ones(ids.shape, dtype=torch.long)
        mask[0, :3] = 0                                        # left padding in the first row
    with warnings.catch_warnings(), torch.no_grad(), OpCounter() as c:
        warnings.simplefilter("ignore")
        model(input_ids=ids, attention_mask=mask)
    return c


def test_padded_mask_streams_differ_only_by_transformers_value_checks():
    real, fake = _run("real"), _run("fake")
    ops = Counter(r.op for r in real.profile.records)
    ops.subtract(Counter(r.op for r in fake.profile.records))
    # masking_utils._ignore_causal_mask_sdpa reads the padding mask on real tensors (fast_all:
    # sum, == numel, .item(), twice) to decide whether SDPA may use is_causal=True instead of the
    # mask; on fake tensors (is_tracing) it never reads values and always builds the mask
    assert +ops == Counter({"aten.sum": 2, "aten.eq": 2, "aten._local_scalar_dense": 2})
    assert -ops == Counter()
    n = zoo.BATCH * zoo.SEQ                                    # mask elements summed per check
    assert real.total().flops - fake.total().flops == 2 * (n - 1)
    attention = [[r.cost for r in c.profile.records if "attention" in r.op] for c in (real, fake)]
    assert attention[0] == attention[1] and attention[0]       # the attention itself counts the same
