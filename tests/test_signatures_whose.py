"""Issue 49's signatures on their fixtures: whose memory an out-of-memory message's own figures show, and the
messages of nvcc, NCCL's older shared memory, torch's DataLoader, flash-attn and vLLM, each with its cure.

Each line is as its emitter prints it (the format string the entry's `source` names); the out-of-memory fixtures
are real pastes (tests/fixtures/pastes/program/SOURCES.md) and open cases of the corpus (never sealed ones).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import FIXTURES

from gpudoctor.paste import cures, read, signatures

PROGRAM = FIXTURES / "pastes" / "program"
CORPUS = FIXTURES / "corpus"
NEW_FILES = ("memory.toml", "toolkit.toml", "node.toml")


def ids(text: str) -> set[str]:
    return {s["id"] for s in read(text).signatures}


def whose(text: str) -> set[str]:
    """The memory.toml verdicts of torch's out-of-memory lines in `text`."""
    derived = {"cuda-out-of-memory-held-elsewhere", "cuda-out-of-memory-program-size", "cuda-out-of-memory-fragmented"}
    return ids(text) & derived


@pytest.mark.parametrize(
    ("paste", "expected"),
    [
        # 1.72 GiB reserved by this process on a 39.59 GiB GPU, 474.62 MiB free: others hold the rest
        (PROGRAM / "oom-reserved-in-total-wording-other-processes-hold-the-40-gib-a100.txt", "held-elsewhere"),
        # this process holds 23.60 of 23.65 GiB
        (PROGRAM / "oom-newest-wording-22-mib-on-full-23.65-gib-gpu-this-process-uses-it-all.txt", "program-size"),
        # 22.78 GiB asked with 12.73 free and 9.35 reserved-but-unallocated: larger than both, not fragmentation
        (
            PROGRAM / "oom-newest-wording-22.78-gib-requested-31.47-gib-gpu-this-process-expandable-segments.txt",
            "program-size",
        ),
        # open corpus cases: 686 MiB reserved of 47.54 GiB, 4.88 MiB free; 2.75 GiB reserved of 10.76 GiB
        (CORPUS / "oom-gpu0-busy-shared-server-reid" / "paste.txt", "held-elsewhere"),
        (CORPUS / "oom-other-program-holds-gpu-cyclegan" / "paste.txt", "held-elsewhere"),
        # torch 1.0-1.3's "cached" wording: 435.61 MiB allocated + 26.39 MiB cached of a 1 GiB GPU
        (CORPUS / "oom-1gb-gpu-pytorch-examples" / "paste.txt", "program-size"),
        (CORPUS / "oom-batch-too-large-dcrnn" / "paste.txt", "program-size"),
    ],
    ids=lambda v: v.parent.name if isinstance(v, Path) and v.name == "paste.txt" else str(v)[-50:],
)
def test_an_out_of_memory_message_is_read_by_whose_memory_its_figures_show(paste: Path, expected: str) -> None:
    text = paste.read_text(encoding="utf-8")
    assert "cuda-out-of-memory" in ids(text)  # the message itself stays a sighting of its own
    assert whose(text) == {f"cuda-out-of-memory-{expected}"}


H100_HOLDING = FIXTURES / "real" / "h100-2026-11-26" / "busy" / "nvml-other-process-holding-memory-idle.json"


def test_the_allowance_outside_torchs_count_is_the_measured_context_rounded_up() -> None:
    """A process holding 60 GiB of tensors on the H100 reads 776 MiB more in NVML (its CUDA context and libraries):
    the allowance covers it, and is not more than twice it."""
    held = json.loads(H100_HOLDING.read_text(encoding="utf-8"))[0]["compute_procs"][0]["usedGpuMemory"]
    outside = held - 60 * 2**30
    assert 700 * 2**20 < outside < signatures.OUTSIDE_ALLOCATOR < 2 * outside


