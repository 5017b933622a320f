"""The sizing search (dispatchprof.serving.plan) on a toy cost model whose best layout is known."""

import pytest

from dispatchprof.serving.plan import Candidate, Outcome, candidates, cheapest, engine_commands, pareto, search


def toy(c: Candidate):
    """TPOT = 100 ms / tp, TTFT = 1 s / all GPUs, tokens/s per GPU = 100 / tp; disaggregated layouts
    do not fit."""
    if c.disaggregated:
        return None
    return Outcome(c, 100 / c.tp, 1.0 / c.gpus, 0.1 / c.tp)


def test_candidates_by_hand():
    # 8 heads, 4 GPUs, aggregated: tp 1 x 1..4, tp 2 x 1..2, tp 4 x 1 = 7
    got = candidates(8, 4, disaggregated=False)
    assert len(got) == 7 and {c.gpus for c in got} == {1, 2, 3, 4}
    # 6 heads: tp 4 does not divide them
    assert {c.tp for c in candidates(6, 8, disaggregated=False)} == {1, 2}
    # disaggregated on 3 GPUs of tp 1: 1P+1D, 1P+2D, 2P+1D
    assert {(c.prefill, c.decode) for c in candidates(8, 3) if c.disaggregated and c.tp == 1} == \
        {(1, 1), (1, 2), (2, 1)}
    # an MoE model of 8 experts on 8 GPUs: ep 2, 4, 8 with dp-attention 1 or G
    moe = [c for c in candidates(8, 8, experts=8, disaggregated=False) if c.ep > 1]
    assert {(c.ep, c.dp_attention) for c in moe} == {(2, 1), (2, 2), (4, 1), (4, 4), (8, 1), (8, 8)}


def test_the_planner_picks_the_known_best():
    """SLOs TTFT <= 300 ms, TPOT <= 30 ms: TPOT needs tp >= 4 (25 ms), TTFT >= 4 GPUs (250 ms):
    1 x tp4 on 4 GPUs is the fewest; 2 x tp4 meets them too, on 8."""
    outcomes = search(candidates(8, 8), toy)
    best, nearest = cheapest(outcomes, 0.3, 0.03)
    assert best.candidate == Candidate(4, 1) and nearest == []
    # the front: tp 1 (100 tok/s/GPU, 10 tok/s/user), tp 2 (50, 20), tp 4 (25, 40), tp 8 (12.5, 80)
    front = {(o.tokens_per_s_per_gpu, round(o.tokens_per_s_per_user, 9)) for o in pareto(outcomes)}
    assert front == {(100, 10), (50, 20), (25, 40), (12.5, 80)}


def test_no_layout_meets_gives_the_closest():
    """TPOT <= 10 ms would need tp 10: none meets it; the closest is 1 x tp8 (12.5 ms / 10 ms = 1.25),
    then tp 4 layouts (25 / 10 = 2.5)."""
    best, nearest = cheapest(search(candidates(8, 8), toy), 1.0, 0.01)
    assert best is None and nearest[0].candidate == Candidate(8, 1)
    assert [o.candidate.tp for o in nearest[1:]] == [4, 4]
    assert nearest[0].distance(1.0, 0.01) == pytest.approx(1.25)


def test_engine_commands():
    assert engine_commands("m", Candidate(1, 1, ep=8, dp_attention=8)) == [
        "vllm serve m --tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel",
        "python -m sglang.launch_server --model-path m --tp 8 --ep 8 --dp 8 --enable-dp-attention"]
    assert engine_commands("m", Candidate(4, 2))[0] == "2 x vllm serve m --tensor-parallel-size 4"
    with pytest.raises(ValueError, match="max_gpus must be a whole number >= 1"):
        candidates(8, 0)


def test_plan_command_prints_the_front_and_the_flags(capsys, tmp_path):
    import json

    from conftest import run_cli
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 4096}))
    code, out, err = run_cli(capsys, "plan", str(tmp_path), "--device", "H100-SXM", "--concurrency", "4",
                             "--slo-ttft", "1s", "--slo-tpot", "1s", "--max-gpus", "2", "--no-disaggregated",
                             "--num-requests", "8", "--prompt-len", "64", "--output-len", "8", "--json")
    assert code == 0, err
    data = json.loads(out)
    # 1 x tp1, 2 x tp1, 1 x tp2 tried; every one meets 1 s SLOs, the fewest GPUs is 1 x tp1
    assert data["tried"] == 3 and data["best"]["layout"] == "1 x tp1" and data["best"]["gpus"] == 1
    assert data["commands"][0] == f"vllm serve {tmp_path} --tensor-parallel-size 1"
    code, out, err = run_cli(capsys, "plan", str(tmp_path), "--device", "H100-SXM", "--slo-ttft", "1s",
                             "--slo-tpot", "1s")
    assert code == 2 and "give one of --rate (open loop) or --concurrency (closed loop)" in err


def test_plan_figures_equal_serve_for_each_layout(capsys, tmp_path):
    """plan counts the design once for every layout (`CountMemo`): each layout on its front gets
    the figures serve gives that layout counted on its own (tensor-parallel sizes 1 and 2,
    replicas, a disaggregated split), exactly."""
    import json

    from conftest import run_cli
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 4096}))
    common = ["--device", "H100-SXM", "--rate", "50", "--num-requests", "8", "--prompt-len", "64",
              "--output-len", "8"]
    rows = {}
    for tpot in ("1s", "1us"):             # 1 us: met by none, the three closest reported
        code, out, err = run_cli(capsys, "plan", str(tmp_path), *common, "--slo-ttft", "1s", "--slo-tpot", tpot,
                                 "--max-gpus", "3", "--json")
        assert code == 0, err
        plan = json.loads(out)
        rows.update({r["layout"]: r for r in plan["front"] + plan["nearest"] + [plan["best"]] if r})
    flags = {"1 x tp1": [], "2 x tp1": ["--replicas", "2"], "3 x tp1": ["--replicas", "3"], "1 x tp2": ["--tp", "2"],
             "1P+1D x tp1": ["--prefill-replicas", "1", "--decode-replicas", "1"],
             "1P+2D x tp1": ["--prefill-replicas", "1", "--decode-replicas", "2"],
             "2P+1D x tp1": ["--prefill-replicas", "2", "--decode-replicas", "1"]}
    assert set(rows) <= set(flags) and len(rows) >= 3
    for layout, row in rows.items():
        code, out, err = run_cli(capsys, "serve", str(tmp_path), *common, *flags[layout], "--json")
        assert code == 0, err
        summary = json.loads(out)["summary"]                # one run: its object
        assert (row["tokens_per_s_per_gpu"], row["ttft_s"], row["tpot_s"]) == \
            (summary["output_tokens_per_s_per_gpu"], summary["ttft_s"]["mean"], summary["tpot_s"]["mean"]), layout
