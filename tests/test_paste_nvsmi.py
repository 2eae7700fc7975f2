"""The nvidia-smi reader (gpudoctor/paste/nvsmi/) over every real sample of tests/fixtures/pastes/nvidia-smi/:
the default table in its layouts from R418 to R610, its MIG devices and Processes boxes, `-L`, `topo -m` and
`topo -p2p`, `-q` read as `-q -x` is read (facts/nvsmi_xml.py), the one-line failures, what must not be taken for
nvidia-smi, and hostile input."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES
from helpers.growth import LINEAR, K, growth

from gpudoctor import paste
from gpudoctor.facts import nvsmi_xml
from gpudoctor.facts.schema import GpuFacts, NvmlFacts, problem
from gpudoctor.paste import nvsmi
from gpudoctor.paste.found import Found

PASTES = FIXTURES / "pastes"
SAMPLES = PASTES / "nvidia-smi"
REAL_XML = FIXTURES / "real" / "H100-80GB-HBM3.nvidia-smi-q-x.xml"


def read(text: str) -> Found:
    """The nvidia-smi reader alone over `text`, split as gpudoctor.paste.read splits a paste."""
    found = Found.of(text)
    nvsmi.read(found)
    return found


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8", errors="replace")


def read_sample(*names: str) -> Found:
    """The samples `names` pasted one after the other."""
    return read("\n".join(sample(name) for name in names))


def nvml(found: Found) -> dict[str, Any]:
    return found.facts["nvml"]


def gpus(found: Found) -> list[dict[str, Any]]:
    return nvml(found).get("gpus", [])


def ecc(count: int | None) -> dict[str, Any]:
    """The table's ECC cell: the volatile uncorrectable count, and ECC on where it is a count."""
    mode = None if count is None else {"current": True, "pending": True}
    return {"ecc_errors": {"volatile_uncorrected": count}, "ecc_mode": mode}


def mode(on: bool | None) -> dict[str, bool] | None:
    return None if on is None else {"current": on, "pending": on}


def process(pid: int, name: str, used: int | None, *kinds: str, mig: list[int] | None = None) -> dict[str, Any]:
    return {"pid": pid, "used_mib": used, "kinds": list(kinds), "mig_instance": mig, "name": name}


def graphics(pid: int, name: str, used: int | None) -> dict[str, Any]:
    return process(pid, name, used, "graphics")


def row(
    index: int, name: str, bus: str, temp: int | None, cap: float | None, used: int, total: int, **more: Any
) -> dict:
    """A GPU as its table rows show it, persistence on and compute mode Default unless said otherwise."""
    return {
        "index": index,
        "name": name,
        "persistence_mode": True,
        "pci_bus_id": bus,
        "temperature_c": temp,
        "power_limit_w": cap,
        "memory_used_mib": used,
        "memory_total_mib": total,
        "compute_mode": "default",
        **more,
    }


def windows(gpu: dict[str, Any]) -> dict[str, Any]:
    """A GPU under Windows: the driver model where Linux shows persistence."""
    return {**{k: v for k, v in gpu.items() if k != "persistence_mode"}, "driver_model": "WDDM"}


# -- the default table, layout by layout ----------------------------------------------------------------------

