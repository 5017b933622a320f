"""docs/deploy.md's figures agree with the outputs they quote (scripts/data/, each file's first line
the command that wrote the rest) and with what is recomputed here from the catalog's configs:

- `plan llama-3.1-70b` (plan_llama_3_1_70b.txt): the layouts simulated, the pick, its TTFT and TPOT,
  CPU and wall time;
- the silicon sample's DeepSeek and gpt-oss rows (count_moe_serving_rows.py -> moe_serving_rows.txt);
- DeepSeek-V3's weights on one GPU of ep 8 / dp-attention 8 (its parameters on the meta device), the
  H200's memory under SGLang's preset, its MLA KV bytes per token, Qwen3-235B's expert reach;
- the links table against `dispatchprof.sim.links.LINKS`."""

from __future__ import annotations

import csv
import re
import warnings

import pytest
import torch

from dispatchprof.cli.plan_command import parser as plan_parser
from dispatchprof.llm.catalog import load_config
from dispatchprof.serving.engines import engine_preset
from dispatchprof.sim import links
from dispatchprof.sim.catalog import load_device
from tests.accuracy_docs import DATA, ROOT, doc_section, table_rows

DOC = "docs/deploy.md"


def _text() -> str:
    return " ".join((ROOT / DOC).read_text().split())


def _output(name: str) -> tuple[str, str]:
    """(command, output) of scripts/data/NAME."""
    command, output = (DATA / name).read_text().split("\n", 1)
    assert command.startswith("$ "), f"{name}'s first line is its command"
    return command[2:], output


def test_plan_figures_are_the_plans():
    command, out = _output("plan_llama_3_1_70b.txt")
    layouts = int(re.search(r"^(\d+) layouts of llama-3.1-70b on H100-SXM simulated", out, re.M).group(1))
    pick = re.search(r"meeting TTFT <= 500 ms and TPOT <= 50 ms: (\d+) x tp(\d+) ", out).groups()
    (row,) = [l.split() for l in out.splitlines() if l.startswith(f"{pick[0]} x tp{pick[1]} ")]
    ttft, tpot = row[6], row[7]                      # layout is three fields: "1 x tp8"
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", out).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", out).group(1))
    minutes, seconds = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):([\d.]+)", out).groups()
    text = _text()
    assert plan_parser().parse_args(command.split()[2:]).num_requests == 200     # "(200 requests; ..."
    assert f"`plan {command.removeprefix('dispatchprof plan ')}`" in text
    assert (f"(200 requests; {layouts} layouts simulated, the others left out as not servable) takes "
            f"{user + system:.0f} s of CPU time ({user:.1f} s user + {system:.1f} s system, one process)") in text
    assert f"that was {int(minutes)} min {float(seconds):.0f} s of wall time" in text
    assert f"It picks {pick[0]} x tp {pick[1]} (TTFT {ttft} ms, TPOT {tpot} ms;" in text


def test_silicon_moe_rows_are_the_counts():
    _, out = _output("moe_serving_rows.txt")
    total = int(re.search(r"^rows (\d+)$", out, re.M).group(1))
    models = {m: int(n) for m, n in re.findall(r"^model (\S+) (\d+)$", out, re.M)}
    devices = [d for d, _ in re.findall(r"^device (\S+) (\d+)$", out, re.M)]
    assert sum(models.values()) == total
    deepseek = models["deepseek-r1"] + models["deepseek-v3"]
    assert (f": {total} rows, {deepseek} DeepSeek and {models['gpt-oss-120b']} gpt-oss; "
            f"{', '.join(d.removesuffix('-SXM') for d in sorted(devices, key=_by_rows(out)))};") in _text()


def _by_rows(out: str):
    counts = {d: int(n) for d, n in re.findall(r"^device (\S+) (\d+)$", out, re.M)}
    return lambda d: -counts[d]


def test_deepseek_v3_weights_on_one_gpu_of_ep8_dp8():
    """The refusal's bound: every parameter of transformers' DeepSeek-V3 (built on meta) at 2 bytes,
    1,342.05 GB, spread evenly over the replica's 8 GPUs is 167.76 GB each, above H200's 141 GB."""
    import transformers as tf
    config = load_config("deepseek-v3")
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = tf.AutoModelForCausalLM.from_config(config)
    gb = 2 * sum(p.numel() for p in model.parameters()) / 1e9
    device = load_device("H200")
    assert (f"the weights ({gb:.2f} GB) need at least {gb / 8:.2f} GB on each of the replica's 8 GPU(s), more "
            f"than H200's {device.memory_capacity_gb:.2f} GB") in " ".join(_text().split())
    assert gb / 8 > device.memory_capacity_gb                          # the refusal is due


