"""Issue 49's last unread messages, each with its cure: CUDA's unknown error (999), NCCL's bare "unhandled system
error" (ncclSystemError) and TensorFlow's ResourceExhaustedError. Each line is as its emitter prints it (the format
string the entry's `source` names)."""

from __future__ import annotations

import pytest

from gpudoctor.paste import read, signatures

# The exception's name as a notebook prints it over the traceback.
JUPYTER_HEADER = "ResourceExhaustedError                    Traceback (most recent call last)"


def sighted(text: str) -> dict[str, dict]:
    return {s["id"]: s for s in read(text).signatures}


def fixes(sid: str, values: dict[str, str] | None = None) -> list[str]:
    built, refused = signatures.table()[sid].fixes({"script": "train.py", **(values or {})})
    assert not refused
    return [str(c) for c in built]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: unknown error",  # torch's C10_CUDA_CHECK
        "E tensorflow/stream_executor/cuda/cuda_driver.cc:271] failed call to cuInit: CUDA_ERROR_UNKNOWN: unknown "
        "error",
        'code=999(cudaErrorUnknown) "cudaGetDeviceCount(&count)"',  # the CUDA samples' checkCudaErrors
        "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, "
        "e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.",
        "cudaErrorUnknown",
    ],
)
def test_cuda_999_wrapped_any_way_is_the_unknown_error_at_start(line: str) -> None:
    assert "cuda-unknown-error-at-init" in sighted(line)


def test_cuda_999_reloads_uvm_then_keeps_it_across_suspend_and_reboots_last() -> None:
    said = fixes("cuda-unknown-error-at-init")
    assert said[0].startswith("sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm")
    assert any(c.startswith("ls -l /dev/nvidia-uvm") for c in said), "a container without the UVM device"
    assert any("nvidia-suspend.service" in c for c in said), "NVIDIA's power management services keep UVM"
    assert said[-1].startswith("sudo reboot")
    assert "powermanagement" in signatures.table()["cuda-unknown-error-at-init"].source


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:518, unhandled system error, NCCL "
        "version 2.4.8",
        "RuntimeError: NCCL Error 2: unhandled system error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
    ],
)
def test_a_bare_nccl_system_error_reruns_with_its_log_and_checks_shared_memory(line: str) -> None:
    assert "c10d-nccl-system-error" in sighted(line)
    said = fixes("c10d-nccl-system-error")
    assert said[0].startswith("NCCL_DEBUG=INFO python train.py") and "WARN" in said[0]
    assert any(c.startswith("df -h /dev/shm") and "--shm-size" in c for c in said)
    assert any("NCCL_SOCKET_IFNAME" in c for c in said)


@pytest.mark.parametrize(
    ("line", "sid"),
    [
        (
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
            "shape[64,256,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "tensorflow-oom-allocating-tensor",
        ),
        (
            "2019-03-01 W tensorflow/core/framework/op_kernel.cc:1401] OP_REQUIRES failed at conv_ops.cc:446 : "
            "Resource exhausted: OOM when allocating tensor with shape[8,512,512] and type float on "
            "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "tensorflow-oom-allocating-tensor",
        ),
        (JUPYTER_HEADER, "tensorflow-resource-exhausted"),
    ],
)
def test_tensorflows_resource_exhausted_is_the_programs_size_with_whose_memory_to_check(line: str, sid: str) -> None:
    found = sighted(line)
    assert set(found) & {"tensorflow-oom-allocating-tensor", "tensorflow-resource-exhausted"} == {sid}
    entry = signatures.table()[sid]
    assert (entry.owner, entry.status) == ("program.error", "warn")
    said = fixes(sid, found[sid]["values"])
    assert said[0].startswith("nvidia-smi --query-compute-apps=")
    assert any(c.startswith("TF_FORCE_GPU_ALLOW_GROWTH=true python train.py") for c in said)


def test_a_host_allocator_oom_is_not_the_gpus() -> None:
    line = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[100000,100000] and type float on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu"
    )
    assert "tensorflow-oom-allocating-tensor" not in sighted(line)
