"""scripts/zoo_layouts.py finds the op whose fake kernel lays its output out otherwise."""

import torch

import zoo_layouts


def test_compare_names_the_op_with_another_output_layout_and_the_diverging_span():
    real = [("aten.mm", (((2, 3), (3, 1)),), ((2, 3), (3, 1))), ("aten.view", None, None)]
    fake = [("aten.mm", (((2, 3), (3, 1)),), ((2, 3), (1, 2))), ("aten.clone", None, None),
            ("aten.view", None, None)]
    rows, spans = zoo_layouts.compare(real, fake)
    assert rows == [(0, "aten.mm", (((2, 3), (3, 1)),), ((2, 3), (3, 1)), ((2, 3), (1, 2)))]
    assert spans == ["insert real[1:1] [] other[1:2] ['aten.clone']"]


def test_layout_reads_shapes_and_strides_recursively():
    t = torch.empty(2, 3).t()
    assert zoo_layouts.layout([t, 1, (t,)]) == (((3, 2), (1, 3)), None, (((3, 2), (1, 3)),))


def test_swin_on_fake_tensors_has_no_layout_difference(capsys):
    # the counter's stand-in gives native_layer_norm_backward the CPU kernel's layout
    assert zoo_layouts.main(["swin", "fake"]) == 0
    assert capsys.readouterr().out.strip().endswith("0 layout differences, 0 diverging spans")
