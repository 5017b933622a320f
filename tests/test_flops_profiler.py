"""dispatchprof.flops_profiler runs DeepSpeed-style code unchanged and gives DeepSpeed's numbers.

Expected strings of the *_to_string functions were produced by DeepSpeed v0.19.6's own profiler.py
(run with its DeepSpeed-only imports stubbed); counts are worked out by hand below.
"""

import re

import pytest
import torch
from torch import nn

import deepspeed_side_by_side  # scripts/, on the path (conftest)
from conftest import MICRO_LLAMA, MLP_FWD_MACS, mlp
from test_reports import Tiny

from dispatchprof import flops_profiler as fp
from dispatchprof.flops_profiler import FlopsProfiler, get_model_profile


# The MLP, batch 4. Forward MACs: 4*64*256 + 4*256*10 = 65536 + 10240 = 75,776.
# Backward MACs: weight grads of both layers (75,776) + input grad of the second (4*10*256 =
# 10,240) = 86,016, so forward + backward = 161,792: DeepSpeed reports the forward only.
# DeepSpeed's FLOPs: 2 x MACs (bias not counted) + one per ReLU element (4*256):
# 151,552 + 1,024 = 152,576 -> '152.58 K'. Params: 64*256+256 + 256*10+10 = 16,640 + 2,570 = 19,210.
FWD_MACS, DS_FLOPS, PARAMS = MLP_FWD_MACS, 152_576, 19_210


def profiled_tiny() -> FlopsProfiler:
    """A started FlopsProfiler on a seeded Tiny (test_reports), after one forward of batch 2."""
    torch.manual_seed(0)
    model = Tiny()
    prof = FlopsProfiler(model)
    prof.start_profile()
    model(torch.randn(2, 3))
    return prof


def assert_nothing_left(model: nn.Module) -> None:
    """No profiler attribute (``__flops__``, ...) and no forward hook left on any module."""
    for m in model.modules():
        assert not [k for k in vars(m) if k.startswith("__")], m
        assert not (m._forward_hooks or m._forward_pre_hooks)


def test_training_loop_counts_the_forward_only_and_leaves_nothing_behind():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 64), torch.randn(4, 10)
    expected = model(x)
    prof = FlopsProfiler(model)
    prof.start_profile()
    out = model(x)
    loss = nn.functional.mse_loss(out, y)       # outside any module forward: not counted
    loss.backward()
    opt.step()
    assert torch.equal(out, expected)           # bit-identical output
    assert prof.get_total_macs() == FWD_MACS
    assert prof.get_total_flops() == DS_FLOPS
    assert prof.get_total_params() == PARAMS
    assert prof.profile.total().macs == 161_792  # the OpCounter underneath saw backward too
    assert (prof.get_total_macs(as_string=True), prof.get_total_flops(as_string=True),
            prof.get_total_params(as_string=True)) == ("75.78 KMACs", "152.58 K", "19.21 K")
    # per-module attributes: own ops only for flops/macs, params include children
    lin0, relu, lin1 = model
    assert (lin0.__flops__, lin0.__macs__, lin0.__params__) == (2 * 65536, 65536, 16640)
    assert (relu.__flops__, relu.__macs__, relu.__params__) == (4 * 256, 0, 0)
    assert (lin1.__flops__, lin1.__macs__, lin1.__params__) == (2 * 10240, 10240, 2570)
    assert (model.__flops__, model.__macs__, model.__params__) == (0, 0, PARAMS)
    assert model.__expert_params__ == 0 and lin0.__duration__ > 0
    assert prof.get_total_duration() == model.__duration__ > 0
    prof.end_profile()
    assert_nothing_left(model)
    assert torch.equal(model(x), model(x))


def test_flop_rules_switch_gives_our_counts():
    # Ours: a Linear with bias is M*N*K MULT + M*N*(K-1) ADD + M*N ADD (bias) = 2 * MACs;
    # ReLU is a comparison (CMP), not a FLOP: 2 * 75,776 = 151,552.
    model = mlp()
    prof = FlopsProfiler(model, flop_rules="dispatchprof")
    prof.start_profile()
    model(torch.randn(4, 64))
    prof.stop_profile()
    assert (prof.get_total_flops(), prof.get_total_macs()) == (2 * FWD_MACS, FWD_MACS)
    assert model[1].__flops__ == 0
    prof.end_profile()
    with pytest.raises(ValueError, match=r"flop_rules must be one of \('deepspeed', 'dispatchprof'\), got 'x'"):
        FlopsProfiler(model, flop_rules="x")


