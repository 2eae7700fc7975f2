"""An application's own memory settings in an out-of-memory cure (signatures' `fix_in`): the application a paste
shows by its own paths and modules (ComfyUI, vLLM) gets its flags first, each from the application's source or
docs; a paste that shows neither gets only the generic commands."""

from __future__ import annotations

from gpudoctor.paste import read, signatures, summary
from gpudoctor.paste.evidence import _remedy

# torch's out-of-memory message (c10/cuda/CUDACachingAllocator.cpp, 2.1+) under two applications' frames, as
# CPython prints them; the figures put the program's own hold near the whole GPU (its size, not another process).
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB "
    "of which 1.06 GiB is free. Including non-PyTorch memory, this process has 22.56 GiB memory in use. Of the "
    "allocated memory 21.93 GiB is allocated by PyTorch, and 186.51 MiB is reserved by PyTorch but unallocated."
)
COMFY = '  File "/home/u/ComfyUI/comfy/model_management.py", line 523, in load_models_gpu\n' + OOM
VLLM = '  File "/opt/env/lib/python3.11/site-packages/vllm/worker/worker.py", line 180, in determine_num_blocks\n' + OOM
PLAIN = '  File "/home/u/train.py", line 12, in <module>\n' + OOM


def commands(text: str, signature_id: str) -> list[str]:
    found = read(text)
    assert any(s["id"] == signature_id for s in found.signatures), found.signatures
    signature = signatures.table()[signature_id]
    return list(_remedy(signature, {}, {"paste": summary(found)}, "").commands)


def test_the_application_is_read_from_its_own_paths() -> None:
    assert summary(read(COMFY))["apps"] == ["comfyui"]
    assert summary(read(VLLM))["apps"] == ["vllm"]
    assert "apps" not in summary(read(PLAIN))


def test_comfyuis_out_of_memory_leads_with_its_lowvram_flag() -> None:
    """ComfyUI comfy/cli_args.py: --lowvram 'Split the unet in parts to use less vram.', --novram beyond it."""
    made = commands(COMFY, "cuda-out-of-memory-program-size")
    assert made[0].startswith("python main.py --lowvram")
    assert any(c.startswith("nvidia-smi --query-gpu=") for c in made)


def test_vllms_out_of_memory_leads_with_its_memory_arguments() -> None:
    """vLLM engine arguments: --max-model-len, --max-num-seqs, --enforce-eager, --gpu-memory-utilization."""
    made = commands(VLLM, "cuda-out-of-memory-program-size")
    assert made[0].startswith("vllm serve ... --max-model-len") and "--max-num-seqs" in made[0]


def test_a_program_of_its_own_gets_no_applications_flags() -> None:
    made = commands(PLAIN, "cuda-out-of-memory-program-size")
    assert not any("--lowvram" in c or "vllm serve" in c for c in made)


def test_every_application_fix_names_an_application_the_reader_knows_and_cites_it() -> None:
    for signature in signatures.table().values():
        assert set(signature.fix_in) <= set(signatures.APPS), signature.id
        if signature.fix_in:
            assert all(app in signature.fix_source.lower() for app in signature.fix_in), signature.id