H100_MIG_DEVICES = [
    {"index": 0, "gpu_instance_id": 2, "compute_instance_id": 0, "memory_total_mib": 40448},
    {"index": 1, "gpu_instance_id": 3, "compute_instance_id": 0, "memory_total_mib": 20096},
    {"index": 2, "gpu_instance_id": 9, "compute_instance_id": 0, "memory_total_mib": 9984},
    {"index": 3, "gpu_instance_id": 10, "compute_instance_id": 0, "memory_total_mib": 9984},
]
H100_MIG_PROCESSES = [
    process(21180, "/root/tools/memhog", 2296, "compute", mig=[2, 0]),
    process(21181, "/root/tools/memhog", 1272, "compute", mig=[2, 0]),
    process(21198, "./gpu_burn", 7484, "compute", mig=[2, 0]),
]
H100_IDLE = {**ecc(0), "mig_mode": mode(False), "processes": []}
TABLES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "table-r418-tesla-p100-kata-vm.txt": (
        {"driver_version": "418.87.01", "cuda_driver_version": 10010, "attached_gpus": 1},
        [
            row(
                0, "Tesla P100-PCIE...", "00000000:01:01.0", 27, 250.0, 0, 16280,
                persistence_mode=False, **ecc(0), processes=[],
            )
        ],
    ),
    "table-r440-rtx2070-laptop-pre-mig-layout.txt": (
        {"driver_version": "440.100", "cuda_driver_version": 10020, "attached_gpus": 1},
        [
            row(
                0, "GeForce RTX 207...", "00000000:01:00.0", 48, None, 246, 7973,
                persistence_mode=False, **ecc(None),
                processes=[
                    graphics(1357, "/usr/lib/xorg/Xorg", 18),
                    graphics(1417, "/usr/bin/gnome-shell", 49),
                    graphics(1811, "/usr/lib/xorg/Xorg", 96),
                    graphics(1968, "/usr/bin/gnome-shell", 77),
                ],
            )
        ],
    ),
    "table-r460-rtx2070-laptop.txt": (
        {"driver_version": "460.39", "cuda_driver_version": 11020, "attached_gpus": 1},
        [
            row(
                0, "GeForce RTX 2070", "00000000:01:00.0", 46, None, 259, 7973,
                persistence_mode=False, **ecc(None), mig_mode=None,
                processes=[
                    graphics(1065, "/usr/lib/xorg/Xorg", 18),
                    graphics(1120, "/usr/bin/gnome-shell", 69),
                    graphics(1523, "/usr/lib/xorg/Xorg", 124),
                    graphics(1684, "/usr/bin/gnome-shell", 40),
                    graphics(4205, "/usr/lib/firefox/firefox", 1),
                ],
            )
        ],
    ),
    "table-r470-geforce-laptop-with-processes.txt": (
        {"driver_version": "470.63.01", "cuda_driver_version": 11040, "attached_gpus": 1},
        [
            row(
                0, "NVIDIA GeForce ...", "00000000:01:00.0", 55, None, 393, 16116,
                persistence_mode=False, **ecc(None), mig_mode=None,
                processes=[
                    graphics(3279, "/usr/lib/xorg/Xorg", 35),
                    graphics(8090, "/usr/lib/xorg/Xorg", 155),
                    graphics(8219, "/usr/bin/gnome-shell", 41),
                    graphics(10010, "/usr/lib/firefox/firefox", 140),
                    graphics(12963, "/usr/lib/firefox/firefox", 3),
                    graphics(13426, "/usr/lib/firefox/firefox", 3),
                ],
            )
        ],
    ),
    "table-r515-titanv.txt": (
        {"driver_version": "515.65.01", "cuda_driver_version": 11070, "attached_gpus": 1},
        [row(0, "NVIDIA TITAN V", "00000000:AF:00.0", 32, 250.0, 0, 12288, **ecc(None), mig_mode=None, processes=[])],
    ),
    "table-r530-wsl2-rtx3070-smi-vs-driver-version-differ.txt": (
        # WSL2 prints its own nvidia-smi (530.47) beside the Windows driver NVML reports (531.68).
        {"driver_version": "531.68", "cuda_driver_version": 12010, "attached_gpus": 1},
        [
            row(
                0, "NVIDIA GeForce RTX 3070", "00000000:2B:00.0", 53, 220.0, 1029, 8192,
                **ecc(None), mig_mode=None, processes=[graphics(22, "/Xwayland", None)],
            )
        ],
    ),
    "table-r531-windows-tcc-wddm-gtx1080ti-partial.txt": (
        # The Processes box is cut after its header: no process list.
        {"driver_version": "531.14", "cuda_driver_version": 12010, "attached_gpus": 1},
        [
            windows(
                row(
                    0, "NVIDIA GeForce GTX 1080 Ti", "00000000:09:00.0", 63, 250.0, 1585, 11264,
                    **ecc(None), mig_mode=None,
                )
            )
        ],
    ),
    "table-r535-h100-partial.txt": (
        # The first GPU of eight, cut after its rows: how many GPUs the node has is not in it.
        {"driver_version": "535.129.03", "cuda_driver_version": 12020},
        [row(0, "NVIDIA H100 80GB HBM3", "00000000:04:00.0", 36, 700.0, 72459, 81559, **ecc(0), mig_mode=mode(False))],
    ),
    "table-r550-2xh100-nvl.txt": (
        {"driver_version": "550.54.14", "cuda_driver_version": 12040, "attached_gpus": 2},
        [
            row(0, "NVIDIA H100 NVL", "00000000:AD:00.0", 32, 310.0, 0, 95830, **H100_IDLE),
            row(1, "NVIDIA H100 NVL", "00000000:AE:00.0", 31, 310.0, 0, 95830, **H100_IDLE),
        ],
    ),
    "table-r550-tesla-p4-partial.txt": (
        # ECC "Off": supported and turned off, so no count.
        {"driver_version": "550.135", "cuda_driver_version": 12040, "attached_gpus": 1},
        [
            row(
                0, "Tesla P4", "00000000:86:00.0", 49, 75.0, 7719, 8192,
                persistence_mode=False, ecc_mode=mode(False), mig_mode=None,
            )
        ],
    ),
    "table-r570-l4-partial.txt": (
        {"driver_version": "570.133.20", "cuda_driver_version": 12080, "attached_gpus": 1},
        [row(0, "NVIDIA L4", "00000000:31:00.0", 36, 72.0, 0, 23034, **ecc(0), mig_mode=None)],
    ),
    "table-r580-2xa100-sxm4-exclusive-process-partial.txt": (
        # The R580 border under the version line ("+---"), compute mode "E. Process"; cut inside GPU 1's box.
        {"driver_version": "580.126.09", "cuda_driver_version": 13000},
        [
            row(
                0, "NVIDIA A100-SXM4-40GB", "00000000:10:1C.0", 41, 400.0, 598, 40960,
                compute_mode="exclusive_process", **ecc(0), mig_mode=mode(False),
            ),
            row(
                1, "NVIDIA A100-SXM4-40GB", "00000000:10:1D.0", 37, 400.0, 602, 40960,
                compute_mode="exclusive_process", **ecc(0), mig_mode=mode(False),
            ),
        ],
    ),
    "table-r590-h200-mig-enabled-with-processes.txt": (
        # MIG on: the ECC cell says "On" (counts are per instance), utilisation N/A.
        {"driver_version": "590.48.01", "cuda_driver_version": 13010, "attached_gpus": 1},
        [
            row(
                0, "NVIDIA H200", "00000000:83:00.0", 36, 700.0, 16959, 143771,
                ecc_mode=mode(True), mig_mode=mode(True),
                mig_devices=[
                    {"index": 0, "gpu_instance_id": 2, "compute_instance_id": 0, "memory_total_mib": 71424},
                    {"index": 1, "gpu_instance_id": 2, "compute_instance_id": 1, "memory_total_mib": 71424},
                    {"index": 2, "gpu_instance_id": 3, "compute_instance_id": 0, "memory_total_mib": 33280},
                    {"index": 3, "gpu_instance_id": 9, "compute_instance_id": 0, "memory_total_mib": 16384},
                    {"index": 4, "gpu_instance_id": 10, "compute_instance_id": 0, "memory_total_mib": 16384},
                ],
                processes=[
                    process(12249, "/root/tools/memhog", 2194, "compute", mig=[2, 1]),
                    process(12250, "/root/tools/memhog", 1170, "compute", mig=[2, 1]),
                    process(12267, "./gpu_burn", 13526, "compute", mig=[2, 1]),
                ],
            )
        ],
    ),
    "table-r590-h100-mig-4-instances-with-processes.txt": (
        {"driver_version": "590.48.01", "cuda_driver_version": 13010, "attached_gpus": 1},
        [
            row(
                0, "NVIDIA H100 80GB HBM3", "00000000:00:09.0", 52, 700.0, 11125, 81559,
                ecc_mode=mode(True), mig_mode=mode(True), mig_devices=H100_MIG_DEVICES, processes=H100_MIG_PROCESSES,
            )
        ],
    ),
    "table-r610-rtx2080super-linux-with-processes.txt": (
        # R610: "KMD Version" and "CUDA UMD Version" in the header.
        {"driver_version": "610.57.04", "cuda_driver_version": 13030, "attached_gpus": 1},
        [
            row(
                0, "NVIDIA GeForce RTX 2080 ...", "00000000:0C:00.0", 38, 250.0, 815, 8192,
                persistence_mode=False, **ecc(None), mig_mode=None,
                processes=[
                    graphics(1720, "/usr/bin/gnome-shell", 173),
                    graphics(4556, "/usr/bin/Xwayland", 3),
                    process(28511, "ffmpeg", 230, "compute"),
                    process(28512, "ffmpeg", 370, "compute"),
                ],
            )
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_table_layout_gives_its_header_and_each_gpu_exactly(name: str) -> None:
    found = read_sample(name)
    header, expected = TABLES[name]
    assert {k: v for k, v in nvml(found).items() if k != "gpus"} == {"status": "ok", **header}
    assert [{k: v for k, v in g.items() if k != "utilization"} for g in gpus(found)] == expected
    assert [g.get("utilization") for g in gpus(found)] == table_utilization(name)
    assert found.conflicts == {}
    assert set(found.kinds) == {"nvidia-smi"}


def table_utilization(name: str) -> list[dict[str, int] | None]:
    """Each GPU's GPU-Util cell as the table shows it (the cell before the compute mode on a GPU's second row),
    read here by its own pattern: `{"gpu": 99}`, None for N/A."""
    cells = re.findall(r"\|\s+(\d{1,3}%|N/A)\s+(?:Default|E\. Process|E\. Thread|Prohibited)\s*\|", sample(name))
    return [{"gpu": int(c[:-1])} if c.endswith("%") else None for c in cells]


def test_the_gpu_util_of_a_real_busy_h100_is_read() -> None:
    busy = Path(__file__).parent / "fixtures" / "real" / "h100-2026-11-26" / "busy" / "nvidia-smi-computing.txt"
    assert read(busy.read_text()).facts["nvml"]["gpus"][0]["utilization"] == {"gpu": 99}


def test_four_a100_rows_in_order() -> None:
    found = read_sample("table-r555-4xa100-sxm.txt")
    assert nvml(found)["attached_gpus"] == 4 == len(gpus(found))
    assert [g["pci_bus_id"] for g in gpus(found)] == [
        "00000000:68:00.0",
        "00000000:9E:00.0",
        "00000000:C2:00.0",
        "00000000:D4:00.0",
    ]
    assert all(g["name"] == "NVIDIA A100-SXM4-80GB" and g["power_limit_w"] == 500.0 for g in gpus(found))
    assert all(g["processes"] == [] and g["mig_mode"] == mode(False) for g in gpus(found))


def test_eight_h100_rows_each_with_its_own_temperature() -> None:
    found = read_sample("table-r565-8xh100-sxm.txt")
    assert nvml(found)["attached_gpus"] == 8
    assert [g["temperature_c"] for g in gpus(found)] == [30, 30, 31, 30, 28, 30, 29, 29]
    assert gpus(found)[7]["pci_bus_id"] == "00000000:DB:00.0"
    assert {g["memory_total_mib"] for g in gpus(found)} == {81559}


@pytest.mark.parametrize(
    "name, driver, processes",
    [
        ("table-r591-rtx2080super-windows-wddm.txt", "591.86", 12),
        ("table-r610-rtx2080super-windows-wddm.txt", "610.62", 21),
    ],
)
def test_windows_tables_give_the_driver_model_and_cpu_plus_graphics_processes(
    name: str, driver: str, processes: int
) -> None:
    """Windows prints the driver model where Linux prints persistence, "C+G" processes and no memory per process
    under WDDM; a name the table cut short keeps its "..."."""
    found = read_sample(name)
    assert nvml(found)["driver_version"] == driver
    gpu = gpus(found)[0]
    assert gpu["driver_model"] == "WDDM" and "persistence_mode" not in gpu
    assert gpu["name"] == "NVIDIA GeForce RTX 2080 ..."
    assert len(gpu["processes"]) == processes
    assert gpu["processes"][0] == process(
        gpu["processes"][0]["pid"], "C:\\Windows\\System32\\dwm.exe", None, "compute", "graphics"
    )
    assert {p["used_mib"] for p in gpu["processes"]} == {None}
    assert any(p["kinds"] == ["compute"] for p in gpu["processes"])


def test_the_old_79_column_mig_box_gives_the_instances_of_gpu_1() -> None:
    """The box alone, ending on its border: GPU 1's instances (GPU 0 is only a place in the list)."""
    found = read_sample("mig-devices-section-old-79-column-layout-a100-partial.txt")
    assert gpus(found) == [
        {"index": 0},
        {
            "index": 1,
            "mig_devices": [
                {"index": 0, "gpu_instance_id": 3, "compute_instance_id": 0, "memory_total_mib": 19968},
                {"index": 1, "gpu_instance_id": 5, "compute_instance_id": 0, "memory_total_mib": 19968},
                {"index": 2, "gpu_instance_id": 6, "compute_instance_id": 0, "memory_total_mib": 19968},
            ],
        },
    ]
    assert "status" not in nvml(found)


# -- nvidia-smi -L -------------------------------------------------------------------------------------------


def test_list_then_a_table_cut_after_gpu_0() -> None:
    found = read_sample("list-L-and-table-r535-2xquadro-rtx4000-partial.txt")
    assert gpus(found)[0].pop("utilization") == {"gpu": 0}
    assert gpus(found) == [
        {
            "index": 0,
            "name": "Quadro RTX 4000",
            "uuid": "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43",
            "persistence_mode": False,
            "pci_bus_id": "00000000:06:00.0",
            "temperature_c": 25,
            "power_limit_w": 125.0,
            "memory_used_mib": 1,
            "memory_total_mib": 8192,
            "compute_mode": "default",
            **ecc(None),
            "mig_mode": None,
        },
        {"index": 1, "name": "Quadro RTX 4000", "uuid": "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc"},
    ]
    assert nvml(found)["driver_version"] == "535.129.03" and "attached_gpus" not in nvml(found)


def test_list_with_mig_devices_gives_the_instances_it_can() -> None:
    """`-L` names each MIG device but not its GPU instance, compute instance or memory (a profile name is not
    the memory an instance has)."""
    found = read_sample("list-L-r590-h200-mig.txt")
    unknown = {"gpu_instance_id": None, "compute_instance_id": None, "memory_total_mib": None}
    assert gpus(found) == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "mig_devices": [{"index": n, **unknown} for n in range(5)],
        }
    ]
    assert nvml(found)["status"] == "ok" and "mig_mode" not in gpus(found)[0]