NEW = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.06 GiB is free. Including non-PyTorch memory, this process has {mine} memory in use. Of the "
    "allocated memory {allocated} is allocated by PyTorch, and {unallocated} is reserved by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    ("mine", "allocated", "unallocated", "expected"),
    [
        ("3.00 GiB", "2.50 GiB", "20.00 MiB", {"cuda-out-of-memory-held-elsewhere"}),
        ("78.00 GiB", "60.00 GiB", "17.50 GiB", {"cuda-out-of-memory-fragmented"}),
        ("78.00 GiB", "77.00 GiB", "512.00 MiB", {"cuda-out-of-memory-program-size"}),
    ],
)
def test_the_newest_wording_decides_between_another_process_fragmentation_and_size(
    mine: str, allocated: str, unallocated: str, expected: set[str]
) -> None:
    assert whose(NEW.format(mine=mine, allocated=allocated, unallocated=unallocated)) == expected


# Inside a container NVML gives the host's PIDs, so torch lists its own process as "Process N" too and says no "this
# process": its allocator's figures (allocated + reserved but unallocated) are its own hold then.
LISTED = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 6.75 MiB is free. {listed}Of the allocated memory {allocated} is allocated by PyTorch, and 223.07 MiB "
    "is reserved by PyTorch but unallocated."
)


@pytest.mark.parametrize(
    ("listed", "allocated", "expected"),
    [
        ("Process 224843 has 79.13 GiB memory in use. ", "78.41 GiB", {"cuda-out-of-memory-program-size"}),
        (
            "Process 101 has 70.00 GiB memory in use. Process 224843 has 9.13 GiB memory in use. ",
            "8.41 GiB",
            {"cuda-out-of-memory-held-elsewhere"},
        ),
    ],
)
def test_a_listing_without_this_process_reads_the_allocators_own_figures(
    listed: str, allocated: str, expected: set[str]
) -> None:
    assert whose(LISTED.format(listed=listed, allocated=allocated)) == expected


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",  # no figures
        # 9.28 GiB free for a 12.50 MiB request: the figures do not explain the failure
        "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
        "already allocated; 9.28 GiB free; 4.68 MiB cached)",
    ],
)
def test_figures_that_do_not_decide_leave_the_plain_message(line: str) -> None:
    assert "cuda-out-of-memory" in ids(line) and not whose(line)


def test_each_verdict_prints_its_own_cure() -> None:
    table = signatures.table()
    held = " ".join(c for c in table["cuda-out-of-memory-held-elsewhere"].fix)
    assert "nvidia-smi --query-compute-apps" in held and "CUDA_VISIBLE_DEVICES" in held
    assert "batch size" in table["cuda-out-of-memory-program-size"].fix[0]
    assert "expandable_segments:True" in table["cuda-out-of-memory-fragmented"].fix[0]
    assert table["cuda-out-of-memory-program-size"].owner == "program.error"  # the program's, never the machine's
    assert table["cuda-out-of-memory-fragmented"].owner == "program.error"