def test_mla_kv_bytes_per_token():
    c = load_config("deepseek-v3")
    n = c.num_hidden_layers * (c.kv_lora_rank + c.qk_rope_head_dim) * 2
    assert (f"DeepSeek-V3: {c.num_hidden_layers} x ({c.kv_lora_rank} + {c.qk_rope_head_dim}) x 2 = {n:,} "
            "bytes per token in bf16") in _text()


@pytest.mark.parametrize("doc, sentence", [
    ("docs/deploy.md", "16 sequences through Qwen3-235B, {k} of {e} each, reach {reach}% of the experts"),
    ("docs/serving.md", "16 decoding sequences through Qwen3-235B, {k} of {e} experts each, reach {reach}% of them"),
])
def test_qwen3_235b_expert_reach(doc, sentence):
    c = load_config("qwen3-235b-a22b")
    k, e = c.num_experts_per_tok, c.num_experts
    reach = 1 - (1 - k / e) ** 16                   # 1 - (120/128)^16 = 0.644
    assert sentence.format(k=k, e=e, reach=f"{100 * reach:.0f}") in " ".join((ROOT / doc).read_text().split())


def test_links_table_is_links():
    rows = table_rows(doc_section(DOC, "Links"))
    assert {name: (float(gb), float(lat.removesuffix(" us"))) for name, gb, lat in rows} == links.LINKS
    assert links.BUS_EFFICIENCY == 0.8 and "used at 0.8 of their value" in _text()
    assert (links.SCALE_OUT_GB_PER_S, links.GPUS_PER_NODE) == (50.0, 8)
    assert "the scale-out link (50 GB/s per GPU x 0.8) across nodes" in _text() and "a node of 8 GPUs" in _text()


def test_disaggregated_row_counts():
    _, out = _output("moe_serving_rows.txt")
    total = int(re.search(r"^disaggregated rows (\d+)$", out, re.M).group(1))
    unnamed = int(re.search(r"^disaggregated rows naming no client count (\d+)$", out, re.M).group(1))
    unnamed_by = dict(re.findall(r"^  of (\S+) (\d+)$", out, re.M))
    named, follow = map(int, re.search(r"naming a client count and a decode batch (\d+), clients = decode workers "
                                       r"x decode batch x attention-DP (\d+)", out).groups())
    expressed = int(re.search(r"^disaggregated rows expressed (\d+)$", out, re.M).group(1))
    kinds = {tuple(l.split()[:5]): int(l.split()[5]) for l in out.splitlines()
             if re.match(r"^  (sglang|vllm|trtllm) ", l)}
    assert sum(kinds.values()) == expressed
    h100 = {(e, v): n for (e, v, d, m, w), n in kinds.items() if d == "H100-SXM"}
    sglang = sum(n for (e, v), n in h100.items() if e == "sglang" and v.startswith("0.5.6"))
    vllm = sum(n for (e, v), n in h100.items() if e == "vllm" and v.startswith("0.12"))
    assert sglang + vllm == sum(h100.values())
    assert all(v.startswith("1.3") for (e, v, d, m, w) in kinds if e == "trtllm")
    text = _text()
    assert (f"Of its {total:,} disaggregated rows, {expressed} are of dense models: Qwen3-32B FP8 on two 8-GPU "
            f"H100 nodes ({sglang} under SGLang 0.5.6, {vllm} under vLLM 0.12;") in text
    assert int(unnamed_by["Qwen/Qwen3-235B-A22B-FP8"]) == 2 and sum(h100.values()) == int(unnamed_by["Qwen/Qwen3-32B"])
    assert f"(with two Qwen3-235B rows, the only {unnamed} of the {total:,})" in text
    assert named == follow and f"which every one of the {named} rows naming a count and a decode batch follows" in text