def test_get_model_profile_deepspeed_defaults(capsys):
    model = mlp()
    model.train()
    assert get_model_profile(model, input_shape=(4, 64)) == ("152.58 K", "75.78 KMACs", "19.21 K")
    assert model.training                        # eval during the profile, restored after
    out = capsys.readouterr().out
    assert "-------------------------- DeepSpeed Flops Profiler --------------------------" in out
    assert "Profile Summary at step 1:" in out
    lines = out.splitlines()
    # DeepSpeed's line format '{:<70}  {:<8}': label padded to 70, two spaces, value padded to 8
    assert "fwd MACs per GPU: " + " " * 52 + "  " + "75.78 KMACs" in lines
    assert "fwd flops per GPU: " + " " * 51 + "  " + "152.58 K" in lines
    assert "params per GPU: " + " " * 54 + "  " + "19.21 K " in lines
    assert re.search(r"^  \(0\): Linear\(16\.64 K = 86\.62% Params, 65\.54 KMACs = 86\.49% MACs, .* latency, "
                     r".*FLOPS, in_features=64, out_features=256, bias=True\)$", out, re.M)
    assert re.search(r"^  \(1\): ReLU\(0 = 0% Params, 0 MACs = 0% MACs, ", out, re.M)
    assert get_model_profile(model, args=[torch.randn(4, 64)], print_profile=False, as_string=False) == \
        (DS_FLOPS, FWD_MACS, PARAMS)
    assert_nothing_left(model)


