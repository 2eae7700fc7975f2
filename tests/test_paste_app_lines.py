"""The applications around torch in their own words (gpudoctor/data/signatures/apps.toml): every real sample of
tests/fixtures/pastes/apps/ with exactly the signatures it holds, the lines beside them that are not theirs, the
applications' healthy start-up lines that are no fault, and the wrappings of CUDA's own text that the code reader
already reads."""

from __future__ import annotations

import re

import pytest
from helpers.common import FIXTURES

from gpudoctor.paste import read, signatures

APPS = FIXTURES / "pastes" / "apps"
TABLE = "apps.toml"
WEBUI = "webui-torch-cannot-use-gpu"
VLLM = "vllm-no-memory-for-kv-cache"
GGML = "ggml-cuda-buffer-out-of-memory"
OLLAMA_DRIVER = "ollama-driver-too-old-or-missing"
OLLAMA_NO_GPU = "ollama-no-compatible-gpus"

# Each sample: its signatures (id, 1-based line) in the order read, each checked with its values where it has any.
SAMPLES = {
    "webui-forge-torch-not-able-to-use-gpu-windows-package-cu121.txt": [(WEBUI, 11)],
    "webui-torch-not-able-to-use-gpu-older-assert-form-run-python-partial.txt": [(WEBUI, 5), (WEBUI, 11)],
    "vllm-no-available-memory-for-cache-blocks-v0-worker-docker-compose-partial.txt": [(VLLM, 3)],
    "vllm-no-available-memory-for-cache-blocks-one-line-prefixed.txt": [(VLLM, 1)],
    "llamacpp-cuda-buffer-alloc-failed-loading-model-144817-mib.txt": [(GGML, 4)],
    "ollama-cudart-driver-too-old-or-missing-windows-0.3.9.txt": [(OLLAMA_DRIVER, 2)],
    "ollama-no-compatible-gpus-discovered-cpu-inference-compute.txt": [(OLLAMA_NO_GPU, 1)],
}


def ours() -> dict[str, signatures.Signature]:
    return {k: s for k, s in signatures.table().items() if s.file == TABLE}


def sighted(text: str) -> list[tuple[str, int]]:
    return [(s["id"], s["line"]) for s in read(text).signatures]


def test_every_sample_is_listed_with_its_source() -> None:
    files = {p.name for p in APPS.glob("*.txt")}
    listed = (APPS / "SOURCES.md").read_text(encoding="utf-8")
    assert files == set(SAMPLES) | {"ollama-cuda-buffer-alloc-failed-compute-graph-runner-retries-partial.txt"}
    assert all(f"`{name}`" in listed for name in files)


@pytest.mark.parametrize(("name", "expected"), sorted(SAMPLES.items()))
def test_each_sample_gives_exactly_its_signatures(name: str, expected: list[tuple[str, int]]) -> None:
    assert sighted((APPS / name).read_text(encoding="utf-8")) == expected


def test_the_web_uis_check_is_torch_seeing_no_gpu_never_cured_by_skipping_it() -> None:
    """A1111/Forge launch_utils.py: torch.cuda.is_available() False in the web UI's venv. The cure looks at that
    torch and reinstalls it (--reinstall-torch); --skip-torch-cuda-test only runs on the CPU."""
    entry = ours()[WEBUI]
    assert (entry.owner, entry.status) == ("torch.cuda-available", "warn")
    made, refused = entry.fixes({})
    assert not refused
    assert any("torch.version.cuda" in c and "venv" in c for c in made)
    assert any(c.startswith("./webui.sh --reinstall-torch") for c in made)
    assert not any(c.startswith(("--skip-torch-cuda-test", "set COMMANDLINE_ARGS=--skip")) for c in made)
    assert "--skip-torch-cuda-test" not in " ".join(c.split("#")[0] for c in made)


def test_vllms_empty_kv_cache_is_the_servers_settings_with_its_own_arguments() -> None:
    entry = ours()[VLLM]
    assert (entry.owner, entry.status) == ("program.error", "warn")
    made, _ = entry.fixes({})
    assert any("--gpu-memory-utilization" in c and "--max-num-seqs" in c for c in made)
    assert any(c.startswith("nvidia-smi --query-compute-apps=") for c in made)


def test_llama_cpps_buffer_allocation_names_its_gpu_and_size_and_offloads_fewer_layers() -> None:
    """ggml-cuda.cu ggml_backend_cuda_buffer_type_alloc_buffer; llama.cpp's own advice: reduce --n-gpu-layers."""
    found = read((APPS / "llamacpp-cuda-buffer-alloc-failed-loading-model-144817-mib.txt").read_text())
    [sighting] = [s for s in found.signatures if s["id"] == GGML]
    assert sighting["values"] == {"mib": "144817.04", "gpu": "0"}
    made, refused = ours()[GGML].fixes(sighting["values"])
    assert not refused
    assert made[0].startswith("nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv -i 0")
    assert "144817.04 MiB" in made[0]
    assert any("--n-gpu-layers" in c and "--ctx-size" in c for c in made)


def test_ollamas_discovery_lines_are_warnings_of_the_driver_with_its_own_cures() -> None:
    """Ollama's discovery: no GPU at all is right on a CPU machine, and one bundled CUDA runtime refused by the
    driver while another loads is no fault, so neither line alone fails the machine."""
    for entry in (ours()[OLLAMA_DRIVER], ours()[OLLAMA_NO_GPU]):
        assert (entry.owner, entry.status) == ("driver.nvml", "warn")
    driver, _ = ours()[OLLAMA_DRIVER].fixes({})
    assert driver[0].startswith("nvidia-smi") and "525.60.13" in driver[0] and "580.65.06" in driver[0]
    no_gpu, _ = ours()[OLLAMA_NO_GPU].fixes({})
    assert any(c.startswith("docker run -d --gpus=all") for c in no_gpu)
    assert any(c.startswith("OLLAMA_DEBUG=1 ollama serve") for c in no_gpu)


