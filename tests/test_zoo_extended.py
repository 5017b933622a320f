"""A few of the extended zoo families (scripts/coverage.py runs them all): no unknown op in a
training step, and the new plain-torch nets reach the new formulas."""

import pytest

import coverage as coverage_script
import zoo


@pytest.mark.parametrize("name, kind", [("unet", "fake"), ("gru", "real"), ("audio-conv", "meta"),
                                        ("swin", "fake"), ("wav2vec2", "real")])
def test_extended_zoo_has_no_unknown_ops(name, kind):
    calls, unknown = coverage_script.run(name, kind, "adamw")
    assert unknown == [] and calls > 50


def test_every_zoo_name_builds_an_entry():
    assert set(zoo.ALL_NAMES) == (set(zoo.ZOO_NAMES) | set(zoo.EXTENDED_NAMES) | set(zoo.FAMILIES_2026)
                                  | set(zoo.MORE_NAMES) | set(zoo.EXTRA_NAMES))
    assert set(zoo._entries()) == set(zoo.ALL_NAMES)
    with pytest.raises(KeyError, match="unknown zoo model 'nope'; known: llama"):
        zoo.entry("nope")


def test_convnext_builds_on_fake_tensors_and_counts_as_on_real():
    # its constructor reads drop-path rates from a linspace (.tolist()): fake_model keeps those real
    _, unknown, real = coverage_script.run_totals("convnext", "real", "adamw")
    _, _, fake = coverage_script.run_totals("convnext", "fake", "adamw")
    assert unknown == [] and coverage_script.versus_real(fake, real) == "= real"


@pytest.mark.parametrize("name, kind", [("detr", "real"), ("clip", "meta")])
def test_detr_trains_and_clip_runs_on_meta(name, kind):
    # DETR: a transformers ResNet backbone, encoder, decoder, class and box heads; CLIP on meta
    # failed only because the zoo passed return_loss as a tensor (no value on meta)
    calls, unknown = coverage_script.run(name, kind, "adamw")
    assert unknown == [] and calls > 500


@pytest.mark.parametrize("name, kind, where", [
    ("bart", "meta", "masking_utils"),              # the causal-mask shortcut calls .item()
    ("detr", "meta", "masking_utils"),              # the bidirectional-mask shortcut calls .all()
    ("detr", "fake", "isfinite"),                   # each training encoder layer tests isfinite().all()
    ("qwen2-vl", "meta", "grid_thw.tolist()"),      # vision position ids from the image grid's values
    ("blip2", "meta", "masking_utils"),             # the Q-Former's bidirectional-mask shortcut calls .all()
    ("deberta-v2", "meta", "pad_token_id in input_ids"),    # transformers' padding warning reads ids
    ("encodec", "meta", "max(padding_left, padding_right)"),  # padding from tensor values
    ("deformable-detr", "fake", "isfinite"),        # as DETR: each training encoder layer
    ("whisper-generate", "fake", "unfinished_sequences.max()"),     # generate's stopping test
])
def test_the_zoo_error_cells_fail_without_the_counter(name, kind, where):
    # docs/zoo.md: these cells are transformers reading tensor values, not the counter
    import traceback
    import warnings

    from torch._subclasses.fake_tensor import DataDependentOutputException

    with warnings.catch_warnings(), pytest.raises((RuntimeError, DataDependentOutputException)) as e:
        warnings.simplefilter("ignore")
        model, inputs, loss = zoo.build(name, kind)
        zoo.training_step(model, inputs, loss)
    frames = [f for f in traceback.extract_tb(e.value.__traceback__) if "transformers" in f.filename]
    files = "".join(f.filename for f in traceback.extract_tb(e.value.__traceback__))
    assert "count/modes.py" not in files and "count/recorder.py" not in files       # no OpCounter ran
    assert any(where in (f.line or "") or where in f.filename for f in frames)


def test_detr_forward_in_eval_mode_counts_on_fake_tensors():
    # the fake training cell fails on DETR's training-only isfinite() check; eval mode skips it
    import warnings

    import torch

    from dispatchprof import OpCounter

    model, inputs, _ = zoo.build("detr", "fake")
    model.eval()
    with warnings.catch_warnings(), torch.no_grad(), OpCounter() as c:
        warnings.simplefilter("ignore")
        model(**inputs)
    assert list(c.unknown_ops()) == [] and c.total().macs > 0


@pytest.mark.parametrize("name, kind", [
    ("mixtral", "fake"), ("gpt-oss", "fake"), ("jamba", "fake"), ("mamba2", "fake"), ("rwkv", "fake"),
    ("llama4", "fake"), ("dinov2", "meta"), ("patchtst", "real"), ("wav2vec2-ctc", "real"),
    ("qwen2-vl", "real"), ("blip2", "fake"), ("sam", "fake"),
])
def test_2026_families_have_no_unknown_ops(name, kind):
    # scripts/coverage.py runs every family on every kind; these cover the MoE grouped products,
    # the state-space scans, chunked attention, a ViT on meta, a time-series model and CTC
    calls, unknown = coverage_script.run(name, kind, "adamw")
    assert unknown == [] and calls > 200


def test_a_moe_family_counts_on_fake_tensors_as_on_real():
    # the grouped experts path, the bf16 stand-in and the balanced routing rule give fake = real
    _, _, real = coverage_script.run_totals("qwen2-moe", "real", "adamw")
    _, _, fake = coverage_script.run_totals("qwen2-moe", "fake", "adamw")
    assert coverage_script.versus_real(fake, real) == "= real" and real["macs"] > 0


def test_versus_real_names_the_fields_that_differ():
    real = dict.fromkeys(coverage_script.FIELDS, 10)
    assert coverage_script.versus_real(dict(real, add=12, bytes_read=4), real) == "add +2; bytes_read -6"
    assert coverage_script.versus_real(real, None) == "-"


def test_whisper_generate_counts_isin_on_real_tensors():
    import warnings

    import torch

    from dispatchprof import OpCounter

    model, inputs, _ = zoo.build("whisper", "real")
    model.eval()
    model.generation_config.forced_decoder_ids = None
    with warnings.catch_warnings(), torch.no_grad(), OpCounter() as c:
        warnings.simplefilter("ignore")
        model.generate(input_features=inputs["input_features"], max_new_tokens=3, do_sample=False)
    assert list(c.unknown_ops()) == [] and any(r.op == "aten.isin" for r in c.profile.records)
