"""Model-level checks: coverage of the zoo, FlopCounterMode agreement, closed forms, fake builds."""

import resource
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import coverage as coverage_script
import zoo
import zoo_flops
from dispatchprof import OpCounter, fake_inputs, fake_model


@pytest.mark.parametrize("name", zoo.ZOO_NAMES)
def test_zero_unknown_ops_forward_and_backward_on_fake(name):
    calls, unknown = coverage_script.run(name, "fake", "adamw")
    assert unknown == [] and calls > 50


@pytest.mark.parametrize("kind, optimizer", [("real", "adamw-foreach"), ("real", "adamw-fused"),
                                             ("meta", "adamw"), ("real", "adamw")])
def test_zero_unknown_ops_for_every_adamw_and_tensor_kind(kind, optimizer):
    for name in ("llama", "lstm") if optimizer == "adamw" else ("llama",):
        assert coverage_script.run(name, kind, optimizer)[1] == []


def test_coverage_script_prints_a_table_and_succeeds(capsys):
    assert coverage_script.main(["--models", "resnet", "gpt2", "--kinds", "fake"]) == 0
    out = capsys.readouterr().out
    assert "resnet" in out and "gpt2" in out and "unknown ops" in out


def _flop_counter_total(name, kind):
    """FlopCounterMode's total, with scripts/zoo_flops.py's torch formulas: the CPU's fused attention
    kernels (FlopCounterMode maps the CUDA ones only), their backward less the Q K^T product the kernel
    recomputes (COUNTING.md leaves it out of the model's arithmetic), a grouped convolution's backward
    per group."""
    model, inputs, loss = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with FlopCounterMode(display=False, custom_mapping=zoo_flops.TORCH_FORMULAS) as f:
            zoo.training_step(model, inputs, loss)
    return f.get_total_flops()


def _our_macs(name, kind):
    """Our MACs of a training step."""
    model, inputs, loss = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            zoo.training_step(model, inputs, loss)
    return c.total().macs


@pytest.mark.parametrize("name", zoo.ZOO_NAMES)
def test_two_macs_equal_flop_counter_on_meta(name):
    # On meta tensors every contraction (attention and LSTM included) reaches aten as mm/bmm,
    # all of which FlopCounterMode covers.
    assert 2 * _our_macs(name, "meta") == _flop_counter_total(name, "meta")


@pytest.mark.parametrize("name", ["llama", "gpt2", "vit", "resnet"])
def test_two_macs_equal_flop_counter_on_fake_and_real(name):
    # LSTM is left out: its fused CPU kernel (mkldnn_rnn_layer) is not covered by FlopCounterMode.
    for kind in ("fake", "real"):
        assert 2 * _our_macs(name, kind) == _flop_counter_total(name, kind)


B, L, D, H, HK, HD, INTER, V, N = 2, 16, 64, 4, 2, 16, 96, 128, 2


def llama_closed_form() -> dict[str, int]:
    """ADD, MULT, DIV, SQRT, EXP of a LlamaForCausalLM forward (no labels), from COUNTING.md
    applied to the ops transformers 5 runs (modeling_llama.py)."""
    t = B * L
    acc = dict(add=0, mult=0, div=0, sqrt=0, exp=0)

    def plus(**kw):
        for k, v in kw.items():
            acc[k] += v

    def mm(m, k, n):                                       # [m,k] @ [k,n]
        plus(mult=m * n * k, add=m * n * (k - 1))

    def rms_norm():                                        # pow 2, mean, + eps, rsqrt, * rsqrt, * weight
        plus(mult=t * D, add=t * (D - 1) + t, div=t + t, sqrt=t)
        plus(mult=2 * t * D)

    plus(add=L)                                            # cache_position = arange(L) + past length
    plus(mult=L * HD // 2 + 2 * L * HD)                    # rotary: positions x inv_freq; cos, sin x scaling
    for _ in range(N):
        rms_norm()
        mm(t, D, H * HD); mm(t, D, HK * HD); mm(t, D, HK * HD)          # noqa: E702  q, k, v
        for heads in (H, HK):                              # q*cos + rotate_half(q)*sin (neg of half)
            plus(mult=2 * B * heads * L * HD, add=B * heads * L * HD // 2 + B * heads * L * HD)
        s = L * L                                          # attention, causal: mask ADD counted
        plus(mult=B * H * (s * HD + s + HD * s), add=B * H * (s * (HD - 1) + s + 2 * s - L + HD * (s - L)),
             exp=B * H * s, div=B * H * s)
        mm(t, H * HD, D)                                   # o_proj
        plus(add=t * D)                                    # residual
        rms_norm()
        mm(t, D, INTER); mm(t, D, INTER)                   # noqa: E702  gate, up
        plus(exp=t * INTER, add=t * INTER, div=t * INTER, mult=t * INTER)   # silu
        plus(mult=t * INTER)                               # act * up
        mm(t, INTER, D)                                    # down
        plus(add=t * D)                                    # residual
    rms_norm()
    mm(t, D, V)                                            # lm_head
    return acc


@pytest.mark.parametrize("kind", ["real", "fake"])
def test_llama_forward_matches_closed_form(kind):
    import transformers as tf

    cfg = tf.LlamaConfig(hidden_size=D, intermediate_size=INTER, num_hidden_layers=N, num_attention_heads=H,
                         num_key_value_heads=HK, vocab_size=V, max_position_embeddings=64)
    if kind == "fake":
        model = fake_model(lambda: tf.LlamaForCausalLM(cfg))
        ids = fake_inputs(model, B, L, high=V)
    else:
        torch.manual_seed(0)
        model, ids = tf.LlamaForCausalLM(cfg), torch.randint(0, V, (B, L))
    with torch.no_grad(), OpCounter() as c:
        model(ids)
    t = c.total()
    assert {k: getattr(t, k) for k in ("add", "mult", "div", "sqrt", "exp")} == llama_closed_form()


def test_fake_model_keeps_tied_weights_tied():
    import transformers as tf

    # Llama-3.2-1B (MODELS.md): tied embeddings, 1,235,814,400 parameters.
    cfg = tf.LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True)
    model = fake_model(lambda: tf.LlamaForCausalLM(cfg))
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert sum(p.numel() for p in model.parameters()) == 1_235_814_400
    with torch.no_grad(), OpCounter() as c:
        model(fake_inputs(model, 1, 2))
    assert c.by_module()[""].scope.params == 1_235_814_400


def test_405b_builds_on_fake_tensors_in_little_memory():
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=128256, hidden_size=16384, intermediate_size=53248, num_hidden_layers=126,
                         num_attention_heads=128, num_key_value_heads=8, tie_word_embeddings=False)
    model = fake_model(lambda: tf.LlamaForCausalLM(cfg), dtype=torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == 405_853_388_800       # MODELS.md
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert torch.get_default_dtype() == torch.float32                           # restored
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 4 * 1024 * 1024  # KiB: under 4 GiB
    ids = fake_inputs(model, 1, 4, high=100)
    with torch.no_grad(), OpCounter() as c:
        model(ids)
    # MACs: 4 tokens through every Linear weight (all parameters but the embedding table and
    # the 2*126+1 RMSNorm weights), plus attention's two products: 128 heads x 4x4 scores x (128+128).
    linear_weights = 405_853_388_800 - 128256 * 16384 - (2 * 126 + 1) * 16384
    assert c.total().macs == 4 * linear_weights + 126 * 128 * 16 * 256