def test_the_mig_box_wins_over_the_list_and_the_list_names_the_truncated_gpu() -> None:
    """The same H200 (one capture): the table's MIG box says more than `-L` about the instances; `-L` gives the
    names the table would cut, and its topo -m gives the GPU's NUMA node under its bus id."""
    found = read_sample(
        "list-L-r590-h200-mig.txt",
        "topo-m-r590-h200-single-gpu-ansi.txt",
        "table-r590-h200-mig-enabled-with-processes.txt",
    )
    gpu = gpus(found)[0]
    assert gpu["mig_devices"][1] == {
        "index": 1,
        "gpu_instance_id": 2,
        "compute_instance_id": 1,
        "memory_total_mib": 71424,
    }
    assert gpu["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert found.facts["system"] == {"gpu_numa_nodes": {"00000000:83:00.0": 0}}
    assert found.conflicts == {}


def test_a_full_name_replaces_the_truncated_one_and_a_different_gpu_is_a_conflict() -> None:
    table = sample("table-r610-rtx2080super-linux-with-processes.txt")
    listed = "GPU 0: NVIDIA GeForce RTX 2080 SUPER (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
    found = read(table + "\n" + listed)
    assert gpus(found)[0]["name"] == "NVIDIA GeForce RTX 2080 SUPER" and found.conflicts == {}
    other = read(table + "\nGPU 0: NVIDIA RTX A4000 (UUID: GPU-00000000-0000-0000-0000-000000000001)\n")
    assert [v for v, _ in other.conflicts["nvml.gpus.0.name"]] == ["NVIDIA RTX A4000", "NVIDIA GeForce RTX 2080 ..."]


# -- topo -m and topo -p2p -----------------------------------------------------------------------------------

PHB, PIX, SYS = 30, 10, 50


def nothing(size: int) -> list[list[None]]:
    return [[None] * size for _ in range(size)]


def nvlinks(name: str, size: int) -> list[list[int | None]]:
    """The NVLinks per pair a sample prints: "NV18"/"NV12" between every pair of the NVLink samples, none
    (PCIe levels) in the others; None on the diagonal."""
    count = 18 if "nv18" in name else 12 if "nv12" in name else 0
    return [[None if a == b else count for b in range(size)] for a in range(size)]


@pytest.mark.parametrize(
    "name, indexes, ancestors",
    [
        ("topo-m-2x-rtx5090-phb-pcie-with-legend-tabs.txt", [0, 1], [[None, PHB], [PHB, None]]),
        (
            # 2017: "SYS" already, no NUMA Affinity column, an mlx4 NIC column; four rows of eight kept.
            "topo-m-8x-pcie-mlx4-2017-old-columns-partial.txt",
            [0, 1, 2, 3],
            [[None, PIX, PHB, PHB], [PIX, None, PHB, PHB], [PHB, PHB, None, PIX], [PHB, PHB, PIX, None]],
        ),
        # NV# hides the PCIe path of the pair: no ancestor can be read.
        ("topo-m-8xh100-nv18-no-nics.txt", list(range(8)), nothing(8)),
        ("topo-m-dgx-a100-nv12-12-nics-partial.txt", [0, 1, 2, 3], nothing(4)),
        ("topo-m-r590-h200-single-gpu-ansi.txt", [0], [[None]]),
    ],
)
def test_topo_matrix_as_nvml_common_ancestors(name: str, indexes: list[int], ancestors: list[list]) -> None:
    found = read_sample(name)
    links = nvlinks(name, len(indexes))
    said = nvml(found)
    nics = [nic["name"] for nic in said["topology"].pop("nics", [])]
    assert nics == (["mlx4_0"] if "mlx4" in name else [f"NIC{i}" for i in range(12)] if "12-nics" in name else [])
    assert said == {
        "status": "ok",
        "topology": {
            "indexes": indexes,
            "common_ancestor": ancestors,
            "p2p_read": nothing(len(indexes)),
            "nvlinks": links,
        },
    }
    assert found.facts["system"] == {}  # NUMA nodes are keyed by bus id, which topo -m does not print


def test_numa_affinity_goes_under_each_gpus_bus_id() -> None:
    """NUMA Affinity per GPU row, keyed by the bus ids the table in the same paste gives (here eight H100 rows
    beside the eight-H100 matrix: different sources, pasted together for the mechanism)."""
    found = read_sample("table-r565-8xh100-sxm.txt", "topo-m-8xh100-nv18-no-nics.txt")
    buses = [g["pci_bus_id"] for g in gpus(found)]
    assert found.facts["system"]["gpu_numa_nodes"] == dict(zip(buses, [0, 0, 0, 0, 1, 1, 1, 1], strict=True))


def test_the_dgx_matrix_reads_its_numa_column_past_twelve_nics() -> None:
    """The NUMA Affinity column comes after twelve NIC columns and CPU Affinity, before GPU NUMA ID."""
    reader = nvsmi.Reader(Found(sample("topo-m-dgx-a100-nv12-12-nics-partial.txt").split("\n")))
    reader.run()
    assert {index: node for index, (node, _) in reader.topology.numa.items()} == {0: 3, 1: 3, 2: 1, 3: 1}


def test_p2p_matrix_is_read_only_when_the_command_says_read() -> None:
    """`topo -p2p` prints one matrix for whichever capability was asked; the sample (asked "rw") does not say, so
    it gives the GPUs and no status."""
    text = sample("topo-m-p2p-rw-2x-rtx5090-gns.txt")
    unknown = {"status": "ok", "topology": {"indexes": [0, 1], "p2p_read": nothing(2), "common_ancestor": nothing(2)}}
    assert nvml(read(text)) == unknown
    found = read("$ nvidia-smi topo -p2p r\n" + text)
    assert nvml(found)["topology"] == {
        "indexes": [0, 1],
        "p2p_read": [[None, 2], [2, None]],
        "common_ancestor": nothing(2),
    }
    assert nvml(read("$ nvidia-smi topo -p2p w\n" + text)) == unknown
    merged = read(sample("topo-m-2x-rtx5090-phb-pcie-with-legend-tabs.txt") + "\n$ nvidia-smi topo -p2p r\n" + text)
    assert nvml(merged)["topology"] == {
        "indexes": [0, 1],
        "common_ancestor": [[None, PHB], [PHB, None]],
        "p2p_read": [[None, 2], [2, None]],
        "nvlinks": [[None, 0], [0, None]],
    }
    assert merged.conflicts == {}


# -- nvidia-smi -q -------------------------------------------------------------------------------------------

H100_Q_GPU0 = {
    "index": 0,
    "lost": False,
    "accessible": True,
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1",
    "pci_bus_id": "00000000:18:00.0",
    "pci_device_id": 0x233010DE,
    "memory_total_mib": 81559,
    "memory_used_mib": 1,
    "utilization": {"gpu": 0, "memory": 0},
    "virtualization_mode": None,
    "driver_model": None,
    "persistence_mode": True,
    "compute_mode": "default",
    "mig_mode": {"current": False, "pending": False},
    "mig_devices": [],
    "fabric": {
        "state": "completed",
        "status": 0,
        "health": {
            "bandwidth_degraded": None,
            "route_recovery": None,
            "route_unhealthy": None,
            "access_timeout_recovery": None,
            "configuration": None,
            "summary": None,
        },
    },
    "processes": [],
    "ecc_mode": {"current": True, "pending": True},
    "retired_pages": None,
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "clock_event_reasons": ["gpu_idle"],
    "temperature_c": 30,
    "temperature_margin_c": 57,
    "temperature_slowdown_c": 89,  # 30 C + 57 C to T.Limit - (-2 C): the slowdown threshold relative to T.Limit
    "temperature_shutdown_c": 95,
    "power_limit_w": 700.0,
    "power_default_limit_w": 700.0,
    "pcie": {"gen": 5, "max_gen": 5, "gpu_max_gen": 5, "width": 16, "max_width": 16, "replays": 7},
    "ecc_errors": {
        "volatile_uncorrected": 0,
        "volatile_corrected": 0,
        "aggregate_uncorrected": 0,
        "aggregate_corrected": 0,
    },
}


def test_query_of_eight_h100_gives_every_fact_q_x_would() -> None:
    found = read_sample("query-q-r565-8xh100-sxm.txt")
    assert {k: v for k, v in nvml(found).items() if k != "gpus"} == {
        "status": "ok",
        "driver_version": "565.57.01",
        "cuda_driver_version": 12070,
        "attached_gpus": 8,
    }
    assert gpus(found)[0] == H100_Q_GPU0
    assert [g["pci_bus_id"][9:11] for g in gpus(found)] == ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    assert gpus(found)[7]["uuid"] != gpus(found)[0]["uuid"]
    assert found.conflicts == {}


@pytest.mark.parametrize(
    "name, driver, persistence, driver_model, used, processes",
    [
        ("query-q-r610-rtx2080super-linux.txt", "610.57.04", False, None, 211, 2),
        ("query-q-r610-rtx2080super-windows.txt", "610.62", None, "WDDM", 797, 19),
    ],
)
def test_query_r610_with_deprecated_driver_lines(
    name: str, driver: str, persistence: bool | None, driver_model: str | None, used: int, processes: int
) -> None:
    """R610 annotates "Driver Version" as deprecated and adds "KMD Version" / "CUDA UMD Version": one value."""
    found = read_sample(name)
    assert nvml(found)["driver_version"] == driver and nvml(found)["cuda_driver_version"] == 13030
    gpu = gpus(found)[0]
    assert gpu["name"] == "NVIDIA GeForce RTX 2080 SUPER" and gpu["pci_device_id"] == 0x1E8110DE
    assert (gpu["persistence_mode"], gpu["driver_model"], gpu["memory_used_mib"]) == (persistence, driver_model, used)
    assert gpu["ecc_mode"] is None and gpu["mig_mode"] is None and gpu["mig_devices"] == []
    assert gpu["ecc_errors"] == dict.fromkeys(H100_Q_GPU0["ecc_errors"])
    # A GeForce reports absolute thresholds and no T.Limit margin; the GPU ceiling power limit is nested.
    assert (gpu["temperature_slowdown_c"], gpu["temperature_shutdown_c"], gpu["temperature_margin_c"]) == (
        97,
        100,
        None,
    )
    assert (gpu["power_limit_w"], gpu["power_default_limit_w"]) == (250.0, 250.0)
    assert gpu["clock_event_reasons"] == ["gpu_idle"] and gpu["fabric"] is None
    assert len(gpu["processes"]) == processes
    assert found.conflicts == {}


def test_windows_query_processes_have_no_memory_under_wddm() -> None:
    gpu = gpus(read_sample("query-q-r610-rtx2080super-windows.txt"))[0]
    assert gpu["processes"][0] == process(2140, "C:\\Windows\\System32\\dwm.exe", None, "compute", "graphics")
    assert {p["used_mib"] for p in gpu["processes"]} == {None}
    assert gpu["pcie"] == {"gen": 3, "max_gen": 3, "gpu_max_gen": 3, "width": 16, "max_width": 16, "replays": 0}


def test_query_and_table_of_the_same_node_agree() -> None:
    """thamada/nvidia-smi's H100 node: its table and its `-q`, taken moments apart, state every shared fact
    alike; only GPU 3's temperature moved (30 C in the table, 29 C in `-q`)."""
    found = read_sample("table-r565-8xh100-sxm.txt", "query-q-r565-8xh100-sxm.txt")
    assert {path: [v for v, _ in values] for path, values in found.conflicts.items()} == {
        "nvml.gpus.3.temperature_c": [30, 29]
    }
    gpu = gpus(found)[0]
    assert gpu["ecc_errors"] == H100_Q_GPU0["ecc_errors"]  # the table's count and -q's four counters, merged
    assert gpu["mig_mode"] == H100_Q_GPU0["mig_mode"]


def test_query_of_an_h100_in_mig_mode_gives_its_instances_and_their_processes() -> None:
    """R590 prints each MIG Device under the GPU, its memory as "Shared FB Memory Usage"; processes carry their
    GPU and compute instance. The table of the same moment (a second earlier) states every shared fact alike but
    the temperature."""
    gpu = gpus(read_sample("query-q-r590-h100-mig-with-processes.txt"))[0]
    assert gpu["mig_mode"] == mode(True) and gpu["mig_devices"] == H100_MIG_DEVICES
    assert gpu["processes"] == H100_MIG_PROCESSES
    assert gpu["remapped_rows"] is None  # "Remapped Rows : N/A" in MIG mode
    assert gpu["clock_event_reasons"] == [] and gpu["virtualization_mode"] == "Pass-Through"
    assert (gpu["temperature_c"], gpu["temperature_margin_c"], gpu["temperature_slowdown_c"]) == (53, 24, 79)
    both = read_sample("table-r590-h100-mig-4-instances-with-processes.txt", "query-q-r590-h100-mig-with-processes.txt")
    assert {path: [v for v, _ in values] for path, values in both.conflicts.items()} == {
        "nvml.gpus.0.temperature_c": [52, 53]
    }


def test_a_q_section_takes_the_index_a_table_gives_its_bus_id() -> None:
    """`nvidia-smi -q -i 5` prints GPU 5 alone; a table in the same paste says which index it is."""
    q = sample("query-q-r565-8xh100-sxm.txt").split("\n")
    header = q[:7]
    start = next(i for i, line in enumerate(q) if line == "GPU 00000000:AB:00.0")
    end = next(i for i, line in enumerate(q) if i > start and line.startswith("GPU 0000"))
    found = read(sample("table-r565-8xh100-sxm.txt") + "\n" + "\n".join(header + q[start:end]))
    assert gpus(found)[5]["uuid"] == read_sample("query-q-r565-8xh100-sxm.txt").facts["nvml"]["gpus"][5]["uuid"]
    assert "uuid" not in gpus(found)[0]
    alone = read("\n".join(header + q[start:end]))
    assert gpus(alone)[0]["pci_bus_id"] == "00000000:AB:00.0"  # numbered in the order printed, as nvsmi_xml does


# -- -q against -q -x ----------------------------------------------------------------------------------------

STATIC = (
    "name",
    "pci_device_id",
    "memory_total_mib",
    "persistence_mode",
    "compute_mode",
    "mig_mode",
    "mig_devices",
    "processes",
    "ecc_mode",
    "retired_pages",
    "remapped_rows",
    "clock_event_reasons",
    "temperature_slowdown_c",
    "temperature_shutdown_c",
    "power_limit_w",
    "power_default_limit_w",
    "lost",
    "accessible",
)


def xml_gpu(path: Path) -> dict[str, Any]:
    return nvsmi_xml.to_snapshot(path, path.read_bytes())["nvml"]["gpus"][0]


def test_q_text_and_q_x_of_the_same_gpu_model_state_its_fixed_facts_alike() -> None:
    """An H100 80GB HBM3's `-q` (driver 565, thamada/nvidia-smi) and the project's own `-q -x` capture of an H100
    80GB HBM3 (driver 580): what the model and an idle, default-configured board fix is the same fact with the
    same value, the relative temperature thresholds included; what differs is the machine (bus, UUID, fabric
    in a VM, replays) or the moment."""
    text = gpus(read_sample("query-q-r565-8xh100-sxm.txt"))[0]
    xml = xml_gpu(REAL_XML)
    assert {name: text[name] for name in STATIC} == {name: xml[name] for name in STATIC}
    assert {k: v for k, v in text["pcie"].items() if k != "replays"} == {
        k: v for k, v in xml["pcie"].items() if k != "replays"
    }
    assert set(text["ecc_errors"]) == set(xml["ecc_errors"])


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("query-q-*.txt")))
def test_q_text_facts_are_q_x_facts_in_name_and_shape(name: str) -> None:
    """Every fact `-q` gives is one nvsmi_xml gives for `-q -x`, of the snapshot's type; the keys nvsmi_xml
    always fills are left out only where `-q` never prints them."""
    xml_names = set(xml_gpu(REAL_XML))
    for gpu in gpus(read_sample(name)):
        assert set(gpu) <= xml_names
        assert xml_names - set(gpu) == {"compute_capability", "inforom_valid", "nvlinks", "not_captured"}
        assert problem(gpu, GpuFacts) is None
    assert problem({k: v for k, v in nvml(read_sample(name)).items()}, NvmlFacts) is None


