"""No GPU, told apart: where NVML does not load, the machine's own facts (the PCI bus, /dev/nvidia*, the container,
the NVIDIA Container Toolkit's variables) name the one cause that holds, each with its own cure. The layouts are
recorded from real machines (tests/fixtures/nogpu/README.md names each source); this machine's live run is the
first case."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES, gpudoctor, judge, load_snapshot

from gpudoctor.checks import driver
from gpudoctor.diagnosis import Evidence, diagnose
from gpudoctor.facts import devices, system
from gpudoctor.judging import nogpu
from gpudoctor.model import Cause

LAYOUTS = FIXTURES / "nogpu"
# The distribution of the machine this was found on (Debian 12), whose fix for every "no GPU" was a driver install.
DEBIAN = {"id": "debian", "version_id": "12", "version_codename": "bookworm"}
# The environment each layout was recorded with (its source in the README); none where the source sets nothing.
ENV = {
    "container-without-capabilities": {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "graphics"},
}
READ_FROM_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "KUBERNETES_SERVICE_HOST", "SLURM_NNODES",
                 "SLURM_JOB_NUM_NODES")  # fmt: skip
INSTALLS = ("apt install", "cuda-drivers", "dnf install", "nvidia-driver")


def facts_of(layout: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    """A node whose NVML library is missing (tests/fixtures/snapshots/no-driver.json: torch 2.14.1+cu130, no
    driver library), its system facts gathered by the real gatherer from a recorded layout."""
    for name in READ_FROM_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in {**ENV.get(layout, {}), **env}.items():
        monkeypatch.setenv(name, value)
    facts = load_snapshot("no-driver")
    facts["system"] = {**system.gather(LAYOUTS / layout), "os_release": DEBIAN}
    return facts


def causes_of(facts: dict[str, Any]) -> list[Cause]:
    return diagnose(Evidence(list(judge(facts).values()), facts, live=False))


CASES = {
    # layout: (cause, its summary's start, a command of its cure)
    "no-device": ("no-gpu-device", "no NVIDIA device on this machine", "lspci -nn | grep -i nvidia"),
    "unbound": ("gpu-without-driver", "2 NVIDIA GPUs are on the PCI bus but no NVIDIA driver", "sudo modprobe nvidia"),
    "nouveau": ("gpu-without-driver", "an NVIDIA GPU is on the PCI bus but no NVIDIA driver", "blacklist nouveau"),
    "vfio-pci": ("gpu-without-driver", "an NVIDIA GPU is on the PCI bus but no NVIDIA driver", "grep -s vfio"),
    "container-without-gpus": (
        "container-without-gpus",
        "this container was started without GPU access",
        "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
    ),
    "container-without-capabilities": (
        "container-without-capabilities",
        "this container has the GPU devices (/dev/nvidia0) but NVIDIA_DRIVER_CAPABILITIES='graphics' leaves out "
        "compute and utility: the NVIDIA runtime mounted no libcuda and no libnvidia-ml",
        "docker run --gpus 'all,\"capabilities=compute,utility\"' IMAGE",
    ),
}
# Only a GPU that is there, with no driver bound, is cured by installing one.
INSTALLED = {"unbound", "nouveau"}


@pytest.mark.parametrize("layout", sorted(CASES))
def test_each_cause_of_no_gpu_leads_with_its_own_command(layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cause_id, summary, command = CASES[layout]
    causes = causes_of(facts_of(layout, monkeypatch))
    assert [c.id for c in causes] == [cause_id], "the one cause that holds, and no other"
    assert causes[0].summary.startswith(summary)
    assert "driver.nvml" in causes[0].explains
    commands = causes[0].remediation.commands
    assert any(command in c for c in commands), commands
    installs = [c for c in commands if any(word in c for word in INSTALLS)]
    assert bool(installs) == (layout in INSTALLED), installs
    assert all(shlex.split(c) for c in commands), "every command pastes into a shell"
    assert causes[0].source == nogpu.SOURCES[cause_id] and causes[0].evidence


def test_the_layouts_read_as_recorded() -> None:
    """The reader takes NVIDIA's VGA, 3D and display controllers only (not its audio function), each with its ids
    and the driver its link names, and /dev/nvidia* by name; this machine's bus through the kernel's links."""
    here = devices.gather(LAYOUTS / "no-device")
    assert here == {"pci_functions": 6, "nvidia_gpus": [], "device_files": [], "module_loaded": False}
    vfio = devices.gather(LAYOUTS / "vfio-pci")
    assert vfio["pci_functions"] == 2
    gpu = {"address": "0000:07:00.0", "device": "0x2504", "class_code": "0x030000", "driver": "vfio-pci"}
    assert vfio["nvidia_gpus"] == [gpu]
    unbound = devices.gather(LAYOUTS / "unbound")["nvidia_gpus"]
    assert [(g["address"], g["class_code"], g["driver"]) for g in unbound] == [
        ("0000:5a:00.0", "0x030200", None),
        ("0000:5e:00.0", "0x030200", None),
    ]
    given = devices.gather(LAYOUTS / "container-without-capabilities")["device_files"]
    assert given == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl"]
    assert devices.gather(LAYOUTS / "no-such-root") == {
        "pci_functions": 0,
        "nvidia_gpus": [],
        "device_files": [],
        "module_loaded": False,
    }


def test_an_empty_bus_outside_a_container_is_no_device_too(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = facts_of("no-device", monkeypatch)
    facts["system"]["container"] = None
    nvml = driver.judge_nvml(facts["nvml"], facts["system"], facts["torch"])
    assert (
        nvml.summary == "no NVIDIA device on this machine: the PCI bus lists no NVIDIA GPU and there is no /dev/nvidia*"
    )
    assert "Nothing to install here" in nvml.remediation.why


def test_a_slurm_job_on_a_node_without_gpus_is_shown_its_request(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = facts_of("no-device", monkeypatch, SLURM_NNODES="1")
    commands = causes_of(facts)[0].remediation.commands
    assert "scontrol show job $SLURM_JOB_ID | grep -iE 'gres|tres'  # the GPUs the job asked for" in commands
    assert any(c.startswith("srun --gpus-per-node=N ") for c in commands)


@pytest.mark.parametrize("visible", ["void", "none", ""])
def test_a_container_told_no_gpu_is_one_cause_not_two(visible: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA_VISIBLE_DEVICES void, none or empty (runc's behaviour: no GPU) is said in the same cause."""
    causes = causes_of(facts_of("container-without-gpus", monkeypatch, NVIDIA_VISIBLE_DEVICES=visible))
    assert [c.id for c in causes] == ["container-without-gpus"]
    assert causes[0].summary.endswith(f"; NVIDIA_VISIBLE_DEVICES={visible!r}")
    assert f"NVIDIA_VISIBLE_DEVICES={visible!r}" in causes[0].evidence


