"""Every figure against a published healthy one (gpudoctor/judging/references.py, data/references.toml): the one rule,
the choice of the published figure, the audit's false alarms and misses (issue 30) fixed, and the NICs NCCL
would use between nodes."""

from __future__ import annotations

import pytest

from gpudoctor.checks import cluster
from gpudoctor.cluster.node import network
from gpudoctor.judging import copies, expect, nics, references, routes
from gpudoctor.judging.hardware import gpu_model, hardware
from gpudoctor.model import Status


def test_one_rule_pass_warn_fail_around_the_healthy_figure() -> None:
    healthy = expect.Expectation(480.0, "8x H100 SXM, NVLS: nccl-tests issue 212, 2024-05")
    for value, status in ((480, Status.PASS), (408.0, Status.PASS), (407.9, Status.WARN), (360, Status.WARN)):
        assert expect.verdict("busbw", value, "GB/s", healthy, 0.75)[0] == status, value
    status, metric = expect.verdict("busbw", 359.9, "GB/s", healthy, 0.75)
    assert status == Status.FAIL
    assert (metric.expected, metric.comparison, metric.reference) == (408.0, ">=", 480.0)
    assert metric.reference_source == healthy.source and "fail < 360" in metric.expected_source


def test_a_baseline_has_one_line_and_a_floor_above_pass_at_lifts_the_pass_line() -> None:
    baseline = expect.Expectation(100.0, "baseline saved.json", floor=0.9)
    assert expect.verdict("copy", 90.0, "GB/s", baseline, 0.75)[0] == Status.PASS
    assert expect.verdict("copy", 89.9, "GB/s", baseline, 0.75)[0] == Status.FAIL
    assert references.lines(100.0, 0.9) == (90.0, 90.0)


def test_a_figure_far_above_the_datasheet_is_a_measurement_error_and_says_its_ceiling() -> None:
    peak = expect.Peak(165.2, "GeForce RTX 4090 datasheet")
    assert not expect.measurement_error(178.8, peak)  # a factory-overclocked card, published
    status, metric = expect.verdict("bf16", 400.0, "TFLOP/s", None, 0.75, peak)
    assert status == Status.FAIL and metric.comparison == "<=" and metric.expected == round(165.2 * 1.25, 4)


def test_no_published_healthy_figure_comes_near_the_measurement_error_margin() -> None:
    """Every published measurement sits below PEAK_MARGIN x its model's datasheet figure: a healthy GPU is never
    called a timing error."""
    models = {m["model"]: m for m in hardware()["gpu"]}
    for row in references.rows():
        key = references.DATASHEET.get(row["figure"])
        model = models.get(row.get("model", ""))
        if key and model and model.get(key) and references.kind_of(row) in references.KINDS:
            assert row["value"] < model[key] * expect.PEAK_MARGIN, (row["model"], row["figure"], row["value"])


