"""The error-signature table of Python tracebacks and warnings (gpudoctor/data/signatures/errors.toml) read by
the signature engine: every real sample of tests/fixtures/pastes/errors/ and issues/ with exactly the
signatures and facts it holds, one line per entry as its emitter prints it, lines that must not match, the
table's own rules, and hostile input."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES
from helpers.growth import LINEAR, K, growth

from gpudoctor import paste
from gpudoctor.command import SLOT
from gpudoctor.model import Result, Status
from gpudoctor.paste import evidence, inputs, signatures
from gpudoctor.paste.found import Found

PASTES = FIXTURES / "pastes"
TABLE = "errors.toml"


def ours() -> dict[str, signatures.Signature]:
    """The entries of errors.toml (other files of the table are other tests' business)."""
    return {k: s for k, s in signatures.table().items() if s.file == TABLE}


def sighted(found: Found) -> list[tuple[str, int]]:
    """(id, 1-based line) of every errors.toml signature found, in order."""
    mine = ours()
    return [(s["id"], s["line"]) for s in found.signatures if s["id"] in mine]


def engine(text: str) -> Found:
    """The signature engine alone over `text`, split as gpudoctor.paste.read splits a paste."""
    found = Found.of(text)
    signatures.read(found)
    return found


def fact(found: Found, path: str) -> Any:
    node: Any = found.facts
    for key in path.split("."):
        node = node[key]
    return node


# Every real sample: the errors.toml signatures it holds (id, line), and the facts they carry.
FIXTURE_SIGNATURES: dict[str, tuple[list[tuple[str, int]], dict[str, Any]]] = {
    "errors/cuda-driver-initialization-failed-runtimeerror.txt": ([("cuda-driver-init-failed", 2)], {}),
    "errors/cuda-driver-initialization-failed-userwarning-torch-1.9-conda.txt": ([("cuda-driver-init-failed", 1)], {}),
    "errors/cuda-error-802-bandwidthtest-fabricmanager-missing.txt": ([("cuda-error-802-fabric-not-ready", 6)], {}),
    "errors/cuda-error-802-hf-jobs-h200-runtimeerror.txt": ([("cuda-error-802-fabric-not-ready", 9)], {}),
    "errors/cuda-error-802-system-not-yet-initialized-azure-a100-test-log.txt": (
        [("cuda-error-802-fabric-not-ready", 1)],
        {},
    ),
    "errors/cuda-error-802-thcudacheck-torch-1.4-conda.txt": ([("cuda-error-802-fabric-not-ready", 1)], {}),
    "errors/cuda-error-804-forward-compat-userwarning-conda-build.txt": ([("cuda-error-804-forward-compat", 1)], {}),
    "errors/cuda-error-804-vllm-engine-log-prefixed.txt": ([("cuda-error-804-forward-compat", 1)], {}),
    "errors/cuda-error-804-warning-and-runtimeerror-driver-470.txt": (
        [("cuda-error-804-forward-compat", 1), ("cuda-error-804-forward-compat", 2)],
        {},
    ),
    "errors/cuda-error-999-unknown-thcudacheck-torch-1.3.1.txt": (
        [("cuda-unknown-error-at-init", 1), ("cuda-unknown-error-at-init", 6)],
        {},
    ),
    "errors/cuda-unknown-error-after-suspend-userwarning-torch-1.13.txt": ([("cuda-unknown-error-at-init", 1)], {}),
    "errors/cudnn-version-incompatibility-ld-library-path-torch-1.13-conda.txt": (
        [("cudnn-version-incompatible", 9)],
        {},
    ),
    "errors/cudnn-version-incompatibility-linked-against-torch-1.12.0.txt": ([("cudnn-version-incompatible", 7)], {}),
    "errors/cudnn-version-incompatibility-torch-2.0.1-cu118-one-line.txt": ([("cudnn-version-incompatible", 1)], {}),
    "errors/cudnn-version-mismatch-7102-vs-7600-old-wording.txt": (
        [("cudnn-version-incompatible", 1)],
        {"torch.cudnn.version": 7600},
    ),
    "errors/driver-too-old-found-10010-userwarning-torch-1.7.1.txt": (
        [("driver-too-old", 1)],
        {"nvml.cuda_driver_version": 10010},
    ),
    "errors/driver-too-old-found-11000-ngc-container-userwarning.txt": (
        [("driver-too-old", 1)],
        {"nvml.cuda_driver_version": 11000},
    ),
    "errors/driver-too-old-found-11040-runtimeerror-with-smi-header.txt": (
        [("driver-too-old", 1)],
        {"nvml.cuda_driver_version": 11040},
    ),
    "errors/driver-too-old-found-9000-assertionerror-torch-1.0.txt": (
        [("driver-too-old", 7)],
        {"nvml.cuda_driver_version": 9000},
    ),
    # Cut before the message: a bare traceback is no signature.
    "errors/found-no-nvidia-driver-colab-cpu-runtime-partial.txt": ([], {}),
    "errors/found-no-nvidia-driver-one-line.txt": ([("no-nvidia-driver", 1)], {}),
    "errors/nccl-error-2-unhandled-system-error-torch-2.4-rank-prefixed.txt": ([("c10d-nccl-system-error", 6)], {}),
    "errors/nccl-error-unhandled-cuda-error-2.4.8.txt": (
        [("c10d-nccl-cuda-error", 1)],
        {"torch.nccl.version": "2.4.8"},
    ),
    "errors/nccl-error-unhandled-system-error-2.7.8-ddp-verify-model.txt": (
        [("c10d-nccl-system-error", 10)],
        {"torch.nccl.version": "2.7.8"},
    ),
    "errors/nccl-error-unhandled-system-error-conda-build-path-2.7.8.txt": (
        [("c10d-nccl-system-error", 1)],
        {"torch.nccl.version": "2.7.8"},
    ),
    "errors/no-kernel-image-rnn-flatten-parameters-torch1.6-cu101-a40.txt": ([("cuda-no-kernel-image", 14)], {}),
    "errors/no-kernel-image-sm86-warning-then-traceback-torch-sm37-70.txt": (
        [("torch-gpu-not-compatible", 2), ("cuda-no-kernel-image", 16)],
        {},
    ),
    "errors/no-kernel-image-torch-2.7.1-cu128-rtx2060-dsa-hint.txt": ([("cuda-no-kernel-image", 1)], {}),
    "errors/shm-bus-error-dataloader-worker-killed-newer-wording.txt": ([("dataloader-killed-bus-error", 1)], {}),
    # The same bus-error line three times is one sighting (Found keeps a line's text once per signature).
    "errors/shm-bus-error-dataloader-worker-killed-torch-1.3.txt": (
        [("dataloader-bus-error-shm", 3), ("dataloader-killed-bus-error", 15)],
        {},
    ),
    "errors/shm-unable-to-write-to-file-thallocator-torch-0.4.txt": ([("shm-unable-to-write", 1)], {}),
    "errors/shm-unable-to-write-to-file-torch-share-fd-with-bus-error.txt": (
        [("dataloader-bus-error-shm", 1), ("shm-unable-to-write", 10)],
        {},
    ),
    "errors/sm120-not-compatible-warning-rtx5060ti-windows.txt": ([("torch-gpu-not-compatible", 2)], {}),
    "errors/sm86-not-compatible-warning-a6000-with-context.txt": ([("torch-gpu-not-compatible", 2)], {}),
    # The raise line quoted in the traceback and the AssertionError both say it.
    "errors/torch-not-compiled-with-cuda-check-driver-torch-1.3.txt": (
        [("torch-not-compiled-with-cuda", 2), ("torch-not-compiled-with-cuda", 3)],
        {},
    ),
    "errors/torch-not-compiled-with-cuda-windows-conda-module-cuda-partial.txt": ([], {}),
    "errors/torchvision-nms-does-not-exist-abstract-impl-torch-2.3.txt": ([("torchvision-operator-missing", 14)], {}),
    "errors/torchvision-nms-does-not-exist-register-fake-torch-2.4-partial.txt": ([], {}),
    "errors/undefined-symbol-cudnnSetConvolutionGroupCount-source-build-0.3.txt": ([("torch-undefined-symbol", 1)], {}),
    "errors/undefined-symbol-extension-c10-abi-torch-2.3.txt": ([("extension-undefined-symbol", 7)], {}),
    "errors/undefined-symbol-libtorch-cuda-cudaLaunchKernelExC-libcudart-11.txt": (
        [("torch-undefined-symbol", 10)],
        {},
    ),
    "errors/undefined-symbol-libtorch-so-1-nightly-1.0-and-libcurand-missing.txt": (
        [("torch-undefined-symbol", 6)],
        {},
    ),
    # The opening post's only log is a screenshot; the kernel-log sample is kernel.toml's.
    "issues/nccl-tests-206-ibv-reg-mr-iova2-cannot-allocate-memory-ulimit-l.txt": ([], {}),
    "issues/nvidia-docker-182-api-mismatch-after-driver-upgrade-needs-reboot.txt": ([], {}),
    "issues/pytorch-48200-nvrtc-invalid-gpu-architecture-rtx3090-torch-1.7.0-cu110.txt": (
        [("nvrtc-invalid-gpu-architecture", 9)],
        {},
    ),
    "issues/sim2real-axs-5-error-804-docker-rtx3090-driver-525.txt": ([("cuda-error-804-forward-compat", 3)], {}),
    "issues/yuan2-65-driver-too-old-11000-ngc-container-cuda-12.1.txt": (
        [("driver-too-old", 1)],
        {"nvml.cuda_driver_version": 11000},
    ),
}


def test_every_error_and_issue_sample_is_listed() -> None:
    on_disk = {f"{p.parent.name}/{p.name}" for kind in ("errors", "issues") for p in (PASTES / kind).glob("*.txt")}
    assert on_disk == set(FIXTURE_SIGNATURES)


@pytest.mark.parametrize("name", sorted(FIXTURE_SIGNATURES))
def test_sample_holds_exactly_its_signatures_and_facts(name: str) -> None:
    expected, facts = FIXTURE_SIGNATURES[name]
    found = paste.read((PASTES / name).read_text(encoding="utf-8", errors="replace"))
    assert sighted(found) == expected
    for path, value in facts.items():
        assert fact(found, path) == value and type(fact(found, path)) is type(value)
        assert path not in found.conflicts
    alone = engine((PASTES / name).read_text(encoding="utf-8", errors="replace"))
    lines = {line for _, line in sighted(alone)}
    carried = {p for p, o in alone.origins.items() if o.reader == signatures.READER and o.line in lines}
    assert carried - {"torch.cuda_init_error"} == set(facts)  # the message itself, where CUDA failed to start
    if "torch.cuda_init_error" in carried:
        assert fact(alone, "torch.cuda_init_error") in {line.strip() for line in alone.lines}


def test_sample_values_name_what_the_line_says() -> None:
    """The groups a signature carries, read from the real lines."""
    cases = {
        "errors/sm86-not-compatible-warning-a6000-with-context.txt": {"gpu": "NVIDIA RTX A6000", "capability": "86"},
        "errors/sm120-not-compatible-warning-rtx5060ti-windows.txt": {
            "gpu": "NVIDIA GeForce RTX 5060 Ti",
            "capability": "120",
        },
        "errors/cudnn-version-incompatibility-ld-library-path-torch-1.13-conda.txt": {
            "compiled": "8, 5, 0",
            "runtime": "8, 4, 1",
        },
        "errors/cudnn-version-incompatibility-linked-against-torch-1.12.0.txt": {
            "compiled": "8, 3, 2",
            "runtime": "8, 0, 3",
        },
        "errors/undefined-symbol-libtorch-cuda-cudaLaunchKernelExC-libcudart-11.txt": {
            "library": "/home/anaconda3/envs/mol/lib/python3.9/site-packages/torch/lib/libtorch_cuda.so",
            "symbol": "cudaLaunchKernelExC",
        },
        "errors/undefined-symbol-extension-c10-abi-torch-2.3.txt": {
            "library": "/*/*/*/*/FRNN/frnn/_C.cpython-310-x86_64-linux-gnu.so",
            "symbol": "_ZN3c1015SmallVectorBaseIjE8grow_podEPKvmm",
        },
        "errors/shm-bus-error-dataloader-worker-killed-newer-wording.txt": {"pid": "46794"},
        "errors/torchvision-nms-does-not-exist-abstract-impl-torch-2.3.txt": {"op": "nms"},
    }
    for name, values in cases.items():
        found = engine((PASTES / name).read_text(encoding="utf-8"))
        carried = [s["values"] for s in found.signatures if s["id"] in ours() and s["values"]]
        assert carried and carried[0] == values, name


# One line per entry as its emitter prints it (from the threads and code each entry's `source` names), with
# the errors.toml signatures it must give and the values they carry.
EXAMPLES: list[tuple[str, set[str], dict[str, str]]] = [
    # transformers/training_args.py TrainingArguments.__post_init__, bf16 asked where is_torch_bf16_gpu_available()
    # is False: the suffix where CUDA is available (a pre-Ampere GPU), the bare text where it is not (older releases
    # said "You need torch>=1.10, using Ampere GPU with cuda>=11.0").
    (
        "ValueError: Your setup doesn't support bf16/gpu. You need Ampere+ GPU with cuda>=11.0",
        {"transformers-bf16-unsupported"},
        {},
    ),
    ("ValueError: Your setup doesn't support bf16/gpu.", {"transformers-bf16-unsupported"}, {}),
    # torch/distributed/distributed_c10d.py where the build has no NCCL, and ProcessGroupNCCL's constructor where the
    # process sees no GPU
    ("RuntimeError: Distributed package doesn't have NCCL built in", {"torch-nccl-not-built"}, {}),
    ("ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", {"torch-nccl-no-gpus"}, {}),
    # torch's elastic rendezvous (dynamic_rendezvous.py), ProcessGroupNCCL's id exchange through the store, and the
    # elastic agent's summary of a worker a signal ended
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", {"torchrun-rendezvous-timeout"}, {}),
    (
        "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Connection reset by peer",
        {"c10d-nccl-id-store-failed"},
        {"error": "Connection reset by peer"},
    ),
    ("  traceback : Signal 7 (SIGBUS) received by PID 1234", {"torchrun-worker-sigbus"}, {"pid": "1234"}),
    ("  traceback : Signal 9 (SIGKILL) received by PID 5678", {"torchrun-worker-sigkill"}, {"pid": "5678"}),
    # torch/serialization.py _validate_device, a GPU checkpoint where torch sees no GPU or fewer GPUs
    (
        "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If "
        "you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map "
        "your storages to the CPU.",
        {"torch-load-cuda-checkpoint-no-gpu"},
        {},
    ),
    (
        "RuntimeError: Attempting to deserialize object on CUDA device 2 but torch.cuda.device_count() is 1. Please "
        "use torch.load with map_location to map your storages to an existing device.",
        {"torch-load-cuda-device-beyond-count"},
        {"device": "2", "count": "1"},
    ),
    # TensorFlow's gpu_device.cc and XLA's cuda_dnn.cc (JAX and TensorFlow)
    (
        "2024-01-01 00:00:00.000000: W tensorflow/core/common_runtime/gpu/gpu_device.cc:2256] Cannot dlopen some GPU "
        "libraries. Please make sure the missing libraries mentioned above are installed properly if you would like to "
        "use GPU.",
        {"tensorflow-gpu-libraries-missing"},
        {},
    ),
    (
        "E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:439] Loaded runtime CuDNN library: 8.6.0 but source was "
        "compiled with: 8.9.4.  CuDNN library needs to have matching major version and version greater or equal than "
        "the one it was compiled with.",
        {"xla-cudnn-version-mismatch"},
        {"runtime": "8.6.0", "compiled": "8.9.4"},
    ),
    # torch/_inductor/exc.py (GPUTooOldForTriton, TritonMissing), triton's libcuda_dirs(), torch's extension builder
    # (cpp_extension.py), CUDAContext.cpp's device assert, nvidia-smi's infoROM warning and NVML refused by the OS
    (
        "RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler, which "
        "is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA "
        "capability 6.0",
        {"triton-gpu-too-old"},
        {"gpu": "Tesla P100-PCIE-16GB", "capability": "6.0"},
    ),
    (
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: Cannot find a working "
        "triton installation. More information on installing Triton can be found at https://github.com/openai/triton",
        {"triton-missing"},
        {},
    ),
    ("AssertionError: libcuda.so cannot found!", {"triton-libcuda-not-found"}, {}),
    ("/usr/bin/ld: cannot find -lcuda: No such file or directory", {"ld-cannot-find-libcuda"}, {}),
    (
        "RuntimeError: The current installed version of g++ (13.2.0) is greater than the maximum required version by "
        "CUDA 12.1. Please make sure to use an adequate version of g++ (>=6.0.0, <13.0).",
        {"cpp-extension-gxx-too-new"},
        {"compiler": "g++", "found": "13.2.0", "cuda": "12.1", "least": "6.0.0", "below": "13.0"},
    ),
    (
        "torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 && "
        'device < num_gpus INTERNAL ASSERT FAILED at "../aten/src/ATen/cuda/CUDAContext.cpp":50, please report a bug '
        "to PyTorch. device=1, num_gpus=1",
        {"torch-device-index-beyond-gpus"},
        {"device": "1", "gpus": "1"},
    ),
    ("WARNING: infoROM is corrupted at gpu 0000:65:00.0", {"nvidia-smi-inforom-corrupted"}, {"pci": "0000:65:00.0"}),
    ("Failed to initialize NVML: GPU access blocked by the operating system", {"nvml-blocked-by-os"}, {}),
    # aten/src/ATen/native/cudnn/Conv_v7.cpp, when every algorithm's workspace failed to allocate
    ("RuntimeError: Unable to find a valid cuDNN algorithm to run convolution", {"cudnn-no-valid-algorithm"}, {}),
    # torch's CUDABlas.cpp: TORCH_CUDABLAS_CHECK names the failed call with its operand types (a batched bf16 GEMM
    # on a pre-Ampere GPU, pytorch/pytorch#57773).
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedExFix(handle, "
        "opa, opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF, "
        "(int)ldb, strideb, (void*)&fbeta, c, CUDA_R_16BF, (int)ldc, stridec, (int)num_batches, CUDA_R_32F, "
        "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
        {"cublas-bf16-gemm-unsupported"},
        {},
    ),
    (
        "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
        "(10.1.2.3, 29500).",
        {"c10d-client-connect-failed"},
        {"host": "10.1.2.3", "port": "29500"},
    ),
    (
        "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at "
        "/pytorch/aten/src/THC/THCGeneral.cpp:51",
        {"cuda-driver-insufficient"},
        {},
    ),
    (
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
        {"libcuda-not-found"},
        {"library": "libcuda.so.1"},
    ),
    (
        "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: No such "
        "file or directory",
        {"libcuda-not-found"},
        {"library": "libcuda.so"},
    ),
    (
        "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
        "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
        "object file: no such file or directory: unknown.",
        {"libnvidia-ml-not-found"},
        {"library": "libnvidia-ml.so.1"},
    ),
    (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.",
        {"nvidia-smi-no-driver"},
        {},
    ),
    ("Failed to initialize NVML: Driver/library version mismatch", {"nvml-driver-library-mismatch"}, {}),
    ("root@098b49afe624:/# Failed to initialize NVML: Unknown Error", {"nvml-unknown-error-container"}, {}),
    (
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
        {"docker-no-gpu-runtime"},
        {},
    ),
    (
        "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:611: UserWarning: Can't initialize NVML",
        {"nvml-cannot-initialize"},
        {},
    ),
    (
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / "
        "cuda driver combination",
        {"cuda-error-803-driver-mismatch"},
        {},
    ),
    ("-> system not yet initialized", {"cuda-error-802-fabric-not-ready"}, {}),
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", {"cuda-no-device"}, {}),
    ("RuntimeError: No CUDA GPUs are available", {"torch-no-cuda-gpus"}, {}),
    (
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 34: CUDA driver is a stub library",
        {"cuda-stub-library"},
        {},
    ),
    ("RuntimeError: PyTorch was compiled without CUDA support", {"torch-compiled-without-cuda"}, {}),
    (
        "RuntimeError: cuda runtime error (46) : all CUDA-capable devices are busy or unavailable at "
        "/opt/conda/conda-bld/pytorch_1503970438496/work/torch/lib/THC/generic/THCStorage.cu:66",
        {"cuda-devices-busy"},
        {},
    ),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", {"cuda-devices-busy"}, {}),
    ("RuntimeError: CUDA error: invalid device ordinal", {"cuda-invalid-device-ordinal"}, {}),
    (
        "    Found GPU0 NVIDIA GeForce GTX 1080 Ti which is of cuda capability 6.1.",
        {"torch-gpu-too-old"},
        {"index": "0", "gpu": "NVIDIA GeForce GTX 1080 Ti", "capability": "6.1"},
    ),
    (
        "Found GPU1 NVIDIA GeForce GTX 1080 Ti which is of compute capability (CC) 6.1.",
        {"torch-gpu-unsupported-cc"},
        {"index": "1", "gpu": "NVIDIA GeForce GTX 1080 Ti", "capability": "6.1"},
    ),
    (
        "    Found GPU0 GeForce RTX 2080 Ti which requires CUDA_VERSION >= 10000 to",
        {"torch-gpu-needs-newer-cuda"},
        {"index": "0", "gpu": "GeForce RTX 2080 Ti", "required": "10000"},
    ),
    (
        "UserWarning: NVIDIA GeForce GTX 1080 Ti with CUDA capability sm_61 is not compatible with the current "
        "PyTorch installation.",
        {"torch-gpu-not-compatible"},
        {"gpu": "NVIDIA GeForce GTX 1080 Ti", "capability": "61"},
    ),
    (
        "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
        {"cuda-ptx-unsupported-toolchain"},
        {},
    ),
    (
        "Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object "
        "file: No such file or directory",
        {"libcudnn-not-found"},
        {"library": "libcudnn_ops_infer.so.8"},
    ),
    (
        "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}",
        {"libcudnn-not-found"},
        {"candidates": "libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so"},
    ),
    (
        "ImportError: libcudart.so.10.1: cannot open shared object file: No such file or directory",
        {"cuda-library-not-found"},
        {"library": "libcudart.so.10.1"},
    ),
    (
        "OSError: libcublasLt.so.12: cannot open shared object file: No such file or directory",
        {"cuda-library-not-found"},
        {"library": "libcublasLt.so.12"},
    ),
    (  # torch's own libraries stay cuda-library-not-found's (an extension's halves: tests/test_paste_libraries.py)
        "OSError: libtorch_cuda.so: cannot open shared object file: No such file or directory",
        {"cuda-library-not-found"},
        {"library": "libtorch_cuda.so"},
    ),
    (
        "RuntimeError: The detected CUDA version (12.1) mismatches the version that was used to compile PyTorch "
        "(11.8). Please make sure to use the same CUDA versions.",
        {"cpp-extension-cuda-mismatch"},
        {"detected": "12.1", "torch_cuda": "11.8"},
    ),
    (
        "      The detected CUDA version (11.8) mismatches the version that was used to compile",
        {"cpp-extension-cuda-mismatch"},
        {"detected": "11.8"},
    ),
    (
        "RuntimeError: Couldn't load custom C++ ops. This can happen if your PyTorch and torchvision versions are "
        "incompatible, or if you had errors while compiling torchvision from source.",
        {"torchvision-custom-ops-not-loaded"},
        {},
    ),
    (
        "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions. "
        "PyTorch has CUDA Version=12.1 and torchvision has CUDA Version=11.8. Please reinstall the torchvision that "
        "matches your PyTorch install.",
        {"torchvision-cuda-version-mismatch"},
        {"torch_cuda": "12.1", "torchvision_cuda": "11.8"},
    ),
    (
        "RuntimeError: Detected that PyTorch and torchvision were compiled with different",
        {"torchvision-cuda-version-mismatch"},
        {},
    ),
    (
        "NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend. This could be "
        "because the operator doesn't exist for this backend",
        {"torchvision-cpu-ops-on-cuda"},
        {"op": "nms"},
    ),
    (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.25 GiB "
        "already allocated; 3.75 MiB free; 14.69 GiB reserved in total by PyTorch)",
        {"cuda-out-of-memory"},
        {"size": "20.00 MiB", "gpu": "0"},
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.06 GiB is free. Process 12345 has 30.00 GiB memory in use. Including non-PyTorch "
        "memory, this process has 48.08 GiB memory in use.",
        {"cuda-out-of-memory"},
        {"size": "2.00 GiB", "gpu": "0", "other_pid": "12345", "other_used": "30.00 GiB"},
    ),
    ("RuntimeError: CUDA error: out of memory", {"cuda-error-out-of-memory"}, {}),
    (
        "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
        {"cuda-error-out-of-memory"},
        {},
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        {"cublas-handle-failed"},
        {"status": "NOT_INITIALIZED"},
    ),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", {"cuda-illegal-memory-access"}, {}),
    ("RuntimeError: CUDA error: unspecified launch failure", {"cuda-unspecified-launch-failure"}, {}),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", {"cuda-ecc-uncorrectable"}, {}),
    (
        "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
        {"cuda-nvlink-uncorrectable"},
        {},
    ),
    (
        "RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.",
        {"dataloader-killed-oom"},
        {"pid": "19597"},
    ),
    (
        "RuntimeError: DataLoader worker (pid(s) 164244) exited unexpectedly",
        {"dataloader-worker-exited"},
        {"pids": "164244"},
    ),
    (
        "RuntimeError: unable to allocate shared memory(shm) for file </torch_1140157_3143461634_13983>: Success (0)",
        {"shm-unable-to-allocate"},
        {},
    ),
    (
        "RuntimeError: unable to open shared memory object </torch_16421_3215479316> in read-write mode: Too many "
        "open files (24)",
        {"shm-too-many-open-files"},
        {},
    ),
    ("RuntimeError: received 0 items of ancdata", {"ancdata-open-files-limit"}, {}),
    (
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, internal error, NCCL version "
        "2.7.8",
        {"c10d-nccl-internal-error"},
        {"version": "2.7.8"},
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5",
        {"c10d-nccl-invalid-usage"},
        {"version": "2.20.5"},
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "remote process exited or there was a network error, NCCL version 2.19.3",
        {"c10d-nccl-remote-error"},
        {"version": "2.19.3"},
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        {"c10d-nccl-system-error"},
        {"version": "2.21.5"},
    ),
    (
        "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 10",
        {"c10d-nccl-duplicate-gpu"},
        {"rank": "1", "other_rank": "0", "bus_id": "10"},
    ),
    (
        "Mismatched NCCL version detected : rank 1 version 21903 rank 0 version 22105",
        {"c10d-nccl-version-mismatch"},
        {"rank": "1", "version": "21903", "other_rank": "0", "other_version": "22105"},
    ),
    (
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) "
        "ran for 600060 milliseconds before timing out.",
        {"c10d-nccl-watchdog-timeout"},
        {"seq": "1580", "op": "ALLREDUCE", "timeout_ms": "600000", "ran_ms": "600060"},
    ),
    (
        "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.",
        {"c10d-nccl-watchdog-timeout"},
        {"seq": "469508", "op": "ALLREDUCE", "timeout_ms": "1800000", "ran_ms": "1802212"},
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
        {"c10d-store-timeout"},
        {"seconds": "901", "joined": "1", "expected": "2"},
    ),
    (
        "RuntimeError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, "
        "code: -98, name: EADDRINUSE, message: address already in use",
        {"c10d-store-port-in-use"},
        {"port": "29500"},
    ),
    (
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
        "failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to "
        "0.0.0.0:29500 (errno: 98 - Address already in use).",
        {"c10d-store-port-in-use"},
        {"port": "29500"},
    ),
]

