"""The shipped reference data (gpudoctor/data/hardware.toml and references.toml) holds together: both parse, every
GPU model is matched exactly and cites its datasheet, and every published figure is complete, dated, names a
model the hardware table has and states its conditions only in the words gpudoctor reads."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from gpudoctor.judging.hardware import gpu_model, hardware, load_data, normal_name

ALGOS = {"nvls", "ring", "tree", "nvls_tree", "collnet"}
LINKS = {"pcie3", "pcie4", "pcie5", "c2c", "nvlink", "ib", "roce", "efa", "tcpxo", "mnnvl"}
FIGURES = {
    "allreduce_busbw",
    "allgather_busbw",
    "reducescatter_busbw",
    "alltoall_busbw",
    "nic_busbw_per_400g",
    "nic_busbw_one_gpu_per_node",
    "h2d_gbps",
    "d2h_gbps",
    "p2p_gbps",
    "hbm_gbps",
    "matmul_bf16_tflops",
    "matmul_bf16_tflops_sustained",
    "matmul_fp16_tflops",
    "matmul_tf32_tflops",
    "matmul_fp32_tflops",
}
# Datasheet figures a model may carry, and the keys that say what it is or where it came from.
FIGURE_KEYS = {
    "compute_capability",
    "sms",
    "memory_gb",
    "hbm_gbps",
    "bf16_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "nvlink_gen",
    "nvlink_links",
    "nvlink_link_gbps",
    "pcie_gen",
    "pcie_width",
    "c2c_gbps",
    "resnet50_amp_1gpu",
    "resnet50_amp_8gpu",
}
ENTRY_KEYS = {"model", "pci_ids", "names", "source"} | FIGURE_KEYS


def gpus() -> list[dict[str, Any]]:
    return hardware()["gpu"]


def references() -> list[dict[str, Any]]:
    return load_data("references.toml")["reference"]


def test_both_files_parse_into_their_tables() -> None:
    assert len(gpus()) > 40 and {"pcie_x16_gbps", "nvlink_link_gbps", "efficiency"} <= set(hardware())
    assert len(references()) > 250


def test_every_model_is_matched_exactly_and_cites_a_source() -> None:
    for gpu in gpus():
        assert set(gpu) <= ENTRY_KEYS, (gpu["model"], set(gpu) - ENTRY_KEYS)
        assert gpu["pci_ids"] or gpu["names"], gpu["model"]
        assert gpu["names"], f"{gpu['model']}: checks/benchmarks.py names a model by its first NVML name"
        assert str(gpu.get("source", "")).strip(), gpu["model"]
        assert all(0 < pci_id <= 0xFFFF for pci_id in gpu["pci_ids"]), gpu["model"]
        assert all(not name.lower().startswith("nvidia ") for name in gpu["names"]), gpu["model"]


def test_no_two_models_share_a_model_name_pci_id_or_nvml_name() -> None:
    for keys in (
        [g["model"] for g in gpus()],
        [pci_id for g in gpus() for pci_id in g["pci_ids"]],
        [normal_name(name) for g in gpus() for name in g["names"]],
    ):
        assert [key for key, count in Counter(keys).items() if count > 1] == []


def test_datasheet_figures_are_positive_numbers_and_the_capability_a_version() -> None:
    for gpu in gpus():
        assert re.fullmatch(r"\d+\.\d", gpu["compute_capability"]), gpu["model"]
        for key in FIGURE_KEYS - {"compute_capability"}:
            if key in gpu:
                assert isinstance(gpu[key], int | float) and gpu[key] > 0, (gpu["model"], key)
        if "nvlink_links" in gpu:
            assert "nvlink_gen" in gpu, gpu["model"]


@pytest.mark.parametrize(
    ("name", "pci_device_id", "model"),
    [
        ("NVIDIA B300 SXM6 AC", 0x318210DE, "B300"),
        ("NVIDIA H20-3e", 0x232C10DE, "H20 HBM3e"),
        ("NVIDIA H800 PCIe", 0x232210DE, "H800 PCIe"),
        ("NVIDIA A800 80GB PCIe", 0x20F510DE, "A800 PCIe 80GB"),
        ("NVIDIA L20", 0x26BA10DE, "L20"),
        ("NVIDIA RTX 4000 Ada Generation", 0x27B210DE, "RTX 4000 Ada Generation"),
        ("Tesla V100S-PCIE-32GB", 0x1DF610DE, "V100S PCIe 32GB"),
        ("NVIDIA A2", 0x25B610DE, "A2"),
        ("NVIDIA A16", 0x25B610DE, "A16"),
        ("NVIDIA GB300", 0x31A110DE, "GB300"),
    ],
)
def test_a_gpu_is_found_by_its_pci_id_else_its_name(name: str, pci_device_id: int, model: str) -> None:
    assert gpu_model({"name": name, "pci_device_id": pci_device_id})["model"] == model


def test_every_reference_row_is_complete_and_dated() -> None:
    for i, row in enumerate(references()):
        said = f"row {i}: {row.get('gpu')} {row.get('figure')}"
        assert row.get("figure") in FIGURES, said
        assert isinstance(row.get("value"), int | float) and row["value"] > 0, said
        assert row.get("unit") == ("TFLOPS" if row["figure"].startswith("matmul_") else "GB/s"), said
        assert str(row.get("source", "")).strip() and str(row.get("conditions", "")).strip(), said
        assert re.fullmatch(r"(19|20)\d\d-(0[1-9]|1[0-2])", str(row.get("date"))), said


def test_every_reference_model_is_a_hardware_model_with_the_rows_pci_id() -> None:
    models = {g["model"]: g for g in gpus()}
    named = [row for row in references() if "model" in row]
    assert len(named) > 200
    for row in named:
        assert row["model"] in models, row["model"]
        if "pci_id" in row:
            assert int(row["pci_id"], 16) in models[row["model"]]["pci_ids"], (row["gpu"], row["model"])


def test_conditions_use_only_the_words_the_judges_read() -> None:
    for i, row in enumerate(references()):
        said = f"row {i}: {row['gpu']} {row['figure']}"
        assert row.get("algo", "ring") in ALGOS, said
        assert row.get("link", "ib") in LINKS, said
        assert "algo" not in row or row["figure"].endswith("_busbw"), said
        for key in ("bytes", "nics", "nic_gbits", "gpus", "nodes"):
            assert isinstance(row.get(key, 1), int) and row.get(key, 1) >= 0, (said, key)
        assert isinstance(row.get("mesh", True), bool) and isinstance(row.get("healthy", True), bool), said


def test_the_measurements_the_brief_asked_for_are_there() -> None:
    """Host copies over NVLink-C2C, NVL72 all-reduce over multi-node NVLink, and 8x B200 all-reduce on one node."""
    rows = references()
    c2c = {(r["model"], r["figure"]) for r in rows if r.get("link") == "c2c"}
    assert {("GH200 96GB HBM3", "h2d_gbps"), ("GH200 96GB HBM3", "d2h_gbps"), ("GB300", "d2h_gbps")} <= c2c
    nvl72 = [r["value"] for r in rows if r.get("link") == "mnnvl" and r.get("model") == "GB200"]
    assert nvl72 and all(800 < v < 900 for v in nvl72)
    b200 = [r["value"] for r in rows if r.get("model") == "B200" and r.get("gpus") == 8 and r.get("algo") == "nvls"]
    assert max(b200) > 840
