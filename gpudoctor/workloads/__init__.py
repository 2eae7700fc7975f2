"""Workloads: what runs in a child process session with a timeout (isolate), one rank per GPU through
torch.distributed (launch), how figures are timed (measure), and the guard that bounds a call that could hang
(guard). A hang or a crash comes back as a result; every child is gone afterwards."""
