"""A replaying NVML backend: serves the calls a snapshot recorded, so the gateway runs for real in tests.

A call the recording lacks answers FunctionNotFound, as an older driver's library would; a device handle
lookup it lacks succeeds (recordings older than handle lookups being recorded).
"""

from __future__ import annotations

import copy
from typing import Any

from gpudoctor.facts.nvml import ERROR_FUNCTION_NOT_FOUND, HANDLE_LOOKUP, NvmlCallError, call_key


class ReplayNvml:
    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording

    def call(self, name: str, *args: Any) -> Any:
        key = call_key(name, args)
        if key not in self.recording:
            if name == HANDLE_LOOKUP:
                return None
            raise NvmlCallError(ERROR_FUNCTION_NOT_FOUND, f"{key} was not recorded")
        answer = self.recording[key]
        if isinstance(answer, dict) and "nvml_error" in answer:
            raise NvmlCallError(answer["nvml_error"])
        return copy.deepcopy(answer)