def test_a_q_d_subset_gives_only_what_it_prints() -> None:
    """`nvidia-smi -q -d TEMPERATURE,ECC` prints a few sections: the rest is not recorded (not captured)."""
    q = sample("query-q-r565-8xh100-sxm.txt").split("\n")
    keep = [
        *q[:8],
        *q[q.index("    ECC Mode") : q.index("    Retired Pages")],
        *q[q.index("    Temperature") : q.index("    GPU Power Readings")],
    ]
    gpu = gpus(read("\n".join(keep)))[0]
    assert gpu == {
        "index": 0,
        "lost": False,
        "accessible": True,
        "pci_bus_id": "00000000:18:00.0",
        "ecc_mode": {"current": True, "pending": True},
        "ecc_errors": H100_Q_GPU0["ecc_errors"],
        "temperature_c": 30,
        "temperature_margin_c": 57,
        "temperature_slowdown_c": 89,
        "temperature_shutdown_c": 95,
    }


# Older `-q` wording, as printed by R4xx drivers on a V100 (the lines as quoted in NVIDIA/dcgm-exporter#16 and
# NVIDIA/nvidia-docker#914): ECC counted per single/double bit, "Clocks Throttle Reasons", "Power Readings" with
# an "Enforced Power Limit", retired pages with "Pending Page Blacklist".
OLD_Q = """\
==============NVSMI LOG==============

Timestamp                           : Tue Apr 14 10:00:00 2020
Driver Version                      : 418.87.01
CUDA Version                        : 10.1

Attached GPUs                       : 1
GPU 00000000:07:00.0
    Product Name                    : Tesla V100-SXM2-16GB
    Persistence Mode                : Enabled
    GPU UUID                        : GPU-fd2c28fd-ba69-958e-e127-93e5f585e4f6
    Clocks Throttle Reasons
        Idle                        : Not Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : Active
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : Not Active
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
        Display Clock Setting       : Not Active
    Compute Mode                    : Exclusive_Process
    ECC Mode
        Current                     : Enabled
        Pending                     : Disabled
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 3
                Total               : 3
            Double Bit
                Device Memory       : 1
                Total               : 1
        Aggregate
            Single Bit
                Total               : 12
            Double Bit
                Total               : 2
    Retired Pages
        Single Bit ECC              : 1
        Double Bit ECC              : 2
        Pending Page Blacklist      : Yes
    Remapped Rows                   : N/A
    Temperature
        GPU Current Temp            : 24 C
        GPU Shutdown Temp           : 85 C
        GPU Slowdown Temp           : 82 C
    Power Readings
        Power Management            : Supported
        Power Draw                  : 25.33 W
        Power Limit                 : 250.00 W
        Default Power Limit         : 300.00 W
        Enforced Power Limit        : 250.00 W
    Processes
        Process ID                  : 4242
            Type                    : C
            Name                    : python
            Used GPU Memory         : 500 MiB
"""


