"""What a matrix product may differ from a float64 reference by, per precision: shared by compute.gemm (one
GPU at a time) and load.concurrent (every GPU at once), so both call the same results wrong."""

from __future__ import annotations

TOLERANCE = {"bf16": 2e-2, "tf32": 5e-3, "fp16": 1e-2}