def test_ollamas_log_of_the_same_allocation_gives_the_same_cause() -> None:
    """Ollama embeds ggml: its runner prints ggml's line between its own load requests."""
    text = (APPS / "ollama-cuda-buffer-alloc-failed-compute-graph-runner-retries-partial.txt").read_text()
    assert (GGML, 1) in sighted(text)


# Lines beside the entries' own, from the same emitters, that are not theirs: another backend's allocation (the
# CPU's pinned host buffer, ggml_cuda_host_malloc), ggml's allocator lines that follow the failure (they name no
# cause), vLLM's other KV-cache message (program.toml's vllm-context-exceeds-kv-cache), the web UI's source line.
NEIGHBOURS = [
    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 9668469760",
    "alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624",
    "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
    "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 4096",
    "No memory should be allocated for the cache blocks for an attention-free model, but 12blocks are allocated.",
    '    raise ValueError("No available memory for the cache blocks. "',
    'if not args.skip_torch_cuda_test and not check_run_python("import torch; assert torch.cuda.is_available()"):',
    "Launching Web UI with arguments: --skip-torch-cuda-test --no-half",
    'time=2024-04-15T15:48:38.322Z level=INFO source=gpu.go:115 msg="Detecting GPU type"',
    'time=2024-10-15T09:18:18.264Z level=INFO source=gpu.go:199 msg="looking for compatible GPUs"',
    'time=2025-02-26T01:11:02.714-05:00 level=INFO source=amd_linux.go:402 msg="no compatible amdgpu devices detected"',
]


@pytest.mark.parametrize("line", NEIGHBOURS, ids=[n[:50] for n in NEIGHBOURS])
def test_neighbouring_lines_give_none_of_these_signatures(line: str) -> None:
    assert not {i for i, _ in sighted(line)} & set(ours())


def test_vllms_context_message_stays_its_own() -> None:
    line = (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
        "in KV cache (25632). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    assert [i for i, _ in sighted(line)] == ["vllm-context-exceeds-kv-cache"]


# The applications' start-up lines on a healthy machine, in their sources' formats: ComfyUI comfy/model_management.py
# ("Total VRAM {:0.0f} MB, total RAM {:0.0f} MB", "Device: {}" of get_torch_device_name: "{} {} : {}" device, name,
# allocator backend), llama.cpp ggml-cuda.cu ggml_cuda_init ("%s: found %d CUDA devices:", "  Device %d: %s, compute
# capability %d.%d, VMM: %s") and llama.cpp's buffer sizes, Ollama's discovered GPU (msg="inference compute"), vLLM's
# KV cache size (V0 "# GPU blocks: %d, # CPU blocks: %d", V1 "GPU KV cache size: %s tokens").
HEALTHY = [
    "Total VRAM 24564 MB, total RAM 64228 MB\nSet vram state to: NORMAL_VRAM\n"
    "Device: cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync",
    "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes\n"
    "llama_kv_cache_init:      CUDA0 KV buffer size =   379.23 MiB\nload_tensors: offloaded 33/33 layers to GPU",
    'time=2025-01-01T10:00:00.000Z level=INFO source=types.go:131 msg="inference compute" '
    "id=GPU-f8657c39-1806-f26f-e294-a51dcd5da96b library=cuda variant=v12 compute=8.6 driver=12.4 "
    'name="NVIDIA GeForce RTX 3090" total="24.0 GiB" available="22.8 GiB"',
    "INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 2795, # CPU blocks: 512",
    "INFO 04-30 10:20:35 [kv_cache_utils.py:634] GPU KV cache size: 155,136 tokens",
]


@pytest.mark.parametrize("text", HEALTHY, ids=[h[:40] for h in HEALTHY])
def test_healthy_start_up_lines_give_nothing(text: str) -> None:
    assert sighted(text) == []


# llama.cpp wraps CUDA's own text (ggml-cuda.cu: "ggml_cuda_init: failed to initialize CUDA: %s" with
# cudaGetErrorString; ggml_cuda_error: "CUDA error: %s", "  current device: %d, in function %s at %s:%d"): the
# code's own entries read them, and this table adds none.
WRAPPED = [
    ("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected", "cuda-no-device"),
    (
        "ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient for CUDA runtime version",
        "cuda-driver-insufficient",
    ),
    (
        "CUDA error: out of memory\n  current device: 0, in function ggml_cuda_pool_malloc at "
        "ggml/src/ggml-cuda/ggml-cuda.cu:372\n  cudaMalloc((void **) &ptr, look_ahead_size)",
        "cuda-error-out-of-memory",
    ),
]


@pytest.mark.parametrize(("text", "expected"), WRAPPED, ids=[w[1] for w in WRAPPED])
def test_cudas_text_inside_llama_cpps_lines_is_read_as_cudas(text: str, expected: str) -> None:
    assert [i for i, _ in sighted(text)] == [expected]


def test_every_entry_has_a_sample_a_source_and_a_fix_source() -> None:
    samples = {i for expected in SAMPLES.values() for i, _ in expected}
    assert set(ours()) == samples
    for s in ours().values():
        assert s.needle in s.source or re.search(r"\w+/\w+\.(?:py|cu|cpp)", s.source), s.id
        assert s.fix and s.fix_source, s.id