def test_older_q_wording_means_what_the_older_q_x_elements_mean() -> None:
    gpu = gpus(read(OLD_Q))[0]
    assert gpu == {
        "index": 0,
        "lost": False,
        "accessible": True,
        "name": "Tesla V100-SXM2-16GB",
        "uuid": "GPU-fd2c28fd-ba69-958e-e127-93e5f585e4f6",
        "pci_bus_id": "00000000:07:00.0",
        "persistence_mode": True,
        "compute_mode": "exclusive_process",
        "clock_event_reasons": ["sw_power_cap"],
        "ecc_mode": {"current": True, "pending": False},
        "ecc_errors": {
            "volatile_uncorrected": 1,
            "volatile_corrected": 3,
            "aggregate_uncorrected": 2,
            "aggregate_corrected": 12,
        },
        "retired_pages": {"sbe": 1, "dbe": 2, "pending": True},
        "remapped_rows": None,
        "temperature_c": 24,
        "temperature_slowdown_c": 82,
        "temperature_shutdown_c": 85,
        "power_limit_w": 250.0,
        "power_default_limit_w": 300.0,
        "processes": [process(4242, "python", 500, "compute")],
    }
    assert nvml(read(OLD_Q))["cuda_driver_version"] == 10010


# -- failures ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, status, error, code",
    [
        (
            "$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
            "that the latest NVIDIA driver is installed and running.\n",
            "driver-not-loaded",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
            "NVIDIA driver is installed and running.",
            9,
        ),
        (
            # Copied through a Chinese blog's typography, wrapped (qixuema/envs#4).
            "NVIDIA-SMI has failed because it couldn‘t communicate with the NVIDIA driver.\nMake sure that the "
            "latest NVIDIA driver is installed and running.\n",
            "driver-not-loaded",
            "NVIDIA-SMI has failed because it couldn‘t communicate with the NVIDIA driver.",
            9,
        ),
        (
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.104\n",
            "version-mismatch",
            "Failed to initialize NVML: Driver/library version mismatch",
            18,
        ),
        ("> Failed to initialize NVML: Unknown Error\n", "error", "Failed to initialize NVML: Unknown Error", 999),
        (
            "Failed to initialize NVML: Insufficient Permissions",
            "no-permission",
            "Failed to initialize NVML: Insufficient Permissions",
            4,
        ),
        (
            "Failed to initialize NVML: Driver Not Loaded",
            "driver-not-loaded",
            "Failed to initialize NVML: Driver Not Loaded",
            9,
        ),
        (
            "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
            "Driver is properly installed and present in your system.\nPlease also try adding directory that contains "
            "libnvidia-ml.so to your system PATH.\n",
            "library-not-found",
            "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
            "Driver is properly installed and present in your system.",
            12,
        ),
    ],
)
def test_nvml_failures_give_the_gateways_status(text: str, status: str, error: str, code: int) -> None:
    found = read(text)
    assert nvml(found) == {"status": status, "error": error, "error_code": code}