# Lines that must give no errors.toml signature: neighbours of the messages above.
NOT_OURS = [
    "CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be "
    "incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    # torch's own warning when it preloads cuDNN 8 sublibraries: convolutions still run.
    "/usr/share/torchvision/.venv/lib/python3.11/site-packages/torch/nn/modules/conv.py:456: UserWarning: Attempt to "
    "open cnn_infer failed: handle=0 error: libcudnn_cnn_infer.so.8: cannot open shared object file: No such file or "
    "directory (Triggered internally at /tmp/build/aten/src/ATen/native/cudnn/Conv_v8.cpp:78.)",
    # NCCL's own WARN lines are nccl.toml's.
    "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both "
    "on CUDA device 1000",
    "node1:1043:1043 [0] init.cc:1043 NCCL WARN Mismatched NCCL version detected : rank 1 version 21903 rank 0 "
    "version 22105",
    "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
    "UserWarning: The detected CUDA version (11.7) has a minor version mismatch with the version that was used to "
    "compile PyTorch (11.3). Most likely this shouldn't be a problem.",
    "Is CUDA available: False",
    "cuDNN version: Could not collect",
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90.",
    "RuntimeError: DataLoader worker (pid 8102) is killed by signal: Terminated.",
    "ERROR: unknown error while reading the config",
    "The NVIDIA driver on your system is too old (found version 110",  # cut mid-number: no fact from half a line
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    "RuntimeError: CUDA error: device-side assert triggered",
    "NCCL INFO NET/IB : No device found.",
    "/usr/bin/ld: cannot find -lcudart_static: No such file or directory",
    # The same refusal of a half-precision (CUDA_R_16F) GEMM is no bfloat16 matter.
    "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, k, "
    "&falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, "
    "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
    "libcudnn.so.8 -> libcudnn.so.8.9.2",
    "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.2.4",
]