def test_a_pod_without_gpus_is_told_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = facts_of("container-without-gpus", monkeypatch)
    facts["system"]["container"] = "kubepods"
    cure = causes_of(facts)[0].remediation
    assert "nvidia.com/gpu" in cure.why and cure.commands[0].startswith("kubectl describe nodes")


def test_the_devices_without_the_runtime_libraries_are_a_container_without_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A privileged container sees the host's /dev/nvidia*, but only the NVIDIA runtime mounts the libraries."""
    facts = facts_of("container-without-capabilities", monkeypatch)
    facts["system"]["env"].pop("NVIDIA_DRIVER_CAPABILITIES")
    cause = causes_of(facts)[0]
    assert cause.id == "container-without-gpus" and "not the driver's libraries" in cause.summary


@pytest.mark.parametrize(
    ("value", "lacking"),
    [
        ("graphics", ("compute", "utility")),
        ("compute,video", ("utility",)),
        (" Compute , UTILITY ", ()),
        ("all", ()),
        ("", ()),
        (None, ()),
    ],
)
def test_capabilities_lacking(value: str | None, lacking: tuple[str, ...]) -> None:
    """Empty or unset is the toolkit's default, utility,compute; all is every capability."""
    assert nogpu.capabilities_lacking(value) == lacking


def test_a_capture_without_the_device_facts_keeps_the_driver_fix_and_says_what_it_lacks() -> None:
    """A snapshot from before gpudoctor read the bus (no system.devices): not captured, never "no GPU"."""
    facts = load_snapshot("no-driver")
    assert "devices" not in facts["system"]
    result = driver.judge_nvml(facts["nvml"], facts["system"], facts["torch"])
    assert result.summary == "no NVIDIA driver library (libnvidia-ml.so.1) in this environment"
    assert driver.UNCAPTURED_DEVICES in result.remediation.why
    assert [c.id for c in causes_of(facts)] == ["no-driver"]