# One line per new entry, as its emitter prints it (the format string its `source` names).
LINES = [
    (  # vLLM's worker at start (vllm/v1/worker/gpu_worker.py init_device): the GPU's free memory below its share
        "ValueError: Free memory on device cuda:0 (3.27/15.98 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 14.39 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "vllm-free-memory-below-utilization",
        {"free": "3.27", "total": "15.98", "share": "0.9"},
    ),
    (  # TF 1.x gpu_device.cc's device line, its HumanReadableNumBytes figures: 11.17 GiB, of which 304.31 MiB free
        "totalMemory: 11.17GiB freeMemory: 304.31MiB",
        "tensorflow-gpu-held-at-start",
        {"total": "11.17GiB", "free": "304.31MiB"},
    ),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_89'", "nvcc-unsupported-gpu-architecture", {"arch": "89"}),
    (
        "2019-07-11 12:42:11.226602: W tensorflow/compiler/xla/service/platform_util.cc:240] unable to create "
        "StreamExecutor for CUDA:0: failed initializing StreamExecutor for CUDA device ordinal 0: Internal: failed "
        "call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory reported: 11523260416",
        "cuda-context-out-of-memory",
        {},
    ),
    (
        "error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared",
        "dataloader-out-of-shared-memory",
        {},
    ),
    (
        "node1:27106:27302 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
        "nccl-shm-no-space",
        {},
    ),
    (
        "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
        "nccl-shm-open-denied",
        {},
    ),
    (
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "program-tensors-on-different-devices",
        {"first": "cuda:0", "second": "cpu"},
    ),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "flash-attention-needs-ampere", {}),
    # torch/csrc/distributed/c10d/socket.cpp SocketConnectOp's two formats, with a host and a port filled in
    (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
        "(node0, 29500). The client socket has failed to connect to node0:29500 (errno: 110 - Connection timed out).",
        "c10d-client-connect-failed",
        {"host": "node0", "port": "29500"},
    ),
    (
        "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
        "(10.0.0.1, 29400).",
        "c10d-client-connect-failed",
        {"host": "10.0.0.1", "port": "29400"},
    ),
    # torch/utils/data/dataloader.py _check_worker_number_rationality's warning, numbers filled in
    (
        "UserWarning: This DataLoader will create 32 worker processes in total. Our suggested max number of worker "
        "in current system is 8, which is smaller than what this DataLoader is going to create. Please be aware "
        "that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number "
        "to avoid potential slowness/freeze if necessary.",
        "dataloader-too-many-workers",
        {"created": "32", "suggested": "8"},
    ),
    # torch's own text (aten/src/ATen/native/TensorAdvancedIndexing.cpp, index_select on the CPU under F.embedding)
    ("IndexError: index out of range in self", "embedding-index-out-of-range", {}),
    (
        "UserWarning: The dataloader, val dataloader 0, does not have many workers which may be a bottleneck. "
        "Consider increasing the value of the `num_workers` argument` (try 32 which is the number of cpus on this "
        "machine) in the `DataLoader` init to improve performance.",
        "lightning-dataloader-few-workers",
        {"cpus": "32"},
    ),
    (
        "2024-02-10T10:01:02.345Z ERROR download: text_generation_launcher: Download process was signaled to "
        "shutdown with signal 7: ",
        "tgi-process-sigbus",
        {"process": "Download"},
    ),
    (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU "
        "has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for "
        "example: --dtype=half.",
        "vllm-bfloat16-unsupported",
        {"gpu": "Tesla T4", "capability": "7.5"},
    ),
    (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
        "in KV cache (21360). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        "vllm-context-exceeds-kv-cache",
        {"max_len": "32768", "kv_tokens": "21360"},
    ),
    ("RuntimeError: copy_if failed to synchronize: device-side assert triggered", "cuda-device-side-assert", {}),
    ("RuntimeError: CUDA error (10): invalid device ordinal", "cuda-invalid-device-ordinal", {}),
    (
        "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.",
        "cuda-home-not-set",
        {},
    ),
    (
        "    PyTorch 2.1.2+cu121 with CUDA 1201 (you have 2.1.2+cpu)",
        "xformers-built-for-cuda-torch-beside-cpu-torch",
        {"built": "2.1.2+cu121", "torch_version": "2.1.2"},
    ),
    (
        "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
        "nvidia-smi-device-handle-failed",
        {"pci": "0000:0B:00.0", "reason": "Unknown Error"},
    ),
    (
        "File: /var/lib/dkms/nvidia/390.48/source/dkms.conf does not exist.",
        "dkms-source-tree-missing",
        {"tree": "/var/lib/dkms/nvidia/390.48", "module": "nvidia", "version": "390.48"},
    ),
    (
        "Resource exhausted: OOM when allocating tensor with shape[8,512,512] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        "tensorflow-oom-allocating-tensor",
        {"shape": "8,512,512", "dtype": "float", "gpu": "0", "allocator": "GPU_0_bfc"},
    ),
    ("ResourceExhaustedError" + " " * 20 + "Traceback (most recent call last)", "tensorflow-resource-exhausted", {}),
    (
        "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.5.0-14-generic",
        "modprobe-module-not-found",
        {"module": "nvidia", "kernel": "6.5.0-14-generic"},
    ),
    (
        "Error! Your kernel headers for kernel 3.10.0-957.el7.x86_64 cannot be found at "
        "/lib/modules/3.10.0-957.el7.x86_64/build or /lib/modules/3.10.0-957.el7.x86_64/source.",
        "dkms-kernel-headers-missing",
        {"kernel": "3.10.0-957.el7.x86_64"},
    ),
    (
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
        "Driver is properly installed and present in your system.",
        "nvidia-smi-libnvidia-ml-not-in-ld-cache",
        {},
    ),
    (  # torch/amp/grad_scaler.py's warning where torch.cuda.is_available() is False
        "UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
        "torch-cuda-not-available",
        {},
    ),
    (  # Compose v2's prefix (service-1) before torch's no-driver error (c10/cuda/CUDAFunctions.cpp)
        "vllm-1  | RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
        "installed a driver from http://www.nvidia.com/Download/index.aspx",
        "compose-service-no-nvidia-driver",
        {"service": "vllm"},
    ),
    (  # Compose v1's prefix (service_1), a service name with dashes
        "text-gen_1      | RuntimeError: Found no NVIDIA driver on your system.",
        "compose-service-no-nvidia-driver",
        {"service": "text-gen"},
    ),
    (
        "nvidia-docker | 2016/04/09 00:07:59 Error: unsupported CUDA version: 7.5 < 6.5",
        "nvidia-docker-unsupported-cuda-version",
        {"image_cuda": "7.5", "driver_cuda": "6.5"},
    ),
    (  # NVIDIA's CUDA samples, helper_cuda.h check(): "CUDA error at %s:%d code=%d(%s) \"%s\"", at a synchronize
        'CUDA error at main.cu:196 code=999(cudaErrorUnknown) "cudaDeviceSynchronize()"',
        "cuda-unknown-error-after-kernel",
        {"code": "cudaErrorUnknown", "number": "999"},
    ),
    (  # Windows' System log, source nvlddmkm, event 4101
        "Display driver nvlddmkm stopped responding and has successfully recovered.",
        "windows-display-driver-reset",
        {},
    ),
]