def test_every_entry_has_an_example_line() -> None:
    fixtures = {i for expected, _ in FIXTURE_SIGNATURES.values() for i, _ in expected}
    examples = {i for _, ids, _ in EXAMPLES for i in ids}
    assert set(ours()) - fixtures - examples == set()


@pytest.mark.parametrize(("line", "ids", "values"), EXAMPLES, ids=[e[0][:60] for e in EXAMPLES])
def test_example_line_gives_its_signature_and_values(line: str, ids: set[str], values: dict[str, str]) -> None:
    found = engine(line)
    assert {i for i, _ in sighted(found)} == ids
    carried = next(s["values"] for s in found.signatures if s["id"] in ids)
    assert carried == values


@pytest.mark.parametrize("line", NOT_OURS, ids=[n[:50] for n in NOT_OURS])
def test_neighbouring_lines_give_no_signature(line: str) -> None:
    found = engine(line)
    assert sighted(found) == []
    assert not [p for p, o in found.origins.items() if o.reader == signatures.READER and p.startswith("nvml.")]


@pytest.mark.parametrize(
    ("line", "path", "value"),
    [
        ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", None, None),
        (
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions. "
            "PyTorch has CUDA Version=12.1 and torchvision has CUDA Version=11.8.",
            "torch.torchvision.cuda",
            "11.8",
        ),
        (
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions. "
            "PyTorch has CUDA Version=12.1 and torchvision has CUDA Version=11.8.",
            "torch.cuda",
            "12.1",
        ),
        (
            "RuntimeError: The detected CUDA version (12.1) mismatches the version that was used to compile PyTorch "
            "(11.8). Please make sure to use the same CUDA versions.",
            "torch.cuda",
            "11.8",
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            "torch.nccl.version",
            "2.21.5",
        ),
    ],
)
def test_facts_from_example_lines(line: str, path: str | None, value: Any) -> None:
    found = engine(line)
    if path is None:
        assert found.facts == {"nvml": {}, "torch": {}, "system": {}}
        return
    assert fact(found, path) == value and found.origins[path].reader == signatures.READER