def test_a_gpu_on_its_driver_outside_a_container_keeps_the_driver_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU bound to nvidia with no library here (the user-space part missing) is none of the four."""
    facts = facts_of("container-without-gpus", monkeypatch)
    facts["system"]["container"] = None
    assert nogpu.classify(facts["nvml"], facts["system"]) is None
    assert [c.id for c in causes_of(facts)] == ["no-driver"]


def test_values_from_a_snapshot_are_shown_only_when_they_are_what_they_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = facts_of("nouveau", monkeypatch)
    gpu = facts["system"]["devices"]["nvidia_gpus"][0]
    gpu.update(device="0x13c2\x1b[2J", driver="$(reboot)")
    facts["system"]["devices"]["nvidia_gpus"].append({"address": "../../etc", "driver": "nvidia"})
    state = nogpu.classify(facts["nvml"], facts["system"])
    assert state is not None and [g["address"] for g in state.gpus] == ["0000:01:00.0"]
    assert state.gpus[0]["device"] is None and state.gpus[0]["driver"] == "unknown"
    said = " ".join([*state.evidence, nogpu.finding(state, "library-not-found", {})[0]])
    assert "\x1b" not in said and "reboot" not in said and "etc" not in said


def test_the_device_facts_survive_a_snapshot_and_check_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "container.json"
    path.write_text(json.dumps(facts_of("container-without-capabilities", monkeypatch)))
    proc = gpudoctor("check", "--from", str(path), "--json")
    document = json.loads(proc.stdout)
    assert [c["id"] for c in document["causes"]] == ["container-without-capabilities"]
    assert proc.returncode == 1
    old = gpudoctor("check", "--from", str(FIXTURES / "snapshots" / "no-driver.json"), "--json")
    assert [c["id"] for c in json.loads(old.stdout)["causes"]] == ["no-driver"], "an old snapshot still loads"


def test_this_machine_leads_with_no_nvidia_device(tmp_path: Path) -> None:
    """This machine (CI's, no GPU on its bus, and no container with GPUs): the real command says so first, and its
    snapshot carries the facts that said it."""
    here = devices.gather()
    if here["nvidia_gpus"] or here["device_files"] or not here["pci_functions"]:
        pytest.skip("this machine has an NVIDIA GPU, or no readable PCI bus; tests/test_gpu.py covers a GPU")
    proc = gpudoctor("check", "--json")
    cause = json.loads(proc.stdout)["causes"][0]
    assert cause["id"] == "no-gpu-device" and cause["summary"].startswith("no NVIDIA device on this machine")
    assert not any(word in c for c in cause["remediation"]["commands"] for word in INSTALLS)
    assert proc.returncode == 1
    path = tmp_path / "here.json"
    assert gpudoctor("snapshot", "-o", str(path)).returncode == 0
    assert json.loads(path.read_text())["system"]["devices"] == here


def test_the_nouveau_check_and_the_cause_give_one_cure() -> None:
    found = driver.judge_kernel_module({}, {"kernel_modules": ["nouveau"]})
    assert found.remediation is nogpu.NOUVEAU_CURE


def test_a_run_that_loads_nvml_is_none_of_them() -> None:
    healthy = copy.deepcopy(load_snapshot("h100-sxm-8x"))
    healthy["system"]["devices"] = {"pci_functions": 1, "nvidia_gpus": [], "device_files": [], "module_loaded": False}
    assert nogpu.classify(healthy["nvml"], healthy["system"]) is None


def test_a_container_without_gpus_is_told_each_runtimes_way_to_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    """Docker's --gpus, Compose's device reservation (or runtime: nvidia in the 2.3 file format), Podman's CDI device
    and a pod's nvidia.com/gpu limit (with the nvidia runtime class where containerd's default is runc): the NVIDIA
    Container Toolkit's, Docker's and Kubernetes' documented forms."""
    cure = causes_of(facts_of("container-without-gpus", monkeypatch))[0].remediation
    said = cure.why + " ".join(cure.commands)
    for way in ("--gpus all", "deploy.resources.reservations.devices", "runtime: nvidia", "nvidia.com/gpu"):
        assert way in said, way
    assert any(c.startswith("podman run --rm --device nvidia.com/gpu=all") for c in cure.commands)
    facts = facts_of("container-without-gpus", monkeypatch)
    facts["system"]["container"] = "kubepods"
    pod = causes_of(facts)[0].remediation
    assert "runtimeClassName: nvidia" in pod.why and any("runtimeclass" in c for c in pod.commands)