def test_an_nvml_error_nvidia_smi_names_no_code_for() -> None:
    found = read("Failed to initialize NVML: GPU access blocked by the operating system\n")
    assert nvml(found) == {
        "status": "error",
        "error": "Failed to initialize NVML: GPU access blocked by the operating system",
    }


def test_no_devices_is_nvml_up_with_no_gpu_and_only_as_the_whole_line() -> None:
    assert nvml(read("$ nvidia-smi\nNo devices were found\n")) == {"status": "ok", "attached_gpus": 0}
    assert read("ibstat: No devices were found here\n").kinds == {}


def test_a_failure_beside_a_table_is_a_conflict() -> None:
    found = read("Failed to initialize NVML: Driver/library version mismatch\n" + sample("table-r515-titanv.txt"))
    assert [v for v, _ in found.conflicts["nvml.status"]] == ["version-mismatch", "ok"]


def test_the_header_line_alone_beside_a_torch_error() -> None:
    found = read((PASTES / "errors" / "driver-too-old-found-11040-runtimeerror-with-smi-header.txt").read_text())
    assert nvml(found) == {"status": "ok", "driver_version": "470.86", "cuda_driver_version": 11040}


# -- what is not nvidia-smi's, and hostile input ------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    sorted(
        p for kind in ("collect_env", "kernel", "nccl", "issues", "bug-report") for p in (PASTES / kind).glob("*.txt")
    ),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_other_kinds_of_paste_give_nothing(path: Path) -> None:
    """collect_env's "GPU 0: ..." lines (UUIDs stripped), kernel logs' "GPU at PCI:...", NCCL's GPU lines: none
    of them is nvidia-smi's."""
    assert read(path.read_text(encoding="utf-8", errors="replace")).kinds == {}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\x01\x02\xff" * 1000,
        "GPU 0: x\nGPU0\n| GPU  Name   Persistence-M |\n|====|\n|   0  X  On | junk | 0 |\n",
        "| Processes: |\n|  GPU   GI   CI        PID   Type   Process name  GPU Memory |\n",
        "+---+\n| MIG devices: |\n|  0    1   0   0  |  1MiB / 2MiB |",
        "GPU 99999: NVIDIA H100 (UUID: GPU-1)\n",
        "==============NVSMI LOG==============\n" + "".join(" " * i + f"Key{i} : {i}\n" for i in range(3000)),
        "GPU 00000000:3B:00.0\n    Product Name : x\n" + "        Nested\n" * 50000,
        "==============NVSMI LOG==============\nGPU 00000000:3B:00.0\n" + "    :\n" * 10,
        "GPU0 GPU1\nGPU0 X\nGPU1\n",
        "GPU0\tGPU1\nGPU0\tX\tZZZ\nGPU1\tZZZ\tX\n",
        "| NVIDIA-SMI 535.54.03  Driver Version:   CUDA Version: |\n",
        "|   0  NVIDIA H100  On  | 00000000:3B:00.0 Off | 0 |\n",
    ],
)
def test_junk_and_half_outputs_never_raise(text: str) -> None:
    found = read(text)
    assert len(gpus(found)) <= nvsmi.MAX_GPUS
    assert problem(nvml(found), NvmlFacts) is None


