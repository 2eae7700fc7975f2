"""Every figure against a published healthy one (gpudoctor/references.py, data/references.toml): the one rule,
the choice of the published figure, the audit's false alarms and misses (issue 30) fixed, and the NICs NCCL
would use between nodes."""

from __future__ import annotations

import pytest
from gpudoctor.checks import cluster

from gpudoctor import expect, references
from gpudoctor.cluster.node import network
from gpudoctor.hardware import hardware
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
    assert expect.hca_selected(port, None) and expect.hca_selected(port, "mlx5")
    assert not expect.hca_selected(port, "=mlx5_1") and expect.hca_selected(port, "=mlx5_10")
    assert not expect.hca_selected(port, "^mlx5_1") and expect.hca_selected(port, "^mlx5_2")
    assert expect.hca_selected(port, "mlx5_10:1") and not expect.hca_selected(port, "mlx5_10:2")


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
    used, left = expect.nccl_nics(dgx_ports(), {0, 1}, {})
    assert [p["device"] for p in used] == [f"mlx5_{i}" for i in range(8)]
    assert any("mlx5_8:1 Ethernet beside InfiniBand" in why for why in left)
    assert any("mlx5_10:1 not active" in why for why in left)
    used, left = expect.nccl_nics(dgx_ports(), {0, 1}, {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"})
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
