"""Mixture-of-experts ops (op_formulas/moe.py): grouped products and histc by hand and against
the per-expert loop they replace, and transformers' default experts path on every tensor kind."""

import warnings

import pytest
import torch

from conftest import count, counts, only_record
from dispatchprof import OpCounter, fake_mode, fake_model
from dispatchprof.count.stand_ins import ROUTING_ASSUMPTION, RoutingAssumptionWarning
from op_formulas import T
from op_formulas.moe import grouped_mm, histc

OFFS = torch.tensor([2, 4, 6], dtype=torch.int32)


@pytest.mark.parametrize("a, b, offs, result, expected", [
    # [6,8] x [3,8,4], rows cut: 6*4*8 = 192 MULT and MACs, 6*4*7 = 168 ADD
    (T(6, 8), T(3, 8, 4), T(3, dtype=torch.int32), T(6, 4), {"mult": 192, "macs": 192, "add": 168}),
    # [8,6] x [6,4], K = 6 cut into 3 groups: 8*4*6 = 192 MULT, 8*4*(6-3) = 96 ADD
    (T(8, 6), T(6, 4), T(3, dtype=torch.int32), T(3, 8, 4), {"mult": 192, "macs": 192, "add": 96}),
    # K = 2 cut into 3 groups: 2 groups hold a step (routing assumption): 8*4*(2-2) = 0 ADD
    (T(8, 2), T(2, 4), T(3, dtype=torch.int32), T(3, 8, 4), {"mult": 64, "macs": 64}),
    # [3,6,8] x [8,12], columns cut: 6*12*8 = 576 MULT, 6*12*7 = 504 ADD
    (T(3, 6, 8), T(8, 12), T(3, dtype=torch.int32), T(6, 12), {"mult": 576, "macs": 576, "add": 504}),
    # [3,6,8] x [3,8,4] without offs: bmm, 3*6*4*8 = 576 MULT, 3*6*4*7 = 504 ADD
    (T(3, 6, 8), T(3, 8, 4), None, T(3, 6, 4), {"mult": 576, "macs": 576, "add": 504}),
])
def test_grouped_mm_by_hand(a, b, offs, result, expected):
    assert counts(grouped_mm(a, b, offs, result=result)) == expected


def test_grouped_mm_bytes_read_only_the_groups_that_receive_rows():
    # 6 rows over 3 experts: a 6*8*4 = 192, b 3*8*4*4 = 384, offs 3*4 = 12 bytes; out 6*4*4 = 96
    c = grouped_mm(T(6, 8), T(3, 8, 4), T(3, dtype=torch.int32), result=T(6, 4))
    assert (c.bytes_read, c.bytes_written) == (192 + 384 + 12, 96)
    # 2 rows over 3 experts: at most 2 experts' matrices are read: 2*8*4 + 2*8*4*4 + 12 = 332
    c = grouped_mm(T(2, 8), T(3, 8, 4), T(3, dtype=torch.int32), result=T(2, 4))
    assert c.bytes_read == 64 + 256 + 12
    # a bias [3,4] adds 1 ADD per output element (6*4) and its 48 bytes
    c = grouped_mm(T(6, 8), T(3, 8, 4), T(3, dtype=torch.int32), T(3, 4), result=T(6, 4))
    assert (c.add, c.bytes_read) == (168 + 24, 588 + 48)


def test_grouped_mm_equals_the_per_expert_loop_it_replaces():
    # reference: the same rows through one mm per expert, counted by the mm formula
    x, w = torch.randn(6, 8), torch.randn(3, 8, 4)
    fused = count(torch._grouped_mm, x, w, offs=OFFS)
    loop = count(lambda: [x[i:i + 2] @ w[g] for g, i in enumerate((0, 2, 4))])
    assert counts(only_record(fused, "aten._grouped_mm").cost) == counts(loop.total())
    # grad-weight shape: a [8,8] x b [8,4] with K cut at 2, 4, 8 is [8,2] x [2,4] twice and
    # [8,4] x [4,4] (the CPU kernel wants rows of a multiple of 16 bytes: 8 float32 columns)
    a, b, offs = torch.randn(8, 8), torch.randn(8, 4), torch.tensor([2, 4, 8], dtype=torch.int32)
    cuts = ((0, 2), (2, 4), (4, 8))
    fused = count(torch._grouped_mm, a, b, offs=offs)
    loop = count(lambda: [a[:, i:j] @ b[i:j] for i, j in cuts])
    assert counts(only_record(fused, "aten._grouped_mm").cost) == counts(loop.total())
    assert torch.allclose(torch._grouped_mm(a, b, offs=offs), torch.stack([a[:, i:j] @ b[i:j] for i, j in cuts]))