@pytest.mark.parametrize(("line", "sid", "values"), LINES, ids=[s for _, s, _ in LINES])
def test_each_new_message_gives_its_signature_and_values(line: str, sid: str, values: dict[str, str]) -> None:
    sighted = [s for s in read(line).signatures if s["id"] == sid]
    assert sighted and sighted[0]["values"] == values


def test_every_entry_of_the_new_files_has_a_line_or_a_fixture_and_cites_its_source() -> None:
    covered = {sid for _, sid, _ in LINES} | {
        "cuda-out-of-memory-held-elsewhere",
        "cuda-out-of-memory-program-size",
        "cuda-out-of-memory-fragmented",
    }
    new = {sid: s for sid, s in signatures.table().items() if s.file in NEW_FILES}
    assert set(new) <= covered
    for signature in new.values():
        assert signature.source and (signature.fix or signature.fix_from == "owner"), signature.id


def fixes(sid: str, values: dict[str, str]) -> list[str]:
    built, refused = signatures.table()[sid].fixes(values)
    assert not refused
    return [str(c) for c in built]


def test_the_context_and_ordinal_and_kv_cache_fixes_build() -> None:
    assert any("--query-compute-apps" in c for c in fixes("cuda-context-out-of-memory", {}))
    ordinal = fixes("cuda-invalid-device-ordinal", {})
    assert ordinal[0].startswith("nvidia-smi -L") and "CUDA_VISIBLE_DEVICES" in ordinal[1]
    assert fixes("vllm-context-exceeds-kv-cache", {"kv_tokens": "21360"})[0].startswith(
        "vllm serve ... --max-model-len 21360"
    )
    assert "num_classes" in fixes("cuda-device-side-assert", {})[0]


