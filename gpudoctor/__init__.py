"""gpudoctor: will this machine train PyTorch models on all its GPUs?"""

__version__ = "0.1.0"
