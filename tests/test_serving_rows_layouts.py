"""Silicon-sample rows with attention data parallelism or pipeline stages, as serve simulates them
(serving_rows' module docstring, layouts): the sample's tp_size is each attention rank's tensor
parallelism, the replica tp x attention_dp x pp GPUs, the experts spread whole over tp x attention_dp
of them; batch_size and the step budget are each rank's, serve's one scheduler gets A x both."""

import serving_rows as sr
import validate_serving as vs
from test_serving_rows import disagg, row, write

from dispatchprof import Quantized

#: NVIDIA's NVFP4 DeepSeek-R1: MLA's projections, the router, embeddings and LM head in bf16 (scripts/checkpoints.py)
DEEPSEEK_NVFP4 = Quantized("fp4", ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "mlp.gate",
                                   "embed_tokens", "lm_head"))

#: The sample's DeepSeek-R1 NVFP4 TensorRT-LLM row 974 on B200: 8 attention ranks of TP 1, experts over 8
R1_DP8 = dict(id="r1dp8", model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm", backend="trtllm",
              backend_version="1.2.0rc6.post3", gemm_quant_mode="nvfp4", isl="8192", osl="1024", batch_size="32",
              tp_size="1", pp_size="1", attention_dp_size="8", moe_tp_size="1", moe_ep_size="8",
              silicon_data_source="source_file=2026-03-25.csv; silicon_concurrency=256",
              silicon_ttft_ms="3316.047858460206", silicon_tpot_ms="29.673349439759345")
#: The sample's MiniMax-M2.5 vLLM row cfg735 on B300: 2 ranks of TP 2, experts over 4
MINIMAX_DP2 = dict(id="mmdp2", model_path="MiniMaxAI/MiniMax-M2.5", system="b300_sxm", backend="vllm",
                   backend_version="0.19.0", gemm_quant_mode="fp8", isl="1024", osl="1024", batch_size="256",
                   tp_size="2", pp_size="1", attention_dp_size="2", moe_tp_size="1", moe_ep_size="4",
                   silicon_data_source="db-dump/2026-04-27; config_id=735; silicon_concurrency=512")


def test_an_attention_data_parallel_row_as_serve_runs_it(tmp_path):
    rows, skipped = sr.aic_rows(write(tmp_path, [row(**R1_DP8), row(**MINIMAX_DP2)]))
    assert skipped == []
    r1, mm = rows
    # serve --tp 1 --ep 8 --dp-attention 8: 8 GPUs
    assert (r1.tp, r1.ep, r1.dp_attention, r1.pp, r1.model, r1.device) == (1, 8, 8, 1, "deepseek-r1", "B200")
    # 256 clients = 8 ranks x 32; the rule's per-rank budget ceil((32 + 8192 + 1500) / 32) x 32 = 9728, x 8 ranks
    assert (r1.concurrency, r1.max_seqs, r1.engine_figures) == (256, 256, {"max_batched_tokens": 77824})
    assert r1.setup_key == ("deepseek-r1", "B200", 1, DEEPSEEK_NVFP4, "fp8", "ep8", "dpa8")
    assert r1.layout == "experts over 8 GPUs (EP), attention data-parallel over 8 groups"
    assert r1.layout_kind == "attention-DP"
    # vLLM --tensor-parallel-size 2 --data-parallel-size 2 --enable-expert-parallel: serve --tp 2 --ep 4 --dp-attention 2
    assert (mm.tp, mm.ep, mm.dp_attention, mm.engine, mm.engine_version) == (2, 4, 2, "vllm", "0.14")
    # 2 ranks x 256; budget 2 x (256 + 1024 + 1500); graphs for every batch up to 512
    assert (mm.concurrency, mm.max_seqs) == (512, 512)
    assert mm.engine_figures == {"max_batched_tokens": 5560, "cuda_graph_sizes": tuple(range(1, 513))}