def test_disaggregated_h100_and_nvfp4_figures():
    rows = list(csv.DictReader(open(DATA / "serving_disagg_predictions.csv", newline="")))

    def col(device, metric, column, engine=None):
        return [float(r[column]) for r in rows if r["device"] == device and r["metric"] == metric
                and (engine is None or r["engine"] == engine)]

    text = _text()
    h100 = [r for r in rows if r["device"] == "H100-SXM"]
    clients = [int(r["concurrency"]) for r in h100]
    ttft_p, ttft_m = col("H100-SXM", "ttft_mean", "dispatchprof"), col("H100-SXM", "ttft_mean", "measured")
    tpot_p, tpot_m = col("H100-SXM", "tpot_mean", "dispatchprof"), col("H100-SXM", "tpot_mean", "measured")
    assert (f"the predictions at {min(clients)} to {max(clients)} clients miss both ways (TTFT "
            f"{min(ttft_p) / 1e3:.1f} to {max(ttft_p) / 1e3:.0f} s against {min(ttft_m) / 1e3:.2f} to "
            f"{max(ttft_m) / 1e3:.0f} s measured, TPOT {min(tpot_p):.0f} to {max(tpot_p):.0f} ms against "
            f"{min(tpot_m):.1f} to {max(tpot_m):.0f} ms)") in text
    (vllm_tpot,), (vllm_ttft,) = col("H100-SXM", "tpot_mean", "measured", "vllm"), col("H100-SXM", "ttft_mean",
                                                                                        "measured", "vllm")
    assert f"measured TPOT {vllm_tpot:.2f} ms and TTFT {vllm_ttft:.0f} ms" in text
    (b200_p,), (b200_m,) = col("B200", "ttft_mean", "dispatchprof"), col("B200", "ttft_mean", "measured")
    gb200_p, gb200_m = set(col("GB200", "ttft_mean", "dispatchprof")), sorted(col("GB200", "ttft_mean", "measured"))
    (gb200_p,) = gb200_p
    assert b200_p < b200_m and gb200_p > max(gb200_m)
    assert (f"on B200 ({b200_p:,.0f} ms against {b200_m:,.0f} ms measured) and long on GB200 ({gb200_p:,.0f} ms "
            f"against {gb200_m[0]:.0f} and {gb200_m[1]:.0f} ms)") in text
    tpot_p = [col(d, "tpot_mean", "dispatchprof")[0] for d in ("B200", "GB200")]
    tpot_m = [col(d, "tpot_mean", "measured")[0] for d in ("B200", "GB200")]
    assert (f"Their TPOT is {tpot_p[0]:.1f} ms against {tpot_m[0]:.1f} on B200 and {tpot_p[1]:.1f} against "
            f"{tpot_m[1]:.1f} on GB200") in text


def test_kv_read_and_mla_prefill_arithmetic():
    text = _text()
    # 57 GB of cache a step at the H100's 3.35 TB/s
    h100 = load_device("H100-SXM")
    assert f"about 57 GB of cache a step, at least {57e9 / (h100.memory_bandwidth_gb_per_s * 1e9) * 1e3:.0f} ms at " \
           f"the H100's {h100.memory_bandwidth_gb_per_s / 1e3:.2f} TB/s" in text
    # absorbed prefill: heads x context x (576 + 512) MACs per query-key pair; vLLM's MHA form heads x (192 + 128)
    assert f"against (576 + 512) in the absorbed form ({(576 + 512) / (192 + 128):.1f}x)" in text


def test_deepseek_and_kimi_layer_figures():
    """DeepSeek-V3's and Kimi-K2's configs behind the "identical after a prefix" figures."""
    ds, kimi = load_config("deepseek-v3"), load_config("kimi-k2")
    k, layers = ds.first_k_dense_replace, ds.num_hidden_layers
    text = _text()
    assert (f"DeepSeek-V3/R1's {k} dense layers before {layers - k} MoE layers, Kimi-K2's "
            f"{kimi.first_k_dense_replace})") in text
    assert f"Its step chains are counted with {k + 2} and {k + 3} layers" in text
    assert f"at full depth ({layers} layers, {ds.n_routed_experts} experts)" in text
    assert f"a single DeepSeek-style decode sequence reads {ds.num_experts_per_tok} of {ds.n_routed_experts} experts" \
        in text


def test_deepseek_v3_serve_refusal_is_the_runs():
    command, out = _output("serve_deepseek_v3_h200.txt")
    weights, per_gpu, gpus, capacity = re.search(
        r"^dispatchprof: error: the weights \(([\d.]+) GB\) need at least ([\d.]+) GB on each of the replica's "
        r"(\d+) GPU\(s\), more than H200's ([\d.]+) GB", out, re.M).groups()
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", out).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", out).group(1))
    assert "Exit status: 2" in out
    assert float(weights) / int(gpus) == pytest.approx(float(per_gpu), abs=0.006) and float(per_gpu) > float(capacity)
    text = _text()
    flat = " ".join(command.removeprefix("dispatchprof ").split())
    assert f"the full-size `{flat}` (bf16 weights) stops after {user + system:.0f} s of CPU time ({user:.1f} s user + " \
        f"{system:.1f} s system" in " ".join(text.split())
    assert (f"the weights ({weights} GB) need at least {per_gpu} GB on each of the replica's {gpus} GPU(s), more "
            f"than H200's {capacity} GB") in " ".join(text.split())