@pytest.mark.parametrize(
    "text, facts",
    [
        ("GPU 99999: NVIDIA H100 (UUID: GPU-1)\n", {}),  # past any real index: no 100,000-entry GPU list
        ("GPU0\tGPU1\nGPU0\tX\tZZZ\nGPU1\tZZZ\tX\n", {}),  # cells no topology matrix holds
        ("| NVIDIA-SMI 535.54.03  Driver Version:   CUDA Version: |\n", {}),  # no version in it
        (
            "GPU 00000000:3B:00.0\n    Product Name : x\n" + "        Nested\n" * 50000,
            {
                "status": "ok",
                "gpus": [
                    {"index": 0, "lost": False, "accessible": True, "name": "x", "pci_bus_id": "00000000:3B:00.0"}
                ],
            },
        ),
    ],
)
def test_junk_that_looks_like_nvidia_smi_gives_only_what_holds(text: str, facts: dict[str, Any]) -> None:
    assert nvml(read(text)) == facts


def test_rows_without_header_are_not_a_table() -> None:
    first = "|   0  NVIDIA H100  On  | 00000000:3B:00.0 Off | 0 |"
    second = "| N/A 30C P0 1W / 700W | 1MiB / 2MiB | 0% Default |"
    assert read(f"{first}\n{second}\n").kinds == {}