def test_the_published_figure_is_chosen_by_conditions_then_kind_then_median() -> None:
    rows = [
        {"figure": "f", "model": "M", "value": 10.0, "gpus": 8, "algo": "ring", "source": "a", "date": "2024-01"},
        {"figure": "f", "model": "M", "value": 14.0, "gpus": 8, "algo": "nvls", "source": "b", "date": "2024-01"},
        {"figure": "f", "model": "M", "value": 11.0, "gpus": 8, "algo": "ring", "source": "c", "date": "2024-02"},
        {"figure": "f", "model": "M", "value": 12.0, "gpus": 8, "algo": "ring", "source": "d", "date": "2024-03"},
        {"figure": "f", "model": "M", "value": 99.0, "gpus": 8, "algo": "ring", "kind": "community", "source": "e"},
        {"figure": "f", "model": "M", "value": 9.0, "gpus": 8, "algo": "ring", "kind": "threshold", "source": "g"},
        {"figure": "f", "model": "M", "value": 5.0, "gpus": 2, "source": "h"},
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(references, "rows", lambda: rows)
        ring = references.healthy("f", "M", gpus=8, algo="ring")
        assert (ring.value, ring.source) == (11.0, "c") and references.states(ring, "gpus", "algo")
        assert references.healthy("f", "M", gpus=8, algo="nvls").value == 14.0
        assert references.healthy("f", "M", gpus=2).value == 5.0
        assert references.healthy("f", "M", gpus=4) is None
        assert references.healthy("f", "other") is None


def test_nccl_ib_hca_is_read_as_nccl_reads_it() -> None:
    port = {"device": "mlx5_10", "port": 1}
    assert nics.hca_selected(port, None) and nics.hca_selected(port, "mlx5")
    assert not nics.hca_selected(port, "=mlx5_1") and nics.hca_selected(port, "=mlx5_10")
    assert not nics.hca_selected(port, "^mlx5_1") and nics.hca_selected(port, "^mlx5_2")
    assert nics.hca_selected(port, "mlx5_10:1") and not nics.hca_selected(port, "mlx5_10:2")


def dgx_ports() -> list[dict]:
    """A DGX-style node: eight 400G InfiniBand ports beside the GPUs, two 200G Ethernet ports (storage and
    front-end) on the same sockets, and one port down."""
    ports = [
        {
            "device": f"mlx5_{i}",
            "port": 1,
            "state": "4: ACTIVE",
            "rate": "400 Gb/sec (4X NDR)",
            "link_layer": "InfiniBand",
            "numa_node": i // 4,
        }
        for i in range(8)
    ]
    ports += [
        {
            "device": f"mlx5_{i}",
            "port": 1,
            "state": "4: ACTIVE",
            "rate": "200 Gb/sec (2X NDR)",
            "link_layer": "Ethernet",
            "numa_node": 0,
        }
        for i in (8, 9)
    ]
    ports.append(
        {
            "device": "mlx5_10",
            "port": 1,
            "state": "1: DOWN",
            "rate": "400 Gb/sec (4X NDR)",
            "link_layer": "InfiniBand",
            "numa_node": 1,
        }
    )
    return ports


def test_only_the_nics_nccl_uses_count_between_nodes() -> None:
    used, left = nics.nccl_nics(dgx_ports(), {0, 1}, {})
    assert [p["device"] for p in used] == [f"mlx5_{i}" for i in range(8)]
    assert any("mlx5_8:1 Ethernet beside InfiniBand" in why for why in left)
    assert any("mlx5_10:1 not active" in why for why in left)
    used, left = nics.nccl_nics(dgx_ports(), {0, 1}, {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"})
    assert [p["device"] for p in used] == ["mlx5_0", "mlx5_1"]


def node_summary(
    name: str, ports: list[dict], domain: str | None = None, model_name: str = "NVIDIA H100 80GB HBM3", gpus: int = 8
) -> dict:
    fabric = {"state": "completed", "cluster_uuid": domain, "clique_id": 1 if domain else None}
    facts = {
        "nvml": {"gpus": [{"index": i, "name": model_name, "fabric": fabric} for i in range(gpus)]},
        "system": {"infiniband": ports, "gpu_numa_nodes": {str(i): i // 4 for i in range(gpus)}, "env": {}},
    }
    return {"name": name, "network": network(facts)}


def test_storage_and_front_end_nics_do_not_raise_the_cross_node_pass_line() -> None:
    """The audit: summing every active RDMA port raised the pass line to ~360 GB/s against a published healthy
    362-366 on DGX-style nodes. Eight 400G NICs at the published per-NIC figure: healthy ~388, pass ~330."""
    nodes = [node_summary("a", dgx_ports()), node_summary("b", dgx_ports())]
    expected = cluster.network_expectation(nodes)
    per_nic = references.per_nic()
    assert expected.value == pytest.approx(8 * per_nic.value)
    assert "8 NICs NCCL uses, 3200 Gb/s" in expected.source and "Ethernet beside InfiniBand" in expected.source
    assert expected.lines(0.75)[0] < 362


def bus(i: int) -> str:
    return f"00000000:{0x10 + i:02X}:00.0"


def mesh(name: str, count: int, links_per_peer: int, version: int) -> list[dict]:
    """GPUs joined directly to each other by NVLink (no NVSwitch): HGX A100 4-GPU, H100 NVL 4-way."""
    return [
        {
            "index": i,
            "name": name,
            "pci_bus_id": bus(i),
            "pcie": {"max_gen": 4, "max_width": 16},
            "nvlinks": [
                {"active": True, "version": version, "remote_type": "gpu", "remote_pci_bus_id": bus(j)}
                for j in range(count)
                if j != i
                for _ in range(links_per_peer)
            ],
        }
        for i in range(count)
    ]


def test_a_direct_nvlink_mesh_expects_every_link_not_one_hop() -> None:
    """The audit: HGX-4 A100 passed at 58.5 GB/s (one ring hop's four links) against ~230 healthy. NCCL's rings
    use all twelve links of each GPU."""
    expected = routes.allreduce_expectation(mesh("NVIDIA A100-SXM4-80GB", 4, 4, 3), {})
    assert expected.value > 200 and expected.source.startswith("NVLink 300 GB/s per GPU")
    assert expect.verdict("busbw", 58.5, "GB/s", expected, 0.75)[0] == Status.FAIL


def test_grace_host_copies_are_judged_over_c2c_not_pcie() -> None:
    """The audit: GB200's host copies (200-377 GB/s published over NVLink-C2C) were judged against PCIe, so a
    healthy one was a 'measurement error' and one at a third of its speed passed."""
    from gpudoctor.checks import bandwidth

    gb200 = {"index": 0, "name": "NVIDIA GB200", "pcie": {"max_gen": 5, "max_width": 16}}
    expected = copies.pcie_copy_expectation(gb200)
    assert (expected.value > 200 and "NVLink-C2C" in expected.source) or "c2c" in expected.source
    assert copies.pcie_peak(gb200).source == "GB200 NVLink-C2C"
    healthy = {"cuda_index": 0, "h2d_gbps": 360.0, "d2h_gbps": 290.0, "verified": True}
    assert bandwidth.host_device_row(healthy, gb200, 0.75, {}).status == Status.PASS
    third = {**healthy, "h2d_gbps": 120.0, "d2h_gbps": 100.0}
    assert bandwidth.host_device_row(third, gb200, 0.75, {}).status == Status.FAIL


def test_nodes_of_one_nvl72_rack_are_judged_over_nvlink_not_infiniband() -> None:
    """The audit: GB200 NVL72 across nodes passed at 120 GB/s (InfiniBand) against 835-847 healthy."""
    nodes = [
        node_summary(f"n{i}", dgx_ports()[:4], "4c7d1a2e-0000-4000-8000-000000000001", "NVIDIA GB200", 4)
        for i in range(18)
    ]
    expected = cluster.network_expectation(nodes)
    assert expected.value > 800 and "72 GPUs in one multi-node NVLink domain" in expected.source
    assert expect.verdict("busbw", 120.0, "GB/s", expected, 0.75)[0] == Status.FAIL
    apart = [node_summary("a", dgx_ports()[:4], None, "NVIDIA GB200", 4), nodes[1]]
    assert "NICs NCCL uses" in cluster.network_expectation(apart).source


def test_a_power_limited_board_without_a_published_figure_is_not_failed_by_its_datasheet() -> None:
    """The audit: H100 NVL's GEMM passed only at 0.90 of a published healthy 488.5 TFLOP/s. Without a
    measurement of the model the datasheet is taken at the lowest fraction any healthy model reaches."""
    nvl = {"index": 0, "name": "NVIDIA H100 NVL"}
    expected = expect.model_expectation(nvl, "bf16_tflops")
    assert "no published measurement" in expected.source and "lowest measured/datasheet ratio" in expected.source
    assert expect.verdict("bf16", 488.5, "TFLOP/s", expected, 0.75)[0] == Status.PASS
    assert expect.verdict("bf16", 438.0, "TFLOP/s", expected, 0.75)[0] == Status.PASS
    assert expect.verdict("bf16", 488.5 / 3, "TFLOP/s", expected, 0.75)[0] == Status.FAIL


MODELS_USERS_HAVE = [
    "NVIDIA B300 SXM6 AC",
    "NVIDIA GB300",
    "NVIDIA H20",
    "NVIDIA A10G",
    "NVIDIA GeForce RTX 5090",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "NVIDIA L20",
    "NVIDIA L2",
    "NVIDIA A800 80GB PCIe",
    "NVIDIA H800 PCIe",
    "NVIDIA RTX A5000",
    "NVIDIA RTX A4000",
    "NVIDIA RTX 6000 Ada Generation",
    "Tesla V100S-PCIE-32GB",
    "Tesla V100-SXM2-16GB",
    "Tesla T4",
]


@pytest.mark.parametrize("name", MODELS_USERS_HAVE)
def test_models_users_have_are_judged_healthy_or_at_a_third_alike_no_longer(name: str) -> None:
    """The audit: these warned the same whether healthy or at a third of their speed. Each now has a memory
    figure, and a matrix figure in the precision it runs (bf16, or fp16 before Ampere)."""
    gpu = {"index": 0, "name": name}
    assert gpu_model(gpu) is not None, name
    for key in ("hbm_gbps", "bf16_tflops" if "V100" not in name and "T4" not in name else "fp16_tflops"):
        expected = expect.model_expectation(gpu, key)
        if expected is None and key != "hbm_gbps" and gpu_model(gpu).get(key) is None:
            continue  # the datasheet states no such figure (RTX A-series tensor figures): said in hardware.toml
        assert expected is not None, (name, key)
        assert expect.verdict(key, expected.value, "", expected, 0.75)[0] == Status.PASS
        assert expect.verdict(key, expected.value / 3, "", expected, 0.75)[0] == Status.FAIL


def test_a_plugin_figure_with_a_comparison_or_reference_no_report_can_hold_is_refused() -> None:
    from gpudoctor.model import Metric, Result
    from gpudoctor.vetting import NotAResult, vetted

    good = Metric("x", 1.0, "GB/s", expected=2.0, comparison=">=", reference=3.0, reference_source="a thread")
    assert vetted(Result(Status.PASS, "fine", metrics=[good]))
    for bad in ({"comparison": "=="}, {"reference": "480"}, {"reference_source": 12}):
        with pytest.raises(NotAResult):
            vetted(Result(Status.PASS, "fine", metrics=[Metric("x", 1.0, "GB/s", **bad)]))