def test_a_pipeline_row_as_serve_runs_it(tmp_path):
    rows, skipped = sr.aic_rows(write(tmp_path, [row(id="pp", pp_size="2"),
                                                 row(**{**MINIMAX_DP2, "id": "both", "pp_size": "2"})]))
    assert skipped == []
    pp, both = rows
    assert (pp.tp, pp.ep, pp.dp_attention, pp.pp, pp.max_seqs) == (2, 1, 1, 2, 16)
    assert pp.setup_key == ("qwen3-32b", "H100-SXM", 2, "fp8", "fp8", "pp2")
    assert (pp.layout, pp.layout_kind) == ("tensor-parallel, 2 pipeline stages", "pp")
    assert (both.tp, both.ep, both.dp_attention, both.pp) == (2, 4, 2, 2)
    assert both.layout_kind == "pp + attention-DP"


def test_layouts_serve_does_not_simulate_keep_their_reason(tmp_path):
    dsr1 = {k: v for k, v in R1_DP8.items() if k != "id"}
    rows, skipped = sr.aic_rows(write(tmp_path, [
        row(id="hybrid", **{**dsr1, "attention_dp_size": "16", "moe_tp_size": "4", "moe_ep_size": "4"}),
        row(id="moetp", **{**dsr1, "attention_dp_size": "4", "moe_tp_size": "4", "moe_ep_size": "1"}),
        row(id="short", **{**dsr1, "attention_dp_size": "64", "moe_tp_size": "8", "moe_ep_size": "4"}),
        row(id="dense", attention_dp_size="2")]))
    assert rows == []
    assert [(s.id, s.reason) for s in skipped] == [
        ("hybrid", "experts tensor-parallel over moe_tp 4 beside attention data parallelism: serve spreads them whole "
                   "over the replica's tp x attention_dp GPUs (--ep)"),
        ("moetp", "experts tensor-parallel over moe_tp 4 beside attention data parallelism: serve spreads them whole "
                  "over the replica's tp x attention_dp GPUs (--ep)"),
        ("short", "experts over moe_tp 8 x moe_ep 4 GPUs, not the tp 1 x attention_dp 64 GPUs that run attention"),
        ("dense", "attention data parallelism of a dense model (serve spreads attention over groups beside EP)")]


def test_a_disaggregated_side_with_attention_data_parallelism(tmp_path):
    """DeepSeek-V3 under TensorRT-LLM on B200: prefill workers of 4 attention ranks (TP 1, experts over 4),
    decode workers of TP 8 with the experts over 8."""
    sides = dict(prefill_batch_size="2", prefill_num_workers="3", prefill_tp_size="1", prefill_pp_size="1",
                 prefill_attention_dp_size="4", prefill_moe_tp_size="1", prefill_moe_ep_size="4",
                 decode_batch_size="64", decode_num_workers="1", decode_tp_size="8", decode_pp_size="1",
                 decode_attention_dp_size="1", decode_moe_tp_size="1", decode_moe_ep_size="8")
    r = sr.aic_rows(write(tmp_path, [disagg(model_path="deepseek-ai/DeepSeek-V3", system="b200_sxm", backend="trtllm",
                                            backend_version="1.2.0", gemm_quant_mode="fp8", isl="1024", osl="1024",
                                            silicon_data_source="silicon_concurrency=64", **sides)]))[0][0]
    # prefill: 4 ranks x batch 2; budget 4 x ceil((1024 + 1500) / 32) x 32 = 4 x 2528
    assert r.disagg.prefill == sr.Side(3, 1, 8, {"max_batched_tokens": 10112}, 4, 4, 1)
    assert r.disagg.decode == sr.Side(1, 8, 64, {"max_batched_tokens": 64}, 8, 1, 1)
    assert r.disagg.kv_link == "ib-xdr"                           # 3 x 4 + 8 = 20 GPUs: more than a node's 8
    assert r.layout_kind == "disagg attention-DP / tp/ep"
    prefill, decode = r.side_rows()
    assert prefill.setup_key == ("deepseek-v3", "B200", 1, "fp8", "fp8", "ep4", "dpa4")
    assert decode.setup_key == ("deepseek-v3", "B200", 8, "fp8", "fp8", "ep8")