@pytest.mark.parametrize(
    ("arch", "toolkit", "last"),
    [
        (75, "10.0", False),
        (86, "11.1", False),
        (89, "11.8", False),
        (90, "11.8", False),
        (120, "12.8", False),
        (35, "11.8", True),
        (60, "12.9", True),
    ],
)
def test_the_toolkit_that_compiles_for_an_architecture(arch: int, toolkit: str, last: bool) -> None:
    assert cures.toolkit_for_arch(arch) == (toolkit, last)


def test_the_node_entries_build_their_commands_from_the_line() -> None:
    handle = fixes("nvidia-smi-device-handle-failed", {"pci": "0000:0B:00.0"})
    assert handle[1].startswith("sudo lspci -vvv -s 0000:0B:00.0") and "reseat" in handle[1]
    dkms = fixes("dkms-source-tree-missing", {"tree": "/var/lib/dkms/nvidia/390.48"})
    assert dkms[0].startswith("sudo rm -r /var/lib/dkms/nvidia/390.48") and dkms[1].startswith("sudo dkms autoinstall")
    cpu = cures.cure("xformers-built-for-cuda-torch-beside-cpu-torch", {}, {})
    assert cpu is not None and any("download.pytorch.org/whl/cu" in str(c) for c in cpu.commands)


def test_nvccs_unsupported_architecture_gets_the_toolkit_that_has_it() -> None:
    cured = cures.cure("nvcc-unsupported-gpu-architecture", {"arch": "86"}, {})
    assert cured is not None and "CUDA 11.1 is the first toolkit" in cured.why
    assert any("CUDA_HOME=/usr/local/cuda-11.1" in str(c) for c in cured.commands)
    unknown = cures.cure("nvcc-unsupported-gpu-architecture", {"arch": "999"}, {})
    assert unknown is not None and "nvcc --list-gpu-arch" in unknown.commands


def test_no_driver_outside_a_compose_log_is_not_a_compose_services() -> None:
    """torch's no-driver error alone, or after a table's column bar, names no Compose service."""
    for line in (
        "RuntimeError: Found no NVIDIA driver on your system.",
        "| 0 | RuntimeError: Found no NVIDIA driver on your system.",
        "2024-01-02 10:00:00 | ERROR | Found no NVIDIA driver on your system.",
    ):
        assert "compose-service-no-nvidia-driver" not in ids(line)


@pytest.mark.parametrize(
    "line",
    [
        "totalMemory: 11.17GiB freeMemory: 11.10GiB",  # a GPU free when TensorFlow started
        "totalMemory: 15.90GiB freeMemory: 8.20GiB",  # less than half held: the figures do not decide
        "totalMemory: 11.17GiB",
    ],
)
def test_tensorflow_start_line_with_its_gpu_mostly_free_blames_no_one(line: str) -> None:
    assert not [s for s in read(line).signatures if s["id"] == "tensorflow-gpu-held-at-start"]


def test_vllms_short_free_memory_at_start_names_the_other_processes_and_its_share_flag() -> None:
    """vLLM reserves --gpu-memory-utilization of the whole GPU at start (engine arguments): with less free than that,
    other processes hold the rest; the cure ends them or asks for a share below what is free."""
    made = fixes("vllm-free-memory-below-utilization", {"free": "3.27", "total": "15.98", "share": "0.9"})
    assert made[0].startswith("nvidia-smi --query-compute-apps=")
    assert any(c.startswith("vllm serve ... --gpu-memory-utilization") and "3.27" in c for c in made)
