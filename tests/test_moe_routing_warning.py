"""The MoE routing assumption is warned once per count that takes it, from the count's own
``with`` line, so a second count in the same process shows it too (docs/zoo.md, 'MoE routing')."""

import warnings

import torch

from dispatchprof import OpCounter, fake_model
from dispatchprof.count.stand_ins import ROUTING_ASSUMPTION, RoutingAssumptionWarning


def _qwen3_moe():
    import transformers as tf
    return tf.Qwen3MoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=1,
                             num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                             vocab_size=64, head_dim=8)


def _routing_warnings(seen):
    return [(str(w.message), w.filename, w.lineno) for w in seen if issubclass(w.category, RoutingAssumptionWarning)]


def test_each_count_on_fake_tensors_warns_from_its_with_line():
    model = fake_model(_qwen3_moe())
    ids = torch.randint(0, 64, (1, 8))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")         # Python's own: once per (message, file, line)
        with OpCounter(host_time=False):
            model(input_ids=ids)
        with OpCounter(host_time=False):
            model(input_ids=ids)
    got = _routing_warnings(seen)
    assert [m for m, _, _ in got] == [ROUTING_ASSUMPTION] * 2
    assert {f for _, f, _ in got} == {__file__} and got[0][2] != got[1][2]


def test_real_tensors_and_dense_models_do_not_warn():
    import transformers as tf
    torch.manual_seed(0)
    moe = tf.AutoModelForCausalLM.from_config(_qwen3_moe())
    dense = fake_model(tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=64))
    ids = torch.randint(0, 64, (1, 8))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with OpCounter(host_time=False):
            moe(input_ids=ids)                   # real tensors: routing read from the values
        with OpCounter(host_time=False):
            dense(input_ids=ids)
    assert _routing_warnings(seen) == []