def test_counted_setup_lays_the_replica_out_as_the_row(tmp_path, monkeypatch):
    seen = {}

    def prepare(model, device, **kw):
        seen.update(kw, model=model, device=device)
        return "setup"

    monkeypatch.setattr(vs, "prepare_serving", prepare)
    r1 = sr.aic_rows(write(tmp_path, [row(**R1_DP8)]))[0][0]
    assert vs.counted_setup(r1, None) == "setup"
    assert (seen["model"], seen["tp"], seen["ep"], seen["dp_attention"], seen["pp"]) == ("deepseek-r1", 1, 8, 8, 1)


def test_the_layout_report_by_hand(tmp_path, monkeypatch):
    """serving_moe_rows_report --by-layout: the attention-DP rows, their medians and AIConfigurator's beside,
    and the unexpressed rows of the kind counted by reason."""
    import serving_moe_rows_report as report
    dsr1 = {k: v for k, v in R1_DP8.items() if k != "id"}
    ids = [i for i in (f"dp{k}" for k in range(40)) if sr.split_of(i) == "held-out"][:2]
    sample = write(tmp_path, [row(id=ids[0], **dsr1), row(id=ids[1], **dsr1), row(id="plain"),
                              row(id="hybrid", **{**dsr1, "attention_dp_size": "16", "moe_tp_size": "4",
                                                  "moe_ep_size": "4"})])
    errors = tmp_path / "e.csv"
    errors.write_text("id,split,engine,device,model,tp,weights,isl,osl,concurrency,metric,measured,dispatchprof,"
                      "aiconfigurator\n"
                      f"{ids[0]},held-out,trtllm,B200,deepseek-r1,1,fp4,8192,1024,256,ttft_mean,3316,3648,2653\n"
                      f"{ids[0]},held-out,trtllm,B200,deepseek-r1,1,fp4,8192,1024,256,tpot_mean,29.67,44.5,29.67\n"
                      f"{ids[1]},held-out,trtllm,B200,deepseek-r1,1,fp4,8192,1024,256,ttft_mean,3316,2653,\n"
                      f"{ids[1]},held-out,trtllm,B200,deepseek-r1,1,fp4,8192,1024,256,tpot_mean,29.67,35.6,\n")
    monkeypatch.setattr(report, "OUT_LAYOUT_CSV", str(tmp_path / "p.csv"))
    monkeypatch.setattr(report, "OUT_LAYOUT_TABLE", str(tmp_path / "t.txt"))
    assert report.main(["--by-layout", sample, str(errors)]) == 0
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0].split(",")[5:10] == ["tp", "ep", "dp_attention", "pp", "layout_kind"]
    assert [ln.split(",")[5:10] for ln in lines[1:]] == [["1", "8", "8", "1", "attention-DP"]] * 2
    table = (tmp_path / "t.txt").read_text().splitlines()
    held = table[1].split()
    # 3 attention-DP rows in the sample, 2 expressed and predicted; TTFT +10%, -20% -> |median| 15.0%, signed -5.0%;
    # TPOT 44.5 / 29.67 = +50.0%, 35.6 / 29.67 = +20.0% -> 35.0%; both: the first row, AIConfigurator TTFT -20%, TPOT 0
    assert held[:12] == ["attention-DP", "held-out", "3", "2", "2", "15.0%", "-5.0%", "35.0%", "+35.0%", "1",
                         "10.0%", "/"]
    assert held[12:] == ["20.0%", "50.0%", "/", "0.0%"]
    assert table[-1].split(":")[0].split() == ["1", "attention-DP"]
