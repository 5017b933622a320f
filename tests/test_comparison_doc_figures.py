"""docs/comparison.md's figures agree with `scripts/compare_peers.py --markdown`:

- its table equals the committed output (scripts/data/compare_peers.txt, the wall-time column left out,
  as the doc says), whose first line names the command and the peers' versions;
- dispatchprof's and torch FlopCounterMode's rows are re-run here for GPT-2, BERT-base and the CNN
  (Llama-3.2-1B's random initialisation alone takes about 16 s on a 2-core machine; its rows, like
  the peers', an optional extra, are checked against the file only);
- the prose's sums: our MACs = matmul-like MACs + attention's (layers x heads x Lq x Lk x (E + Ev),
  from the configs), FlopCounterMode = 2 x our matmul MACs, calflops' and fvcore's MACs, DeepSpeed's
  FLOPs = 2 x MACs + its element-wise term, thop's LM head."""

from __future__ import annotations

import re
import warnings

import compare_peers as cp
import pytest
import torch

from dispatchprof import OpCounter
from dispatchprof.llm.catalog import load_config
from tests.accuracy_docs import DATA, ROOT, cells

DOC = ROOT / "docs" / "comparison.md"
MODELS = ("gpt2", "bert-base", "llama-3.2-1b", "resnet-style CNN")
RERUN = ("gpt2", "bert-base", "resnet-style CNN")
TOKENS = {"gpt2": 128, "bert-base": 128, "llama-3.2-1b": 64}      # the script's batch-1 inputs


def _table(text: str) -> list[list[str]]:
    """The body rows of the first markdown table of ``text``, first five cells."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    return [cells(l)[:5] for l in lines[2:]]


def _file() -> tuple[str, list[list[str]]]:
    command, out = (DATA / "compare_peers.txt").read_text().split("\n", 1)
    return command, _table(out)


def _doc() -> str:
    return " ".join(DOC.read_text().split())


def _row(model: str, tool: str) -> list[str]:
    (row,) = [r for r in _file()[1] if r[:2] == [model, tool]]
    return row


def _g(cell: str) -> float:
    """A table cell ("16.114 G", "2.064 M", "1,514") as a number."""
    value, _, unit = cell.partition(" ")
    return float(value.replace(",", "")) * {"G": 1e9, "M": 1e6, "": 1.0}[unit]


def test_doc_table_is_the_scripts_output():
    command, rows = _file()
    assert command.startswith("$ python scripts/compare_peers.py --markdown")
    assert [r[:2] for r in rows] == [[m, p] for m in MODELS for p in cp.PEERS]
    assert _table(DOC.read_text()) == rows
    versions = re.search(r"torch (\d+\.\d+)\.\d+\S*, transformers (\d+\.\d+)\.\d+", command).groups()
    assert f"Torch {versions[0]}, transformers {versions[1]}:" in _doc()


@pytest.fixture(scope="module")
def counted() -> dict[str, tuple[OpCounter, list[str], list[str]]]:
    """Per model: dispatchprof's counter and its and FlopCounterMode's rows as the script prints them."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in RERUN:
            model, inputs = cp.models()[name]()
            with torch.no_grad():
                with OpCounter(model) as c:           # as cp.run_peer("dispatchprof", ...) counts it
                    model(**inputs)
                fcm = cp.run_peer("FlopCounterMode", model, inputs)
            ours = (c.total().flops, c.total().macs, c.by_module()[""].scope.params)
            out[name] = (c, [name, "dispatchprof", *map(cp.fmt, ours)],
                         [name, "FlopCounterMode", *map(cp.fmt, fcm)])
    return out


@pytest.mark.parametrize("model", RERUN)
def test_our_and_flop_counter_modes_rows_rerun(counted, model):
    _, ours, fcm = counted[model]
    assert ours == _row(model, "dispatchprof")
    assert fcm == _row(model, "FlopCounterMode")


def _attention_macs(model: str) -> int:
    """layers x heads x Lq x Lk x (E + Ev), E = Ev = the head dimension."""
    cfg = load_config(model)
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return cfg.num_hidden_layers * heads * TOKENS[model] ** 2 * 2 * head_dim


@pytest.mark.parametrize("model", ["gpt2", "bert-base"])
def test_attention_is_what_dispatchprof_counts(counted, model):
    ops = counted[model][0].by_operator()
    assert sum(s.totals.macs for op, s in ops.items() if "scaled_dot_product" in op) == _attention_macs(model)


