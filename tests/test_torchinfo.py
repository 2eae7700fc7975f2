"""The torch gateway on its own: per-device failures stay per device, devices carry the identity that maps
them to NVML's GPUs."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

from gpudoctor.facts import torchinfo


def fake_torch(broken: set[int]) -> SimpleNamespace:
    """torch.cuda with four devices, some of which fail get_device_properties as a wedged GPU does."""

    def properties(index: int) -> SimpleNamespace:
        if index in broken:
            raise RuntimeError("CUDA error: unspecified launch failure\nCUDA kernel errors might be ...")
        return SimpleNamespace(
            name="NVIDIA H100 80GB HBM3",
            major=9,
            minor=0,
            total_memory=80 * 2**30,
            pci_domain_id=0,
            pci_bus_id=0x18 + 0x10 * index,
            pci_device_id=0,
            uuid=f"0000000{index}-0000-0000-0000-000000000000",
        )

    cuda = SimpleNamespace(is_available=lambda: True, device_count=lambda: 4, get_device_properties=properties)
    return SimpleNamespace(cuda=cuda, version=SimpleNamespace(cuda="13.0"))


def test_one_failing_device_is_that_device_s_error_not_a_broken_torch() -> None:
    facts = torchinfo._cuda(fake_torch({2}))
    assert facts["cuda_available"] is True and facts["device_count"] == 4
    assert facts["devices"][2] == {"index": 2, "error": "RuntimeError: CUDA error: unspecified launch failure"}
    assert facts["devices"][3]["pci_bus_id"] == "00000000:48:00.0"
    assert facts["devices"][3]["uuid"] == "GPU-00000003-0000-0000-0000-000000000000"


def test_a_failing_device_fails_cuda_available_naming_it() -> None:
    from helpers.common import load_snapshot

    from gpudoctor.checks.torch_build import judge_arch, judge_cuda_available

    snap = load_snapshot("h100-sxm-8x")
    torch = {**snap["torch"], **torchinfo._cuda(fake_torch({2}))}
    result = judge_cuda_available(torch, snap["nvml"], {})
    assert result.status.value == "fail"
    assert result.summary == "torch cannot read cuda:2: RuntimeError: CUDA error: unspecified launch failure"
    assert judge_arch(torch, snap["nvml"]["gpus"], "590.48.01").status.value == "pass"


def test_the_gateway_writes_its_answer_whole_and_leaves_without_torch_s_teardown() -> None:
    """Its answer is flushed and it exits 0 before the interpreter's teardown (0.4 s of torch's on a CPU host:
    bench/startup.py), which an exit handler registered before it ran would show."""
    runner = (
        "import atexit, runpy, sys;"
        "atexit.register(lambda: sys.stderr.write('teardown ran'));"
        "runpy.run_module('gpudoctor.facts.torchinfo', run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "teardown ran" not in done.stderr
    assert json.loads(done.stdout)["importable"] is True
