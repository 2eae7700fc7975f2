"""Codes, not messages (gpudoctor/data/codes, gpudoctor/paste/codes.py): the tables cross-checked against their own
rules and, where this environment has them, against the headers they were read from; every code a machine causes
with its source and cure; each such CUDA code wrapped the ways applications print it giving one cause; the reader
leaving alone what it must (exit codes, errno values, NCCL's traces, lines a message signature read)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from helpers.common import gpudoctor
from helpers.growth import LINEAR, growth

from gpudoctor import paste
from gpudoctor.paste import codes, cures, signatures
from gpudoctor.paste.codes import Code

TABLES = codes.tables()
EVERY = codes.every_code()
RUNTIME, DRIVER = TABLES["cuda-runtime"].codes, TABLES["cuda-driver"].codes
# Each table's names as its header spells them.
SPELLING = {
    "cuda-runtime": r"cuda(?:Success|Error[A-Z][A-Za-z]+)",
    "cuda-driver": r"CUDA_(?:SUCCESS|ERROR_[A-Z_]+)",
    "nvml": r"NVML_(?:SUCCESS|ERROR_[A-Z_]+)",
    "nccl": r"nccl[A-Z][A-Za-z]+",
    "cudnn": r"CUDNN_STATUS_[A-Z0-9_]+",
    "cublas": r"CUBLAS_STATUS_[A-Z_]+",
}
# Driver codes whose cuda.h comment gives them another meaning than the runtime code of the same number.
DRIVER_OWN_MEANING = {3, 4, 201, 202, 916}


def sighted(text: str) -> list[tuple[str, str]]:
    """(signature id, reader) of every sighting in `text` read as a paste."""
    return [(s["id"], s["reader"]) for s in paste.read(text).signatures]


def cause(text: str) -> set[str]:
    return {sid for sid, _ in sighted(text)}


def machine(table: tuple[Code, ...]) -> list[Code]:
    return [c for c in table if c.by == "machine"]


# ---------------------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------------------


def test_every_table_says_where_it_was_read_and_the_newest_release_it_knows() -> None:
    assert list(TABLES) == ["cuda-runtime", "cuda-driver", "nvml", "nccl", "cudnn", "cublas"]
    for table in TABLES.values():
        assert table.newest in table.read and len(table.source) > 40, table.id
        assert table.codes, table.id
    assert TABLES["cuda-runtime"].read == ("12.6", "12.9", "13.0", "13.2")  # the CUDA majors torch ships
    assert TABLES["cuda-driver"].read == ("12.6", "12.9", "13.0", "13.2")


@pytest.mark.parametrize("table", list(TABLES.values()), ids=list(TABLES))
def test_numbers_and_names_are_unique_and_spelled_as_the_header_spells_them(table: codes.Table) -> None:
    numbers = [c.number for c in table.codes]
    assert len(numbers) == len(set(numbers)), [n for n in numbers if numbers.count(n) > 1]
    names = [n for c in table.codes for n in (c.name, *c.aliases)]
    assert len(names) == len(set(names))
    for code in table.codes:
        assert re.fullmatch(SPELLING[table.id], code.name), code.name
        assert code.by in codes.BY and code.family in codes.families(), code.name
        assert set(code.headers) <= set(table.read), code.name


def test_a_name_belongs_to_one_table_and_the_reader_finds_every_name() -> None:
    names = [n for c in EVERY for n in (c.name, *c.aliases)]
    assert len(names) == len(set(names))
    for code in EVERY:
        for name in (code.name, *code.aliases):
            assert codes.shown(name) == code, name


def test_a_driver_code_and_the_runtime_code_of_its_number_mean_the_same() -> None:
    """CUDA 10.1 aligned the two enums: the same number, the same cause, the same text (the driver's texts are its
    runtime twin's, cuda_driver.toml says why), except where cuda.h gives the driver code a meaning of its own."""
    runtime = {c.number: c for c in RUNTIME}
    twins = [(d, runtime[d.number]) for d in DRIVER if d.number in runtime and d.number not in DRIVER_OWN_MEANING]
    assert len(twins) >= 90
    for driver, twin in twins:
        assert (driver.family, driver.by, driver.text) == (twin.family, twin.by, twin.text), driver.name


def test_every_family_names_a_signature_that_exists_and_every_family_is_used() -> None:
    known = signatures.table()
    for family, entry in codes.families().items():
        assert entry["means"], family
        assert family == "not-a-fault" or entry["signature"] in known, family
    assert {c.family for c in EVERY} == set(codes.families())
    assert all(c.signature in known for c in EVERY if c.family != "not-a-fault")
    assert not [c.name for c in EVERY if c.family == "not-a-fault" and c.signature]


def test_every_entry_is_listed_with_its_source_and_every_machine_code_with_its_cure() -> None:
    """The list the issue asks for: each entry, the table source that gives its number, name and text, and the
    signature that gives its cause and cure; none without. A cure is the signature's commands, its owner's cure
    (paste/cures.py), or its reason why no one command cures it."""
    known = signatures.table()
    listed = []
    for code in EVERY:
        source = TABLES[code.table].source
        assert source, code.name
        if code.family == "not-a-fault":
            listed.append((code.table, code.number, code.name, source, ""))
            continue
        signature = known[code.signature]
        cure = bool(signature.fix) or (signature.fix_from == "owner" and signature.id in cures.cured())
        assert signature.source and (cure or signature.no_fix), code.name
        listed.append((code.table, code.number, code.name, source, signature.source))
    assert len(listed) == len(EVERY) >= 330
    for code in machine(RUNTIME) + machine(DRIVER):
        signature = known[code.signature]
        assert signature.owner != "program.error", code.name
        assert signature.fix or signature.fix_from == "owner" or signature.no_fix, code.name


def test_the_machine_codes_are_the_ones_a_node_causes() -> None:
    names = {c.name for c in machine(RUNTIME)}
    assert {
        "cudaErrorNoDevice",
        "cudaErrorInsufficientDriver",
        "cudaErrorStubLibrary",
        "cudaErrorDevicesUnavailable",
        "cudaErrorNoKernelImageForDevice",
        "cudaErrorECCUncorrectable",
        "cudaErrorNvlinkUncorrectable",
        "cudaErrorSystemNotReady",
        "cudaErrorSystemDriverMismatch",
        "cudaErrorCompatNotSupportedOnDevice",
        "cudaErrorMpsConnectionFailed",
        "cudaErrorJitCompilerNotFound",
        "cudaErrorLaunchTimeout",
        "cudaErrorUnknown",
    } <= names
    assert not names & {"cudaErrorInvalidValue", "cudaErrorAssert", "cudaErrorInvalidConfiguration"}
    assert {c.name for c in machine(TABLES["nvml"].codes)} >= {
        "NVML_ERROR_DRIVER_NOT_LOADED",
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        "NVML_ERROR_GPU_IS_LOST",
        "NVML_ERROR_LIBRARY_NOT_FOUND",
    }


# The headers the tables were read from, where this environment holds them (the nvidia-* wheels torch brings): the
# newest release of each table must be exactly what its header declares.
HEADERS = {
    "cuda-runtime": ("cu13/include/driver_types.h", r"enum __device_builtin__ cudaError\s*\{(.*?)\};", "13.2"),
    "cuda-driver": ("cu13/include/cuda.h", r"typedef enum cudaError_enum\s*\{(.*?)\}\s*CUresult;", "13.2"),
    "nvml": ("cu13/include/nvml.h", r"typedef enum nvmlReturn_enum\s*\{(.*?)\}\s*nvmlReturn_t;", "13.5"),
    "nccl": ("nccl/include/nccl.h", r"typedef enum \{(.*?)\}\s*ncclResult_t;", "2.30.7"),
    "cublas": ("cu13/include/cublas_api.h", r"typedef enum \{\s*(CUBLAS_STATUS_SUCCESS.*?)\}\s*cublasStatus_t;", ""),
    "cudnn": ("cudnn/include/cudnn_graph.h", r"typedef enum \{(.*?)\}\s*cudnnStatus_t;", "9.26.0"),
}


def installed(relative: str) -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    for folder in spec.submodule_search_locations if spec and spec.submodule_search_locations else []:
        if (Path(folder) / relative).is_file():
            return Path(folder) / relative
    return None


@pytest.mark.parametrize("table_id", list(HEADERS))
def test_the_newest_release_is_the_installed_header_where_there_is_one(table_id: str) -> None:
    relative, block, version = HEADERS[table_id]
    header = installed(relative)
    if header is None:
        pytest.skip(f"no {relative} here")
    text = header.read_text(encoding="utf-8", errors="replace")
    if version and table_id in ("cuda-runtime", "cuda-driver"):
        major, minor = version.split(".")
        if f"#define CUDA_VERSION {int(major) * 1000 + int(minor) * 10}" not in (header.parent / "cuda.h").read_text():
            pytest.skip(f"{relative} is another release than the table's newest")
    body = re.search(block, text, re.S)
    assert body, relative
    enum = re.sub(r"//[^\n]*|/\*.*?\*/", "", body.group(1), flags=re.S)
    spelled = rf"\b({SPELLING[table_id]})(?:\s+CUDNN_DEPRECATED_ENUM)?\s*=\s*(\d+)"
    declared = {m.group(1): int(m.group(2)) for m in re.finditer(spelled, enum)}
    declared.pop("ncclNumResults", None)
    table = TABLES[table_id]
    newest = {c.name: c.number for c in table.codes if not c.headers or table.newest in c.headers}
    assert declared == newest


def test_the_nvml_aliases_are_pynvmls_exception_classes() -> None:
    pynvml = pytest.importorskip("pynvml")
    for code in TABLES["nvml"].codes:
        for alias in code.aliases:
            assert getattr(pynvml, alias).__mro__[1] is pynvml.NVMLError, alias
            assert pynvml.nvmlExceptionClass(code.number).__name__ == alias


# ---------------------------------------------------------------------------------------------------------
# One code, every wrapping: the same cause
# ---------------------------------------------------------------------------------------------------------

# An LLM server's log (vLLM's engine log as gpustack/gpustack#1254 shows it), a Docker error (the container
# toolkit's CLI lowercases the library's text: NVIDIA/nvidia-container-toolkit#908), torch's RuntimeError, the CUDA
# samples' checkCudaErrors (helper_cuda.h: "CUDA error at %s:%d code=%d(%s) \"%s\""), and the bare name.
DOCKER = (
    "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI "
    "runtime create failed: runc create failed: unable to start container process: error during container init: "
    "error running hook #0: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: "
    "initialization error: cuda error: {lower}: unknown."
)
RUNTIME_WAYS = {
    "vLLM": "ERROR 02-19 07:03:11 engine.py:389] Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
    "functions before calling NumCudaDevices() that might have already set an error? Error {number}: {text}",
    "Docker": DOCKER,
    "RuntimeError": "RuntimeError: CUDA error: {text}",
    "checkCudaErrors": 'CUDA error at bandwidthTest.cu:256 code={number}({name}) "cudaSetDevice(currentDevice)"',
    "name": "{name}",
}
DRIVER_WAYS = {
    "vLLM": "ERROR 02-19 07:03:11 engine.py:389] RuntimeError: CUDA driver error: {text}",
    "Docker": DOCKER,
    "RuntimeError": "RuntimeError: CUDA error: {text}",
    "checkCudaErrors": 'CUDA error at matrixMulDrv.cpp:112 code={number}({name}) "cuInit(0)"',
    "name": "{name}",
}


def wrapped(way: str, code: Code) -> str:
    ways = RUNTIME_WAYS if code.table == "cuda-runtime" else DRIVER_WAYS
    return ways[way].format(number=code.number, name=code.name, text=code.text, lower=code.text.lower())


MACHINE = [pytest.param(c, id=c.name) for c in machine(RUNTIME) + machine(DRIVER)]


@pytest.mark.parametrize("code", MACHINE)
def test_a_machine_code_wrapped_five_ways_gives_one_cause(code: Code) -> None:
    assert code.text, code.name
    for way in RUNTIME_WAYS:
        line = wrapped(way, code)
        assert cause(line) == {code.signature}, (way, line)


@pytest.mark.parametrize("code", [pytest.param(c, id=c.name) for c in machine(RUNTIME)])
def test_a_machine_code_by_number_alone_as_device_query_prints_it(code: Code) -> None:
    """deviceQuery and bandwidthTest: "cudaGetDeviceCount returned 100", the text on the next line."""
    assert cause(f"cudaGetDeviceCount returned {code.number}") == {code.signature}
    assert cause(f"cudaGetDeviceCount returned {code.number}\n-> {code.text}") == {code.signature}


@pytest.mark.parametrize("code", [pytest.param(c, id=f"{c.table}-{c.name}") for c in EVERY if c.text])
def test_every_text_reads_as_a_code_that_prints_it_where_its_library_is_named(code: Code) -> None:
    """A text two codes of a table share (cudaErrorInvalidKernelImage and cudaErrorInvalidSource both print "device
    kernel image is invalid") reads as the first of them."""
    library = {"cuda-runtime": "CUDA", "cuda-driver": "CUDA driver", "nccl": "NCCL", "cublas": "cuBLAS"}
    line = f"RuntimeError: {library.get(code.table, 'NVML')} error: {code.text}"
    if code.table == "nvml":
        line = f"Failed to initialize NVML: {code.text}"
    found = codes.shown(line)
    printing = [c for c in EVERY if code.text.lower() in (c.text.lower(), *c.wordings)]
    assert found in printing and found.family in {c.family for c in printing if c.table == code.table}, line


@pytest.mark.parametrize("code", [pytest.param(c, id=f"{c.table}-{c.name}") for c in EVERY])
def test_every_number_reads_as_its_code_after_its_librarys_name(code: Code) -> None:
    library = {"cuda-runtime": "CUDA", "cuda-driver": "CUresult", "nvml": "NVML", "nccl": "NCCL"}
    library |= {"cudnn": "cuDNN", "cublas": "cuBLAS"}
    assert codes.shown(f"{library[code.table]} error {code.number}") == code


# ---------------------------------------------------------------------------------------------------------
# How applications wrap codes, and what is no code
# ---------------------------------------------------------------------------------------------------------

CASES = {
    # Numbered before CUDA 10.1 (38 was no device, 10 an invalid device): the text decides.
    "cuda runtime error (38) : no CUDA-capable device is detected at /pytorch/torch/csrc/cuda/Module.cpp:34": {
        "cuda-no-device"
    },
    "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=50 error=10 : invalid device ordinal": {
        "cuda-invalid-device-ordinal"
    },
    # TensorFlow and JAX print a driver code they have no name for as UNKNOWN ERROR (n): 34 is the stub library.
    "E tensorflow/stream_executor/cuda/cuda_driver.cc:271] failed call to cuInit: UNKNOWN ERROR (34)": {
        "cuda-stub-library"
    },
    "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no "
    "CUDA-capable device is detected": {"cuda-no-device"},
    "numba.cuda.cudadrv.driver.CudaAPIError: [702] Call to cuMemFree results in CUDA_ERROR_LAUNCH_TIMEOUT": {
        "cuda-launch-timeout"
    },
    '========= Program hit CUDA_ERROR_INVALID_PTX (error 218) due to "a PTX JIT compilation failed" on CUDA API '
    "call to cuModuleLoadData.": {"cuda-ptx-unsupported-toolchain"},
    # NVML: nvidia-smi's words, pynvml's exception class, the container CLI's lowercased text.
    "Failed to initialize NVML: Insufficient Permissions": {"nvml-no-permission"},
    "pynvml.nvml.NVMLError_GpuIsLost: GPU is lost": {"kernel-gpu-fallen-off-bus"},
    "pynvml.NVMLError_InsufficientPower: Insufficient External Power": {"nvml-insufficient-power"},
    "nvidia-container-cli: initialization error: nvml error: corrupted inforom: unknown.": {"nvml-corrupted-inforom"},
    # NCCL by name and by number, and the CUDA failure NCCL's own log prints under it.
    "ncclRemoteError: Remote process exited or there was a network error.": {"c10d-nccl-remote-error"},
    "RuntimeError: NCCL Error 2": {"c10d-nccl-system-error"},
    "node1:36:36 [0] include/alloc.h:103 NCCL WARN Cuda failure 214 'uncorrectable ECC error encountered'": {
        "cuda-ecc-uncorrectable"
    },
    # cuDNN and cuBLAS by name, as torch prints them.
    "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED": {"cudnn-handle-not-initialized"},
    "RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH": {"cuda-no-kernel-image"},
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb)`": {
        "cuda-unspecified-launch-failure"
    },
    # The program's own misuse: not the machine's.
    'CUDA error at vectorAdd.cu:64 code=1(cudaErrorInvalidValue) "cudaMemcpy(d_A, h_A, size, kind)"': {
        "cuda-program-error"
    },
    # No code: an exit status, dlopen's errno and a verbs status in NCCL's log, NCCL's result traces, a GPU-only
    # line with common words, success, a version, an unknown number.
    "torch.distributed.elastic: CUDA worker exited with exit code 1 (status 1)": set(),
    "host:1:1 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file": set(),
    "host:1:1 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<43210> with error 5, opcode 0, len 0": set(),
    "host:1:1 [0] NCCL INFO init.cc:1234 -> 2": set(),
    # nvidia-smi's own line names no library: its "Unknown Error" is no code, but the line is a signature of its own
    # (data/signatures/node.toml), read by the signature reader.
    "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error": {"nvidia-smi-device-handle-failed"},
    "CUDA_SUCCESS": set(),
    "NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4": set(),
    "CUDA error 4242": set(),
    "the launch timed out and was terminated": set(),  # no library named: not a candidate line
}


@pytest.mark.parametrize("line", list(CASES))
def test_a_wrapped_code_gives_its_cause_and_no_code_gives_none(line: str) -> None:
    assert cause(line) == CASES[line]


def test_nvidia_smis_device_handle_line_is_no_code() -> None:
    line = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"
    assert sighted(line) == [("nvidia-smi-device-handle-failed", "error")]


def test_a_line_a_signature_read_is_left_to_it_and_so_is_its_cause_elsewhere() -> None:
    """Once: the message's signature reads the line; the same code named on another line adds nothing."""
    line = "RuntimeError: CUDA error: no CUDA-capable device is detected"
    assert sighted(line) == [("cuda-no-device", signatures.READER)]
    assert sighted(f"{line}\ncode=100(cudaErrorNoDevice)") == [("cuda-no-device", signatures.READER)]
    found = paste.read("cudaGetDeviceProperties returned 802\ncode=802(cudaErrorSystemNotReady)")
    assert [(s["id"], s["line"], s["values"]) for s in found.signatures] == [
        ("cuda-error-802-fabric-not-ready", 1, {"code": "cudaErrorSystemNotReady", "number": "802"}),
        ("cuda-error-802-fabric-not-ready", 2, {"code": "cudaErrorSystemNotReady", "number": "802"}),
    ]
    assert found.kinds == {codes.READER: 2}


def test_a_line_with_several_codes_shows_the_innermost() -> None:
    line = "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown."
    assert codes.shown(line).name == "NVML_ERROR_DRIVER_NOT_LOADED"
    assert codes.shown("RuntimeError: NCCL error: ncclUnhandledCudaError: cudaErrorMemoryAllocation").number == 2


def test_the_code_reader_reads_in_linear_time() -> None:
    """Lines packed with library names, numbers and texts: the work grows with the input, not its square."""
    piece = "CUDA error 2 NCCL cuda code=3 (cudaErrorX) : unknown error 'out of memory' GPU "
    for shape in (piece, "cuda" * 20 + " error 1 ", "NVML: Timeout, "):
        small, large = (shape * (n // len(shape)) for n in (2_500, 20_000))
        grew = growth(codes.shown, small, large)
        assert grew < LINEAR, (shape, grew)


def test_a_code_in_a_paste_is_judged_by_the_check_that_owns_its_cause(tmp_path: Path) -> None:
    """End to end: the CUDA samples' line for error 802 fails driver.fabric with the fabric manager's cure."""
    pasted = tmp_path / "err.log"
    pasted.write_text('CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) "cudaSetDevice(0)"\n')
    proc = gpudoctor("check", "--from", str(pasted), "--only", "driver.fabric", "--json")
    assert proc.returncode == 1, proc.stderr
    [result] = [c for c in json.loads(proc.stdout)["checks"] if c["check_id"] == "driver.fabric"]
    assert result["status"] == "fail" and result["aspect"] == "cuda-error-802-fabric-not-ready"
    assert any("nvidia-fabricmanager" in c for c in result["remediation"]["commands"])
    assert result["quotes"] == [f"line 1: {pasted.read_text().strip()}"]


# ---------------------------------------------------------------------------------------------------------
# docs/CODES.md
# ---------------------------------------------------------------------------------------------------------

CODES_MD = Path(__file__).resolve().parent.parent / "docs" / "CODES.md"


def test_the_doc_lists_every_code_a_machine_can_cause_with_its_signature() -> None:
    text = CODES_MD.read_text(encoding="utf-8")
    for code in EVERY:
        if code.by in ("machine", "either"):
            row = f"| {code.number} | `{code.name}` |"
            assert row in text and f"`{code.signature}`" in text.split(row, 1)[1].split("\n", 1)[0], code.name
    for table in TABLES.values():
        assert f"`{table.enum}`" in text and table.newest in text, table.id


def test_the_docs_examples_read_as_the_doc_says() -> None:
    """Each row of CODES.md's example table: the line (as shown, elisions and all) gives the cause it names."""
    text = CODES_MD.read_text(encoding="utf-8").split("Examples, each one line of a paste:", 1)[1]
    rows = re.findall(r"^\| `(.+?)` \| [^|]+ \| (?:`([a-z0-9-]+)`|none) \|$", text, re.M)
    assert len(rows) >= 8
    for line, expected in rows:
        assert cause(line) == ({expected} if expected else set()), line


def test_a_launch_timeout_cure_covers_windows_tdr() -> None:
    """cudaErrorLaunchTimeout (702) on Windows is the display driver model's TDR watchdog: its cure raises TdrDelay
    (Microsoft's TDR registry keys) or moves a display-less GPU to the TCC driver model (nvidia-smi -dm 1)."""
    fix = signatures.table()["cuda-launch-timeout"].fix
    assert any("GraphicsDrivers" in f and "TdrDelay" in f and "REG_DWORD" in f for f in fix)
    assert any(f.startswith("nvidia-smi -i 0 -dm 1") for f in fix)


def test_cudnn_not_initialized_cures_a_full_gpu_and_a_driver_older_than_the_cuda_runtime() -> None:
    """cudnnStatus_t CUDNN_STATUS_NOT_INITIALIZED (cuDNN API reference): cudnnCreate() failed, "usually due to an
    error in the CUDA Runtime API called by cudnnCreate() or by an error in the hardware setup": the GPU's memory
    full (who holds it), or a driver older than the CUDA that torch and cuDNN run (which release it supports)."""
    fix = signatures.table()["cudnn-handle-not-initialized"].fix
    assert any(f.startswith("nvidia-smi --query-compute-apps=") for f in fix)
    assert any("torch.version.cuda" in f and "torch.backends.cudnn.version()" in f for f in fix)
    assert any(f.startswith("nvidia-smi | head -4") and "upgrade the NVIDIA driver" in f for f in fix)


def test_a_code_in_torchs_warning_that_falls_back_to_another_plan_is_no_failure() -> None:
    """aten/src/ATen/native/cudnn/Conv_v8.cpp warns for a cuDNN execution plan that fails and tries the next one:
    the status it names is not the program's error. The same status raised is."""
    warned = (
        "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/conv.py:456: UserWarning: Plan failed with a "
        "cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: "
        "CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)"
    )
    assert paste.read(warned).signatures == []
    assert paste.read("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED").signatures


def test_a_line_repeated_in_a_paste_is_read_once_by_the_signature_that_took_it() -> None:
    """The same message twice (a server retrying, a log printed twice): the code reader skips the repeat as it skips
    the line a signature already read, so a general code sighting never stands beside the specific one."""
    line = (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.00 MiB on device 0: cudaMalloc failed: out of "
        "memory"
    )
    ids = [s["id"] for s in paste.read(f"{line}\nllama_model_load: retrying\n{line}\n").signatures]
    assert ids == ["ggml-cuda-buffer-out-of-memory"]


@pytest.mark.parametrize(
    "line",
    [
        # ollama's gpu_info_nvcuda.c: the driver API (nvcuda.dll's name on Windows, libcuda elsewhere) refused cuInit
        "nvcuda init failure: 999",
        'time=2024-08-30T10:00:00.000Z level=INFO source=gpu.go:123 msg="cuInit err: 999"',
    ],
)
def test_ollamas_driver_api_failures_are_read_by_their_code(line: str) -> None:
    assert [s["values"]["code"] for s in paste.read(line).signatures] == ["CUDA_ERROR_UNKNOWN"]


def test_err_inside_a_word_is_no_code() -> None:
    assert paste.read("stderr: 2 while loading cuda").signatures == []