def test_histc_by_hand():
    # 10 elements, range given: per element 2 CMP, 2 ADD, 1 MULT, 1 DIV, 1 OTHER
    assert counts(histc(T(10), 4, 0, 3, result=T(4))) == {"cmp": 20, "add": 20, "mult": 10, "div": 10, "other": 10}
    # range from the data (min == max): + 2*(10-1) = 18 CMP
    c = count(torch.histc, torch.randn(10), bins=4)
    assert counts(only_record(c, "aten.histc").cost) == {"cmp": 38, "add": 20, "mult": 10, "div": 10, "other": 10}


def _qwen3_moe():
    import transformers as tf
    return tf.Qwen3MoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, num_experts=8, num_experts_per_tok=2,
                             vocab_size=64, head_dim=8)


def _deepseek_v3():
    import transformers as tf
    return tf.DeepseekV3Config(hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                               num_experts_per_tok=2, vocab_size=64, first_k_dense_replace=1, n_group=2,
                               topk_group=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                               qk_nope_head_dim=8, v_head_dim=8)


def _train_step(config, kind):
    import transformers as tf
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if kind == "fake":
            model = fake_model(lambda: tf.AutoModelForCausalLM.from_config(config))
            with fake_mode(model):
                ids = torch.randint(0, 64, (2, 8))
        else:
            model = tf.AutoModelForCausalLM.from_config(config)
            ids = torch.randint(0, 64, (2, 8))
        with OpCounter() as c:
            model(input_ids=ids, labels=ids).loss.backward()
    notes = [str(w.message) for w in seen if issubclass(w.category, RoutingAssumptionWarning)]
    return c, notes


@pytest.mark.parametrize("config", [_qwen3_moe, _deepseek_v3])
def test_user_built_moe_counts_on_fake_tensors_as_on_real(config):
    # transformers' defaults: float32, the "grouped_mm" experts path (torch's meta kernel of
    # _grouped_mm takes bfloat16 only: the counter's stand-in runs it), routing assumption warned
    fake, notes = _train_step(config(), "fake")
    real, real_notes = _train_step(config(), "real")
    assert list(fake.unknown_ops()) == [] and list(real.unknown_ops()) == []
    assert notes and notes[0] == ROUTING_ASSUMPTION and real_notes == []
    assert any(r.op == "aten._grouped_mm" for r in fake.profile.records)
    assert fake.total() == real.total()


def test_grouped_experts_path_has_the_macs_of_the_catalogs_balanced_experts():
    # the catalog's "dispatchprof_balanced" experts (linear per expert over balanced groups) and
    # transformers' default grouped path do the same contractions: equal forward MACs
    import transformers as tf

    from dispatchprof.llm.models import BALANCED_EXPERTS, register_balanced_experts

    register_balanced_experts()
    ids = torch.randint(0, 64, (2, 8))
    macs = {}
    for impl in ("grouped_mm", BALANCED_EXPERTS):
        torch.manual_seed(0)
        model = tf.AutoModelForCausalLM.from_config(_qwen3_moe(), experts_implementation=impl)
        with warnings.catch_warnings(), torch.no_grad(), OpCounter() as c:
            warnings.simplefilter("ignore")
            model(input_ids=ids)
        macs[impl] = c.total().macs
        assert any(r.op == "aten._grouped_mm" for r in c.profile.records) == (impl == "grouped_mm")
    assert macs["grouped_mm"] == macs[BALANCED_EXPERTS] > 0


def test_meta_tensors_run_the_grouped_path_too():
    import transformers as tf
    with torch.device("meta"):
        model = tf.AutoModelForCausalLM.from_config(_qwen3_moe())
    ids = torch.randint(0, 64, (2, 8), device="meta")
    with warnings.catch_warnings(record=True) as seen, OpCounter() as c:
        warnings.simplefilter("always")
        model(input_ids=ids, labels=ids).loss.backward()
    assert list(c.unknown_ops()) == [] and any(issubclass(w.category, RoutingAssumptionWarning) for w in seen)
    fake, _ = _train_step(_qwen3_moe(), "fake")
    # every field, bytes too: attention on meta runs the CPU's fused kernel (count/meta_attention.py)
    assert c.total() == fake.total()
