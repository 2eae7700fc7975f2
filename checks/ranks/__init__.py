"""Rank-side code of the built-in checks: what runs in a workload's child processes (one module beside each
check that runs a workload), importing torch at the top. A check names its worker here by its full target,
"gpudoctor.checks.ranks.<module>:<function>"; the check modules themselves import no torch and nothing here.
Discovery finds no checks in this package: it holds workers only.
"""
