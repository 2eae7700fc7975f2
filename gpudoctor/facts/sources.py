"""Where facts come from, named on their own: the registry validates a check's `needs` against them without loading
the facts' shapes (facts/schema.py re-exports them)."""

# Gathering one costs: "torch" imports torch (seconds), "kernel_log" and "nvcc" run a program. Checks declare
# which they need (registry), and only those are gathered.
SOURCES = ("nvml", "torch", "system", "kernel_log", "nvcc")