@pytest.mark.parametrize("model, doc_name", [("gpt2", "GPT-2"), ("bert-base", "BERT-base"),
                                             ("llama-3.2-1b", "Llama-3.2-1B")])
def test_mac_split_and_the_peers_it_explains(model, doc_name):
    attention = _attention_macs(model)
    matmul = _g(_row(model, "calflops")[3])          # calflops: MACs = our matmul MACs, to the table's rounding
    assert abs(_g(_row(model, "dispatchprof")[3]) - (matmul + attention)) <= 1e6    # 0.001 G rounding
    assert f"{doc_name} {cp.fmt(matmul)} + {attention / 1e9:.3f} G" in _doc()
    # FlopCounterMode: 2 x our matmul MACs (no formula for the CPU flash-attention kernel)
    assert abs(_g(_row(model, "FlopCounterMode")[2]) - 2 * matmul) <= 1e6
    assert _row(model, "deepspeed")[3] == _row(model, "dispatchprof")[3]


@pytest.mark.parametrize("model", ["gpt2", "bert-base"])
def test_matmul_macs_rerun(counted, model):
    """Our MACs less attention's are calflops' MACs and half FlopCounterMode's FLOPs, exactly."""
    c, _, fcm = counted[model]
    matmul = c.total().macs - _attention_macs(model)
    assert cp.fmt(matmul) == _row(model, "calflops")[3] and fcm[2] == cp.fmt(2 * matmul)


def test_attention_arithmetic_quoted():
    text = _doc()
    assert f"12·12·128·128·128 = {12 * 12 * 128 * 128 * 128 / 1e9:.3f} G" in text
    assert f"16·32·64·64·128 = {16 * 32 * 64 * 64 * 128 / 1e9:.3f} G" in text


def test_gpt2_flops_decompositions():
    """DeepSpeed's 32.241 G = 2 x 16.114 G + 0.013 G; ours 32.285 G = 2 x 16.114 G + 0.057 G (the
    element-wise terms are the differences, to the table's rounding)."""
    macs = _g(_row("gpt2", "dispatchprof")[3])
    ds, ours = _g(_row("gpt2", "deepspeed")[2]), _g(_row("gpt2", "dispatchprof")[2])
    text = _doc()
    assert f"GPT-2: {2 * macs / 1e9:.3f} G + {(ds - 2 * macs) / 1e9:.3f} G = {ds / 1e9:.3f} G" in text
    assert f"GPT-2: {2 * macs / 1e9:.3f} G + {(ours - 2 * macs) / 1e9:.3f} G = {ours / 1e9:.3f} G" in text
    assert f"GPT-2 {_row('gpt2', 'FlopCounterMode')[2]} = 2 × {_row('gpt2', 'calflops')[3]}" in text


def test_thop_lm_head_and_params():
    cfg = load_config("gpt2")
    lm_head = cfg.n_embd * cfg.vocab_size * 128
    text = _doc()
    assert f"{cfg.n_embd} × {cfg.vocab_size} × 128 = {lm_head / 1e9:.2f} G" in text
    assert f"{_row('gpt2', 'thop')[3]} MACs" in text
    assert f"({_g(_row('gpt2', 'thop')[4]) / 1e6:.1f} M;" in text
    assert f"BERT it misses the embeddings: {_g(_row('bert-base', 'thop')[4]) / 1e6:.1f} M" in text
    params = [_row(m, "dispatchprof")[4] for m in MODELS]
    assert f"({_g(params[0]) / 1e6:.2f} M, {_g(params[1]) / 1e6:.2f} M, {params[2]}, {params[3]})" in text


def test_cnn_figures():
    text = _doc()
    ours = _row("resnet-style CNN", "dispatchprof")
    assert {_row("resnet-style CNN", t)[3] for t in ("dispatchprof", "calflops", "deepspeed")} == {ours[3]}
    assert f"our MACs = calflops = DeepSpeed = {ours[3]}" in text
    assert f"FlopCounterMode {_row('resnet-style CNN', 'FlopCounterMode')[2]} ≈ 2 × {ours[3]}" in text
    assert f"our FLOPs ({ours[2]})" in text
    for tool in ("fvcore", "ptflops", "thop"):
        assert _row("resnet-style CNN", tool)[3] in text
