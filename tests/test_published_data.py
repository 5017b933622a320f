"""The published-measurement table of scripts/validate_published.py keeps its own rules
(scripts/data/README.md): a fixed fit / held-out split, a source for every row, known measures."""

import csv
import os

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "data",
                    "published_gpu.csv")
MEASURES = {"tpot", "e2e_per_token", "ttft", "throughput", "energy_per_token"}


def _rows() -> list[dict]:
    with open(DATA, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_split_is_every_third_row_of_each_hardware_runtime_group_in_id_order():
    groups: dict = {}
    for r in sorted(_rows(), key=lambda r: r["id"]):
        groups.setdefault((r["hardware"], r["runtime"]), []).append(r)
    for rows in groups.values():
        for i, r in enumerate(rows):
            assert r["split"] == ("fit" if i % 3 == 0 else "held-out"), r["id"]


def test_every_row_has_a_unique_id_a_source_and_a_known_measure():
    rows = _rows()
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source_url"].startswith("https://") and r["source_detail"], r["id"]
        assert r["measure"] in MEASURES, r["id"]
        assert float(r["value"]) > 0 and int(r["batch"]) >= 1 and int(r["tp"]) >= 1, r["id"]


def test_first_token_rows_of_tensorrt_llm_v0_9_are_copied_as_published():
    rows = {r["id"]: r for r in _rows()}
    h100_7b = rows["trtllm09-13"]          # "| LLaMA 7B | 1 | 1 | 128 | 6.3 |" in the H100 (FP8) table
    assert (h100_7b["model"], h100_7b["hardware"], h100_7b["tp"], h100_7b["prompt_len"]) == \
        ("llama-2-7b", "H100-SXM", "1", "128")
    assert (float(h100_7b["value"]), h100_7b["unit"], h100_7b["kv_dtype"]) == (0.0063, "s", "fp8")
    l40s_70b = rows["trtllm09-24"]         # "| LLaMA 70B | 1 | 4 | 2048 | 673.3 |" in the L40S (FP8) table
    assert (l40s_70b["tp"], float(l40s_70b["value"])) == ("4", 0.6733)
    assert sum(r["id"].startswith("trtllm09-") for r in rows.values()) == 32


def test_energy_rows_of_ml_energy_v3_are_copied_as_published():
    rows = {r["id"]: r for r in _rows()}
    h100_8b = rows["vllm-mlenergy-12"]     # configurations[gpu_model=H100, max_num_seqs=128] of the 8B file
    assert (h100_8b["model"], h100_8b["hardware"], h100_8b["tp"], h100_8b["batch"], h100_8b["output_len"]) == \
        ("llama-3.1-8b", "H100-SXM", "1", "128", "405")        # avg_output_len 404.59
    assert (float(h100_8b["value"]), h100_8b["measure"]) == (0.09511, "energy_per_token")  # 0.09510991...
    b200_70b = rows["vllm-mlenergy-23"]    # configurations[gpu_model=B200, max_num_seqs=2048] of the 70B file
    assert (b200_70b["tp"], b200_70b["batch"], float(b200_70b["value"])) == ("2", "2048", 0.18867)
    new = [r for r in rows.values() if r["id"].startswith("vllm-mlenergy-")]
    energy = [r for r in new if int(r["id"][-2:]) <= 31]
    assert len(energy) == 31 and {r["measure"] for r in energy} == {"energy_per_token"}
    b200_8b = rows["vllm-mlenergy-36"]     # configurations[gpu_model=B200, max_num_seqs=256] of the 8B file
    assert (b200_8b["measure"], float(b200_8b["value"]), b200_8b["output_len"]) == ("throughput", 7664.1, "399")
    throughput = [r for r in new if int(r["id"][-2:]) > 31]
    assert len(throughput) == 17 and {(r["hardware"], r["measure"]) for r in throughput} == {("B200", "throughput")}