def test_a_table_cut_mid_gpu_keeps_what_it_shows() -> None:
    lines = sample("table-r550-2xh100-nvl.txt").split("\n")
    cut = lines[
        : lines.index("|   1  NVIDIA H100 NVL                On  |   00000000:AE:00.0 Off |                    0 |") + 1
    ]
    found = read("\n".join(cut))
    assert gpus(found)[1] == {
        "index": 1,
        "name": "NVIDIA H100 NVL",
        "persistence_mode": True,
        "pci_bus_id": "00000000:AE:00.0",
        "ecc_errors": {"volatile_uncorrected": 0},
        "ecc_mode": mode(True),
    }
    assert "attached_gpus" not in nvml(found)


def test_err_cells_are_not_values() -> None:
    """A GPU in trouble prints ERR! in its cells: nothing is read from those."""
    text = (
        sample("table-r515-titanv.txt")
        .replace(
            "| 28%   32C    P8    23W / 250W |      0MiB / 12288MiB |      0%      Default |",
            "|ERR!  ERR!  ERR!    ERR! / ERR! |      0MiB / 12288MiB |     ERR!        ERR! |",
        )
        .replace("NVIDIA TITAN V      On   |", "NVIDIA TITAN V      ERR! |")
    )
    gpu = gpus(read(text))[0]
    assert gpu["temperature_c"] is None and gpu["power_limit_w"] is None
    assert "compute_mode" not in gpu and "persistence_mode" not in gpu
    assert gpu["memory_total_mib"] == 12288


@pytest.mark.parametrize(
    "dress",
    [
        lambda t: "\n".join("> " + line for line in t.split("\n")),  # a markdown quote
        lambda t: "```\n" + t + "\n```",  # a code fence
        lambda t: "\n".join("    " + line for line in t.split("\n")),  # indented as code
        lambda t: t.replace("\n", "\r\n"),  # CRLF
        lambda t: "<details>\n" + t + "</details>\n",
    ],
)
def test_a_pasted_table_and_query_read_the_same_however_dressed(dress: Any) -> None:
    for name in ("table-r590-h200-mig-enabled-with-processes.txt", "query-q-r610-rtx2080super-linux.txt"):
        assert read(dress(sample(name))).facts == read_sample(name).facts, name


def test_twenty_megabytes_of_log_read_whole_and_in_linear_time() -> None:
    """A table amid 20 MB of kernel log is found; K times the log is about K times the work (tests/helpers/growth.py,
    from 0.5 to 4 MB)."""
    kernel = "[Mon Feb 19 07:03:11 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"

    def log(size: int) -> str:
        half = kernel * (size // 2 // len(kernel))
        return half + sample("table-r565-8xh100-sxm.txt") + half

    grew = growth(read, log(4_000_000 // K), log(4_000_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the log"
    assert nvml(read(log(20_000_000)))["attached_gpus"] == 8


def test_a_long_query_log_read_whole_and_in_linear_time() -> None:
    """40 `-q` outputs one after another, about 72,000 lines: K times as many is about K times the work
    (tests/helpers/growth.py, from 5 to 40)."""
    query = sample("query-q-r565-8xh100-sxm.txt")
    grew = growth(read, query * (40 // K), query * 40)
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the outputs"
    found = read(query * 40)
    assert len(gpus(found)) == 8 and found.conflicts == {}


# -- through the whole paste reader --------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.txt")), ids=lambda p: p.name)
def test_each_sample_as_a_snapshot_passes_the_schema(path: Path) -> None:
    found = paste.read(path.read_text(encoding="utf-8", errors="replace"))
    snapshot = paste.to_snapshot(path.name, found)
    assert problem(snapshot) is None
    assert "nvidia-smi" in found.kinds
