"""Helpers the tests share: fixture paths and the console script (common), namespace hosts (netns), a real
Slurm on them (slurmhosts), synthetic clusters (clustersim), a large cluster report (clusterreport), the
monitoring formats' real consumers (consumers), and the torch.cuda stand-in (cudastub). Test files import
them as `from helpers.<module> import ...`; conftest.py keeps only fixtures and hooks."""
