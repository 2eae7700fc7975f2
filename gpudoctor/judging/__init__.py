"""Judging: pure functions from facts and figures to verdicts, and the knowledge they judge by. What a figure
should be (expect, references, hardware: published measurements and datasheets), how figures compare
(compare), which builds run on which drivers (compat, tables), and the judges several checks share (pairs,
allreduce, ddp, gemm). Nothing here runs a workload or prints."""