def test_get_model_profile_our_rules_and_ignore_list(tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    # MACs, batch 2: 2*3*4 + 3 * 2*4*4 + 2*4*2 = 24 + 96 + 16 = 136; ours: 136 + 142 FLOPs;
    # params 16 + 3*20 + 10 = 86.
    assert get_model_profile(model, input_shape=(2, 3), print_profile=False, as_string=False,
                             flop_rules="dispatchprof") == (136 + 142, 136, 86)
    # DeepSpeed's rules: 2*136 + 3 ReLUs * 8 elements + softmax 4 elements = 272 + 24 + 4 = 300
    # (DeepSpeed itself misses `.softmax` called as a tensor method: 296; docs/deepspeed.md).
    prof = FlopsProfiler(model)
    prof.start_profile(ignore_list=[nn.ReLU])   # a ReLU's ops count in its Block, as DeepSpeed
    model(torch.randn(2, 3))
    prof.stop_profile()
    assert prof.get_total_flops() == 300 and prof.get_total_macs() == 136
    assert model.blocks[0].act.__flops__ == 0 and model.blocks[0].act.__duration__ == 0
    assert model.blocks[0].__flops__ == 8        # the ReLU's 2*4 elements
    assert model.__flops__ == 4                  # the softmax, run in the root's forward
    out = tmp_path / "profile.txt"
    prof.print_model_profile(output_file=str(out), detailed=False)
    text = out.read_text()
    assert "fwd MACs per GPU" in text and "Detailed Profile" not in text
    prof.end_profile()
    with pytest.raises(RuntimeError, match="nothing profiled"):
        prof.get_total_flops()


def test_aggregated_profile_by_depth(capsys):
    prof = profiled_tiny()
    prof.print_model_aggregated_profile(module_depth=3, top_modules=2)
    out = capsys.readouterr().out.splitlines()
    prof.end_profile()
    # depth 0: Tiny. depth 1: Linear (embed + head: 16 + 10 = 26 params, 24 + 16 = 40 MACs) and
    # ModuleList (3 blocks: 60 params, 96 MACs). depth 2: Block x3 (60 params, 96 MACs).
    assert out[0] == "Top 2 modules in terms of params, MACs or fwd latency at different model depths:"
    assert out[1:4] == ["depth 0:", "    params      - {'Tiny': '86'}", "    MACs        - {'Tiny': '136 MACs'}"]
    assert out[5:8] == ["depth 1:", "    params      - {'ModuleList': '60', 'Linear': '26'}",
                        "    MACs        - {'ModuleList': '96 MACs', 'Linear': '40 MACs'}"]
    assert out[9:12] == ["depth 2:", "    params      - {'Block': '60'}", "    MACs        - {'Block': '96 MACs'}"]
    assert re.fullmatch(r"    fwd latency - \{'Block': '[\d.]+ [mu]?s'\}", out[12])
    assert len(out) == 13                        # as DeepSpeed, depth 3 (module_depth) is not printed


def test_aggregated_profile_outside_a_profile(capsys):
    FlopsProfiler(mlp()).print_model_aggregated_profile()
    assert capsys.readouterr().out.startswith("no __flops__ attribute in the model")


def test_hooks_and_attributes_removed_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    model = nn.Sequential(nn.Linear(2, 2), Boom())
    prof = FlopsProfiler(model)
    prof.start_profile()
    with pytest.raises(RuntimeError, match="boom"):
        model(torch.randn(1, 2))
    assert model[0].__macs__ == 2 * 2      # the Linear ran before the error: 1*2*2 MACs
    prof.end_profile()
    assert_nothing_left(model)


def test_generate_mode_on_a_tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**MICRO_LLAMA, max_position_embeddings=64))
    ids = torch.randint(0, 64, (1, 5))
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False)
    # 3 forwards: a prefill of 5 tokens and 2 decode steps of 1 token over 6 and 7 positions.
    # Linear MACs per token: q, k, v, o 4*16*16 = 1024; gate, up, down 3*16*32 = 1536 -> 2560;
    # 7 tokens: 17,920. lm_head on the last position of each forward: 3 * 16*64 = 3,072.
    # Attention (QK^T and PV, 2 heads of 8): 2*5*5*8*2 = 800; 2*1*6*8*2 = 192; 2*1*7*8*2 = 224.
    macs = 17_920 + 3_072 + 800 + 192 + 224                      # 22,208
    # DeepSpeed's FLOPs: 2 x MACs + one per SiLU element (32 per token, 7 tokens); RMSNorm, rotary
    # and residuals are `*`, `+` and rsqrt, which DeepSpeed does not count.
    flops = 2 * macs + 7 * 32                                    # 44,640
    # params: embed 64*16 + attn 4*16*16 + mlp 3*16*32 + norms 3*16 + lm_head 16*64 = 4,656
    params = 1024 + 1024 + 1536 + 48 + 1024
    assert get_model_profile(model, args=[ids], kwargs=kw, mode="generate", print_profile=False,
                             as_string=False) == (flops, macs, params)
    assert get_model_profile(model, args=[ids], kwargs=kw, mode="generate", print_profile=False) == \
        ("44.64 K", "22.21 KMACs", "4.66 K")
    with pytest.raises(ValueError, match=r"mode=\.\.\.\) must be one of \('forward', 'generate'\), got 'train'"):
        get_model_profile(model, args=[ids], mode="train")


@pytest.mark.parametrize("call, message", [
    (lambda: get_model_profile(mlp(), print_profile=False), "needs an input"),
    (lambda: get_model_profile(mlp(), input_shape=[4, 64]), "input_shape must be a non-empty tuple"),
    (lambda: get_model_profile("model"), "takes an nn.Module, got str"),
    (lambda: FlopsProfiler(mlp()).get_total_macs(), "nothing profiled"),
])
def test_errors(call, message):
    with pytest.raises((ValueError, TypeError, RuntimeError), match=message):
        call()


def test_start_twice_raises():
    prof = FlopsProfiler(mlp())
    prof.start_profile()
    with pytest.raises(RuntimeError, match="called twice"):
        prof.start_profile()
    prof.end_profile()
    prof.start_profile()                          # a fresh profile after end_profile
    prof.end_profile()


