"""A kernel that ran and was stopped (issue 49): CUDA's unknown error where a program waits for its kernels
(cudaDeviceSynchronize and the other synchronize calls, CUDA C++ Programming Guide, Error Checking: a kernel's error
is reported by a later call) is not CUDA failing to start, and Windows' own message of a display watchdog reset
(Timeout Detection and Recovery) names the watchdog; both get its cures. The lines are their emitters' formats."""

from __future__ import annotations

import pytest

from gpudoctor.paste import read, signatures

STOPPED = "cuda-unknown-error-after-kernel"
TDR = "windows-display-driver-reset"


def ids(text: str) -> set[str]:
    return {s["id"] for s in read(text).signatures}


@pytest.mark.parametrize(
    "line",
    [
        # The checkCudaErrors of NVIDIA's CUDA samples (helper_cuda.h: "CUDA error at %s:%d code=%d(%s) \"%s\"").
        'CUDA error at main.cu:196 code=999(cudaErrorUnknown) "cudaDeviceSynchronize()"',
        # A wrapper that prints the number, then where (std::cerr << "CUDA error = " << result << " at " ...),
        # as pasted with the space before "at" lost.
        "CUDA error = 999 at main.cu:196 'cudaDeviceSynchronize()'",
        "CUDA error = 999at main.cu:196'cudaDeviceSynchronize()/n",
        # torch's C10_CUDA_CHECK text of cudaErrorUnknown, at a stream's synchronize.
        "RuntimeError: CUDA error: unknown error (cudaStreamSynchronize)",
        # The driver API's name at cuCtxSynchronize.
        "cuCtxSynchronize() failed: CUDA_ERROR_UNKNOWN",
    ],
)
def test_an_unknown_error_where_a_kernel_is_awaited_is_a_stopped_kernel(line: str) -> None:
    assert ids(line) == {STOPPED}


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: unknown error",  # no synchronize named: CUDA's start, nvidia_uvm
        "cudaGetDeviceCount returned 999 -> unknown error",
    ],
)
def test_an_unknown_error_elsewhere_stays_a_failed_start(line: str) -> None:
    assert STOPPED not in ids(line)


@pytest.mark.parametrize(
    "line",
    [
        "CUDA error = 35 at main.cu:12 'cudaSetDevice(0)'",  # a number glued to nothing: read as before
        "cudaMalloc failed with error 2at line 40",  # a number glued to a word is still the number
    ],
)
def test_a_number_before_a_word_is_the_code(line: str) -> None:
    assert ids(line)


def test_a_hexadecimal_figure_is_no_code() -> None:
    assert not ids("CUDA device code 10de:2204")


@pytest.mark.parametrize(
    "line",
    [
        # Windows' System log, source nvlddmkm, event 4101 (the text Event Viewer shows).
        "Display driver nvlddmkm stopped responding and has successfully recovered.",
        # The notice Windows shows (NVIDIA Nsight Visual Studio Edition, Timeout Detection & Recovery).
        "Display driver stopped responding and has recovered",
    ],
)
def test_windows_display_driver_reset_is_the_watchdog(line: str) -> None:
    assert ids(line) == {TDR}


@pytest.mark.parametrize("entry", [STOPPED, TDR])
def test_the_cures_raise_tdrdelay_and_keep_kernels_off_the_display(entry: str) -> None:
    signature = signatures.table()[entry]
    assert signature.owner == "driver.gpu-modes"
    fixes = " ".join(signature.fix)
    assert "TdrDelay" in fixes and "GraphicsDrivers" in fixes
    assert "display_active" in fixes
