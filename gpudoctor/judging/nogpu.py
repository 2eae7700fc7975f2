"""No GPU, told apart. Where NVML does not load (no driver library, or no driver running), one of four causes
usually holds, each with its own cure, and a driver install is the cure of one of them only:

- no NVIDIA device on this machine: the PCI bus lists no NVIDIA GPU and there is no /dev/nvidia*. A container
  sees its host's bus (PCI enumeration is not namespaced), so the host has none either: nothing to install; the
  job asked for no GPU or landed on the wrong node.
- a GPU on the bus with no NVIDIA driver bound to it: nothing bound (install or load the driver), nouveau (which
  holds it against NVIDIA's driver), or vfio-pci (reserved for a virtual machine).
- a container started without GPU access: the host's GPUs are on the bus, bound to NVIDIA's driver, but no
  /dev/nvidia* was given to the container (no `--gpus`, no NVIDIA runtime, NVIDIA_VISIBLE_DEVICES void or none).
- a container given the devices but not the `compute,utility` driver capabilities, so the NVIDIA runtime mounted
  neither libnvidia-ml nor libcuda.

`classify` says which, from the facts alone (facts/devices.py, the container, the environment); pure. A capture
without the device facts (an older snapshot, a paste) is "not captured": None, and the generic fix stands."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from gpudoctor.facts.schema import DEVICE_FILE, DRIVER_NAME, HEX_ID, PCI_ADDRESS
from gpudoctor.model import Remediation

NO_DRIVER = ("library-not-found", "driver-not-loaded")
NVIDIA_DRIVERS = ("nvidia",)
GPU_FILE = re.compile(r"nvidia\d{1,3}")  # /dev/nvidia0..: one per GPU given to this machine or container
# NVIDIA Container Toolkit, "Specialized Configurations with Docker", GPU enumeration: NVIDIA_VISIBLE_DEVICES void,
# empty or unset: the runtime acts as runc (no GPU); none: no GPU, the driver's libraries only.
CONTAINER_NONE = ("void", "none", "")
KUBERNETES = ("kubernetes", "kubepods")  # facts/system.py's names of a Kubernetes pod
SLURM = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")  # set in every Slurm job step (sbatch, srun, salloc)
# The same page, driver capabilities: compute "required for CUDA and OpenCL applications", utility "required for
# using nvidia-smi and NVML"; empty or unset: the default, utility,compute; all: every capability.
NEEDED_CAPABILITIES = ("compute", "utility")
CLASS_NAMES = {"0x0300": "VGA controller", "0x0302": "3D controller", "0x0380": "display controller"}

NO_DEVICE = "no-gpu-device"
NO_DRIVER_BOUND = "gpu-without-driver"
CONTAINER_WITHOUT_GPUS = "container-without-gpus"
CONTAINER_WITHOUT_CAPABILITIES = "container-without-capabilities"

TOOLKIT_INSTALL = (
    "NVIDIA Container Toolkit, Installing the NVIDIA Container Toolkit (docs.nvidia.com/datacenter/"
    "cloud-native/container-toolkit/latest/install-guide.html): `nvidia-ctk runtime configure --runtime=docker`, "
    "then restart Docker"
)
TOOLKIT_SPECIALIZED = (
    "NVIDIA Container Toolkit, Specialized Configurations with Docker (docs.nvidia.com/"
    "datacenter/cloud-native/container-toolkit/latest/docker-specialized.html)"
)
SOURCES = {
    NO_DEVICE: "PCI-SIG class codes 0300 (VGA), 0302 (3D controller), 0380 (display) under NVIDIA's vendor id 10de, "
    "read from sysfs (/sys/bus/pci/devices/*/vendor, class): a bus with none has no NVIDIA GPU for a driver to "
    "drive. PCI enumeration is not namespaced: `lspci` in a container started without GPUs still lists the host's "
    "(NVIDIA/nvidia-docker#170, flx42; FootprintAI/Containarium#952)",
    NO_DRIVER_BOUND: "sysfs: a function's `driver` link names the driver bound to it; the NVIDIA driver's kernel log: "
    "'The NVIDIA probe routine was not called ... a driver such as nouveau ... obtained ownership of the NVIDIA "
    "device(s)'; vfio-pci holds a device for passthrough to a virtual machine (Linux kernel, Documentation/"
    "driver-api/vfio.rst)",
    CONTAINER_WITHOUT_GPUS: f"{TOOLKIT_SPECIALIZED}: GPUs are given with `--gpus` or NVIDIA_VISIBLE_DEVICES (void, "
    f"empty or unset: no GPU); {TOOLKIT_INSTALL}; Docker, Run Docker Compose services with GPU access (docs.docker"
    ".com/compose/gpu-support): a device reservation must set `capabilities: [gpu]`; Kubernetes, Schedule GPUs "
    "(kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/): a `nvidia.com/gpu` limit; NVIDIA Container Toolkit, "
    "Support for Container Device Interface (cdi-support.html): podman run --device nvidia.com/gpu=all; NVIDIA "
    "k8s-device-plugin README: runtimeClassName: nvidia",
    CONTAINER_WITHOUT_CAPABILITIES: f"{TOOLKIT_SPECIALIZED}, driver capabilities: NVIDIA_DRIVER_CAPABILITIES "
    "compute is required for CUDA, utility for nvidia-smi and NVML; empty or unset: utility,compute. The devices are "
    "given whatever the capabilities (NVIDIA/k8s-device-plugin#284, elezar)",
}

NOUVEAU_CURE = Remediation(
    "Blacklist nouveau, rebuild the initramfs and reboot.",
    [
        "echo -e 'blacklist nouveau\\noptions nouveau modeset=0' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf",
        "sudo update-initramfs -u && sudo reboot",
    ],
)


@dataclass(frozen=True)
class NoGpu:
    """Which cause of "no GPU" holds, and what in the facts says so."""

    case: str  # NO_DEVICE, NO_DRIVER_BOUND, CONTAINER_WITHOUT_GPUS or CONTAINER_WITHOUT_CAPABILITIES
    gpus: tuple[dict[str, Any], ...]  # the NVIDIA GPUs on the bus, their fields checked
    gpu_files: tuple[str, ...]  # /dev/nvidia0..
    container: str | None
    lacking: tuple[str, ...] = ()  # the driver capabilities a container lacks
    evidence: tuple[str, ...] = ()


def captured(system: dict[str, Any]) -> bool:
    return isinstance(system.get("devices"), dict)


def classify(nvml: dict[str, Any], system: dict[str, Any]) -> NoGpu | None:
    """The cause of NVML not loading that the device facts show; None where NVML loaded, the facts were not
    captured, or they show none of the four (a GPU bound to NVIDIA's driver outside a container, say)."""
    if nvml.get("status") not in NO_DRIVER or not captured(system):
        return None
    devices, env = system["devices"], system.get("env") or {}
    gpus = tuple(_checked(g) for g in devices.get("nvidia_gpus") or [] if PCI_ADDRESS.fullmatch(str(g.get("address"))))
    files = tuple(f for f in devices.get("device_files") or [] if GPU_FILE.fullmatch(str(f)))
    container = system.get("container") or None
    lacking = capabilities_lacking(env.get("NVIDIA_DRIVER_CAPABILITIES"))
    case = _case(nvml["status"], gpus, files, container, bool(lacking), devices.get("pci_functions") or 0)
    if case is None:
        return None
    state = NoGpu(case, gpus, files, container, lacking if case == CONTAINER_WITHOUT_CAPABILITIES else ())
    return replace(state, evidence=_evidence(state, devices, env))


def _case(
    status: str,
    gpus: tuple[dict[str, Any], ...],
    files: tuple[str, ...],
    container: str | None,
    lacking: bool,
    functions: int,
) -> str | None:
    if container and files and lacking:
        return CONTAINER_WITHOUT_CAPABILITIES
    if functions and not gpus and not files:
        return NO_DEVICE
    if gpus and not any(g["driver"] in NVIDIA_DRIVERS for g in gpus):
        return NO_DRIVER_BOUND
    if container and (not files or status == "library-not-found"):
        return CONTAINER_WITHOUT_GPUS  # no GPU given, or its devices without the libraries the NVIDIA runtime mounts
    return None


def capabilities_lacking(value: str | None) -> tuple[str, ...]:
    """The capabilities of `compute,utility` that NVIDIA_DRIVER_CAPABILITIES leaves out (none where it is unset,
    empty or `all`: the default is utility,compute)."""
    named = {part.strip().lower() for part in (value or "").split(",")} - {""}
    if not named or "all" in named:
        return ()
    return tuple(c for c in NEEDED_CAPABILITIES if c not in named)


def _checked(gpu: dict[str, Any]) -> dict[str, Any]:
    """A GPU's fields as they may be shown: ids that are ids, a driver name that is one ("unknown" otherwise)."""
    driver = gpu.get("driver")
    return {
        "address": gpu["address"],
        "device": gpu.get("device") if HEX_ID.fullmatch(str(gpu.get("device"))) else None,
        "class_code": gpu.get("class_code") if HEX_ID.fullmatch(str(gpu.get("class_code"))) else None,
        "driver": None if driver is None else driver if DRIVER_NAME.fullmatch(str(driver)) else "unknown",
    }


def described(gpu: dict[str, Any]) -> str:
    """`0000:01:00.0 [10de:2330] 3D controller, driver nvidia` (or `no driver bound`)."""
    device = f" [10de:{gpu['device'][2:]}]" if gpu["device"] else ""
    kind = CLASS_NAMES.get((gpu["class_code"] or "")[:6], "display controller")
    bound = f"driver {gpu['driver']}" if gpu["driver"] else "no driver bound"
    return f"{gpu['address']}{device} {kind}, {bound}"


def _evidence(state: NoGpu, devices: dict[str, Any], env: dict[str, str]) -> tuple[str, ...]:
    functions = devices.get("pci_functions") or 0
    said = [described(g) for g in state.gpus[:8]]
    if not state.gpus:
        said.append(f"PCI bus: {functions} functions, no NVIDIA GPU" if functions else "PCI bus: not readable here")
    files = ", ".join(f"/dev/{f}" for f in devices.get("device_files") or [] if DEVICE_FILE.fullmatch(str(f)))
    said.append(files or "no /dev/nvidia*")
    said.append(f"container: {state.container}" if state.container else "not in a container")
    said += [
        f"{name}={env[name]!r}" for name in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES") if name in env
    ]
    return tuple(said)


def finding(state: NoGpu, status: str, env: dict[str, str]) -> tuple[str, Remediation]:
    """The summary and the cure of the cause that holds. "<INSTALL>" in the commands stands for the driver
    install for this node's distribution and torch (checks/driver.py fills it in)."""
    return FINDINGS[state.case](state, status, env)


def _no_device(state: NoGpu, status: str, env: dict[str, str]) -> tuple[str, Remediation]:
    where = " (this container sees its host's PCI bus: the host has none either)" if state.container else ""
    slurm = any(name in env for name in SLURM)
    commands = [
        "lspci -nn | grep -i nvidia  # empty: no NVIDIA GPU on this machine",
        "grep -l 0x10de /sys/bus/pci/devices/*/vendor  # the same where lspci is not installed",
    ]
    if slurm:
        commands += [
            "scontrol show job $SLURM_JOB_ID | grep -iE 'gres|tres'  # the GPUs the job asked for",
            "srun --gpus-per-node=N ...  # N: the GPUs each node gives the job",
        ]
    return (
        f"no NVIDIA device on this machine: the PCI bus lists no NVIDIA GPU and there is no /dev/nvidia*{where}",
        Remediation(
            "Nothing to install here: a driver needs a GPU to drive. The job asked for no GPU or landed on a node "
            "without one: run it where the GPUs are, or ask the scheduler for them (Slurm: --gpus-per-node; "
            "Kubernetes: a nvidia.com/gpu limit in the pod's resources).",
            commands,
        ),
    )


def _no_driver_bound(state: NoGpu, status: str, env: dict[str, str]) -> tuple[str, Remediation]:
    drivers = {g["driver"] for g in state.gpus}
    shown = "; ".join(described(g) for g in state.gpus[:2])
    more = f"; and {len(state.gpus) - 2} more" if len(state.gpus) > 2 else ""
    where = " (on this container's host)" if state.container else ""
    some = "an NVIDIA GPU is" if len(state.gpus) == 1 else f"{len(state.gpus)} NVIDIA GPUs are"
    them = "it" if len(state.gpus) == 1 else "them"
    summary = f"{some} on the PCI bus but no NVIDIA driver is bound to {them}{where}: {shown}{more}"
    install = ["<INSTALL>"] if status == "library-not-found" else []
    if state.container:
        cure = Remediation(
            "The GPU's driver belongs on the host, not in this container: install NVIDIA's driver there and load "
            "it (blacklisting nouveau first where it holds the GPU), then start the container with its GPUs.",
            [
                "lspci -nnk -d 10de:  # on the host: the driver that holds each GPU",
                "sudo modprobe nvidia  # on the host, once NVIDIA's driver is installed there",
            ],
        )
    elif "nouveau" in drivers:
        first = "install NVIDIA's driver, then " if install else ""
        cure = Remediation(
            f"nouveau, the open-source driver, holds the GPU, so NVIDIA's cannot: {first}"
            f"{NOUVEAU_CURE.why[0].lower()}{NOUVEAU_CURE.why[1:]}",
            [*install, *NOUVEAU_CURE.commands],
        )
    elif "vfio-pci" in drivers:
        cure = Remediation(
            "vfio-pci holds the GPU for passthrough to a virtual machine, so no driver here can use it: train "
            "inside that virtual machine, or give the GPU back to this host (take its ids out of vfio-pci.ids, "
            "then reboot).",
            [
                "lspci -nnk -d 10de:",
                "grep -s vfio /proc/cmdline /etc/modprobe.d/*.conf  # where vfio-pci is told to take the GPU",
            ],
        )
    else:
        cure = Remediation(
            "No NVIDIA driver is loaded for the GPU: install NVIDIA's driver where it is missing, and load it.",
            [*install, "sudo modprobe nvidia", "sudo dmesg | grep -iE 'nvidia|nvrm'"],
        )
    return summary, cure


def _container_without_gpus(state: NoGpu, status: str, env: dict[str, str]) -> tuple[str, Remediation]:
    if state.gpu_files:
        why = "its /dev/nvidia* are here but not the driver's libraries: the NVIDIA runtime did not start it"
    elif state.gpus:
        why = f"the host's GPUs are on the PCI bus ({described(state.gpus[0])}) but none was given to it"
    else:
        why = "no /dev/nvidia* and no NVIDIA driver library in it"
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    said = f"; NVIDIA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    summary = f"this container was started without GPU access: {why}{said}"
    asked = (
        "A container gets the GPUs, and the driver's libraries, from the NVIDIA Container Toolkit on the host, and "
        "only when it asks: "
    )
    if state.container in KUBERNETES:
        return summary, Remediation(
            f"{asked}a pod asks with a nvidia.com/gpu limit in its container's resources (limits: nvidia.com/gpu: "
            "N), on a node where the NVIDIA device plugin offers GPUs, and runs under the NVIDIA runtime "
            "(runtimeClassName: nvidia where containerd's default runtime is runc).",
            [
                "kubectl describe nodes | grep -i nvidia.com/gpu  # the nodes that offer GPUs, and how many",
                "kubectl get runtimeclass nvidia  # it must exist where the pod needs runtimeClassName: nvidia",
            ],
        )
    return summary, Remediation(
        f"{asked}Docker with --gpus all; Docker Compose with a device reservation under deploy.resources."
        "reservations.devices (driver: nvidia, count: all, capabilities: [gpu]; the 2.3 file format: runtime: "
        "nvidia); Podman with the toolkit's CDI device (--device nvidia.com/gpu=all); Kubernetes with a "
        "nvidia.com/gpu limit. Where the host has no toolkit, install it (nvidia-container-toolkit) and register "
        "its runtime.",
        [
            "docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all IMAGE  # IMAGE: the image it runs",
            "docker info | grep -i runtimes  # on the host: nvidia must be listed",
            "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker  # on the host",
            "podman run --rm --device nvidia.com/gpu=all --security-opt=label=disable IMAGE nvidia-smi -L  # Podman: "
            "the CDI spec comes from sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml",
        ],
    )


LIBRARIES = {"compute": "libcuda", "utility": "libnvidia-ml"}


def _container_without_capabilities(state: NoGpu, status: str, env: dict[str, str]) -> tuple[str, Remediation]:
    value = env.get("NVIDIA_DRIVER_CAPABILITIES")
    lacking = " and ".join(state.lacking)
    files = ", ".join(f"/dev/{f}" for f in state.gpu_files[:4])
    return (
        f"this container has the GPU devices ({files}) but NVIDIA_DRIVER_CAPABILITIES={value!r} leaves out "
        f"{lacking}: the NVIDIA runtime mounted no {' and no '.join(LIBRARIES[c] for c in state.lacking)}",
        Remediation(
            "The NVIDIA runtime mounts only the driver libraries of the capabilities the container asks for: CUDA "
            "needs compute, NVML and nvidia-smi need utility. Start it again with both (Docker Compose: "
            "capabilities: [gpu, compute, utility]; Kubernetes: NVIDIA_DRIVER_CAPABILITIES=compute,utility in the "
            "container's env).",
            [
                "docker run --gpus 'all,\"capabilities=compute,utility\"' IMAGE  # IMAGE: the image it runs",
                "docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility IMAGE",
            ],
        ),
    )


FINDINGS = {
    NO_DEVICE: _no_device,
    NO_DRIVER_BOUND: _no_driver_bound,
    CONTAINER_WITHOUT_GPUS: _container_without_gpus,
    CONTAINER_WITHOUT_CAPABILITIES: _container_without_capabilities,
}
