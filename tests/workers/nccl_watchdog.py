"""A worker that fails the way NCCL fails, run through the real launcher on gloo: a collective that times out
kills its process with SIGABRT and records nothing (ProcessGroupNCCL's watchdog with
TORCH_NCCL_ASYNC_ERROR_HANDLING=3, torch's default), instead of raising as gloo does."""

from __future__ import annotations

import os
from typing import Any


def worker(ctx: Any) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    ctx.phase("all_reduce 1 MiB in-place")
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError:
        os.abort()
    return {"rank": ctx.rank}