# (value, number_to_string, macs_to_string, params_to_string, duration_to_string, flops_to_string),
# as DeepSpeed v0.19.6 prints them.
STRINGS = [
    (152580, "152.58 K", "152.58 KMACs", "152.58 K", "152.58 Ks", "152.58 KFLOPS"),
    (75776, "75.78 K", "75.78 KMACs", "75.78 K", "75.78 Ks", "75.78 KFLOPS"),
    (0, "0 ", "0 MACs", "0", "0 s", "0 FLOPS"),
    (999, "999 ", "999 MACs", "999", "999 s", "999 FLOPS"),
    (12.345, "12.35 ", "12.35 MACs", "12.35", "12.35 s", "12.35 FLOPS"),
    (1000, "1 K", "1 KMACs", "1 K", "1 Ks", "1 KFLOPS"),
    (999999, "1000 K", "1000 KMACs", "1000 K", "1000 Ks", "1000 KFLOPS"),
    (1234567, "1.23 M", "1.23 MMACs", "1.23 M", "1.23 Ms", "1.23 MFLOPS"),
    (1.5e9, "1.5 G", "1.5 GMACs", "1.5 B", "1.5 Gs", "1.5 GFLOPS"),
    (2e12, "2 T", "2 TMACs", "2 T", "2 Ts", "2 TFLOPS"),
    (1.5e18, "1.5e+06 T", "1.5e+06 TMACs", "1.5e+06 T", "1.5e+06 Ts", "1.5e+06 TFLOPS"),
    (0.5, "500 m", "500 mMACs", "500 m", "500 ms", "500 mFLOPS"),
    (2.5e-4, "250 u", "250 uMACs", "250 u", "250 us", "250 uFLOPS"),
    (3e-7, "0.3 u", "0.3 uMACs", "0.3 u", "0.3 us", "0.3 uFLOPS"),
    (-5, "-5e+06 u", "-5e+06 uMACs", "-5e+06 u", "-5e+06 us", "-5e+06 uFLOPS"),
]


@pytest.mark.parametrize("value, number, macs, params, duration, flops", STRINGS)
def test_strings_as_deepspeed(value, number, macs, params, duration, flops):
    assert fp.number_to_string(value) == number
    assert fp.macs_to_string(value) == macs
    assert fp.params_to_string(value) == params
    assert fp.duration_to_string(value) == duration
    assert fp.flops_to_string(value) == flops


def test_strings_with_units():
    assert fp.number_to_string(152580, units="M") == "0.15 M"
    assert fp.params_to_string(1.5e9, units="B") == "1.5 B"
    assert fp.params_to_string(1.5e9, units="M") == "1500 M"
    assert fp.bytes_to_string(152580) == "152.58 KB"
    assert fp.number_to_string(1234, precision=0) == "1 K"


def _side_by_side():
    return [c for c in deepspeed_side_by_side.cases() if c[3] is not None]


@pytest.mark.parametrize("name, model, args, printed", _side_by_side(), ids=lambda v: v if isinstance(v, str) else "")
def test_matches_what_deepspeed_printed(name, model, args, printed):
    """An independent check: (FLOPs, MACs) that DeepSpeed v0.19.6's own profiler.py printed for
    these modules (LeNet5 is its unit test: 866,076,672 FLOPs, 426,516,480 MACs, 61,706 params)."""
    flops, macs, params = get_model_profile(model, args=args, print_profile=False, as_string=False)
    assert (flops, macs) == printed
    if name.startswith("LeNet5"):
        assert params == 61_706


def test_detailed_profile_tree(capsys):
    prof = profiled_tiny()
    prof.print_model_profile(top_modules=1)
    prof.end_profile()
    out = capsys.readouterr().out.splitlines()
    tree = out[out.index("Tiny(") + 1:]
    # Tiny: 86 params, 136 MACs; embed 16 params (18.6%), 24 MACs (17.65%): as nn.Module.__repr__ lays it out
    assert re.fullmatch(r"  86 = 100% Params, 136 MACs = 100% MACs, .* = 100% latency, .*FLOPS", tree[0])
    assert re.fullmatch(r"  \(embed\): Linear\(16 = 18\.6% Params, 24 MACs = 17\.65% MACs, .*, "
                        r"in_features=3, out_features=4, bias=True\)", tree[1])
    assert tree[2:4] == ["  (blocks): ModuleList(", "    (0): Block("]      # a ModuleList has no line of its own
    assert re.fullmatch(r"      20 = 23\.26% Params, 32 MACs = 23\.53% MACs, .*", tree[4])
    assert out[-1] == "-" * 78