# ---------------------------------------------------------------------------------------------------------
# The table's own rules
# ---------------------------------------------------------------------------------------------------------


def check_ids() -> set[str]:
    from gpudoctor.registry import discover

    return {s.id for s in discover(entry_points=False).specs}


def test_table_loads_with_unique_ids_none_of_them_another_files_prefix() -> None:
    table = signatures.table()  # raises on an id two files share
    mine = ours()
    assert len(mine) >= 60
    assert not [i for i in mine if i.startswith(("kernel-", "nccl-"))]
    assert all(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", i) for i in mine)
    assert set(mine) <= set(table)


def test_owners_are_registered_checks_and_statuses_are_verdicts() -> None:
    known = check_ids()
    for s in ours().values():
        assert s.owner in known, s.id
        assert s.status in ("fail", "warn"), s.id


def test_needle_is_in_every_line_a_pattern_matches() -> None:
    """The engine searches a pattern only on lines holding its needle: any line a pattern matches (the examples,
    the samples, the lines that must not match) must hold it, or a match would be lost."""
    lines = [e[0] for e in EXAMPLES] + NOT_OURS
    for name in FIXTURE_SIGNATURES:
        lines += (PASTES / name).read_text(encoding="utf-8", errors="replace").splitlines()
    for s in ours().values():
        assert s.needle and s.needle == s.needle.strip(" "), s.id
        unescaped = re.sub(r"\\(.)", r"\1", s.pattern.pattern)
        assert s.needle in unescaped, s.id
        for line in lines:
            match = s.pattern.search(line)
            assert not match or s.needle in line, (s.id, line)


def test_fix_placeholders_and_fact_groups_are_pattern_groups() -> None:
    for s in ours().values():
        groups = set(s.pattern.groupindex)
        for command in s.fix:
            for name, default in SLOT.findall(command):
                # a default only for what the whole paste shows; without one the command is left out where it is absent
                assert name in signatures.WHOLE_PASTE if default else name in groups | set(signatures.WHOLE_PASTE)
        for group, target in s.facts.items():
            path, _, kind = target.partition(":")
            assert group in groups or group == signatures.WHOLE_LINE, s.id
            assert path.split(".")[0] in ("nvml", "torch", "system"), s.id
            assert (kind or "str") in signatures.CONVERT, s.id


def test_every_entry_has_a_source_and_a_short_cause() -> None:
    for s in ours().values():
        assert len(s.source) > 20 and re.search(r"\w+/\w+|\.cpp|\.py|cudaGetErrorString|#\d+", s.source), s.id
        sentences = re.findall(r"[.!?](?=\s+[A-Z(]|$)", s.cause.strip())
        assert 1 <= len(sentences) <= 2, (s.id, s.cause)


def test_fixes_fill_in_the_line_they_came_from() -> None:
    found = engine(
        "RuntimeError: The server socket has failed to listen on any local network address. port: 29501, "
        "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
    )
    [sighting] = [s for s in found.signatures if s["id"] == "c10d-store-port-in-use"]
    assert ours()["c10d-store-port-in-use"].fixes(sighting["values"]) == (["ss -ltnp 'sport = :29501'"], [])


# ---------------------------------------------------------------------------------------------------------
# No false positives on the other kinds of paste
# ---------------------------------------------------------------------------------------------------------

OTHER_KINDS = sorted(
    p for kind in ("collect_env", "nvidia-smi", "kernel", "nccl", "bug-report") for p in (PASTES / kind).glob("*.txt")
)


@pytest.mark.parametrize("path", OTHER_KINDS, ids=[f"{p.parent.name}/{p.name}" for p in OTHER_KINDS])
def test_no_error_signature_in_other_kinds_of_paste(path: Path) -> None:
    found = paste.read(path.read_text(encoding="utf-8", errors="replace"))
    assert sighted(found) == []


# ---------------------------------------------------------------------------------------------------------
# Hostile input
# ---------------------------------------------------------------------------------------------------------


def test_empty_junk_and_fenced_or_quoted_pastes() -> None:
    assert sighted(engine("")) == []
    junk = bytes(range(256)).decode("latin-1") * 50 + "\x00\ufffd" * 1000
    assert sighted(engine(junk)) == []
    line = "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU"
    for wrapped in (f"> {line}", f"```\n{line}\n```", f"[rank3]: {line}", f"2024-01-02T03:04:05Z {line}\r\n"):
        assert [i for i, _ in sighted(engine(wrapped))] == ["no-nvidia-driver"], wrapped
    crlf = (PASTES / "errors" / "driver-too-old-found-9000-assertionerror-torch-1.0.txt").read_text()
    found = paste.read(crlf.replace("\n", "\r\n"))
    assert sighted(found) == [("driver-too-old", 7)] and fact(found, "nvml.cuda_driver_version") == 9000


def hostile_lines(size: int) -> list[str]:
    """Each entry's needle between runs of `size` characters without a match (no separators, many short words,
    repeats of the needle itself)."""
    lines = []
    for s in ours().values():
        for piece in ("a", "a ", "/torch/lib/", s.needle + " "):
            filler = piece * (size // len(piece))
            lines.append(filler + s.needle + filler)
    return lines


def test_long_hostile_lines_are_read_in_linear_time() -> None:
    """No pattern backtracks quadratically: K times the run is about K times the work (tests/helpers/growth.py,
    runs of 6,000 characters each side)."""
    grew = growth(lambda lines: [engine(line) for line in lines], hostile_lines(6_000 // K), hostile_lines(6_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on runs {K} times as long"


def test_a_20_mb_log_is_read_whole_and_in_linear_time() -> None:
    """Every sample repeated to 20 MB: what each holds alone, found; K times the log is about K times the work
    (tests/helpers/growth.py, from 0.5 to 4 MB)."""
    samples = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(PASTES.rglob("*.txt"))]
    block = "\n".join(samples)

    def log(size: int) -> str:
        return "\n".join([block] * (size // len(block) + 1))

    grew = growth(engine, log(4_000_000 // K), log(4_000_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the log"
    text = log(20_000_000)
    assert len(text) >= 20_000_000
    found = engine(text)
    expected = {i for sample in samples for i, _ in sighted(engine(sample))}
    assert {i for i, _ in sighted(found)} == expected, "at scale, exactly what each sample holds alone"


PROGRAM = FIXTURES / "pastes" / "program"


def test_the_programs_fixes_rerun_the_script_its_traceback_shows(tmp_path: Path) -> None:
    """A device-side assert's fix runs the traceback's own script again, with CUDA_LAUNCH_BLOCKING=1; a script
    path that is not one shell word, or none at all, leaves the template (`train.py`, said as such)."""
    sample = (
        FIXTURES
        / "pastes"
        / "program"
        / "device-side-assert-classnllcriterion-thcudacheck-runtime-error-59-torch-0.3.txt"
    )
    script = "/home/intern/PycharmProjects/domain-transfer-network-pytorch/test.py"
    text = sample.read_text(encoding="utf-8")
    for paste_text, expected in (
        (text, script),
        (text.replace(script, "/tmp/$(reboot).py"), "train.py"),
        (text.replace(", in <module>", ", in main"), "train.py"),
    ):
        path = tmp_path / "paste.txt"
        path.write_text(paste_text, encoding="utf-8")
        facts = inputs.load(path)
        results = evidence.attach("program.error", [Result(Status.SKIP, "nothing")], facts, live=False)
        commands = [c for r in results if r.remediation for c in r.remediation.commands]
        assert commands[0].startswith(f"CUDA_LAUNCH_BLOCKING=1 python {expected}  # your script"), commands
        assert "reboot" not in " ".join(commands)
