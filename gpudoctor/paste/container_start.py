"""A container a runtime started, shown by the runtime's own lines in the paste, and the program's missing driver in
it: a container gets the GPUs and the driver's libraries only when its start asks for them, so a no-driver error
there names the start (data/signatures/containers.toml container-started-no-nvidia-driver), unless a pasted start
command did ask (then the host or its toolkit is at fault, and the error's own signature says so)."""

from __future__ import annotations

import re

from gpudoctor.paste.found import Found

SIGNATURE = "container-started-no-nvidia-driver"
# The signatures of a driver library this environment cannot load (data/signatures/errors.toml), and torch's own
# answer that it sees no GPU (node.toml).
NO_DRIVER = ("no-nvidia-driver", "libcuda-not-found", "libnvidia-ml-not-found", "torch-cuda-not-available")
NEEDLES = ("... done", "Container ", "Unable to find image", "docker", "podman", "nerdctl", "kubectl")
STARTED = (
    # Compose v1 (docker/compose 1.x compose/parallel.py ParallelStreamWriter.write: "{msg} {name:<width} ... {status}",
    # msg Creating, Recreating or Starting as `up` and `run` start a service's container).
    re.compile(r"(?:Creating|Recreating|Starting) [\w.-]{1,200} {0,80}\.\.\. done\b"),
    # Compose v2 (docker/compose v2 pkg/progress/event.go: the event "Container <name>" with its status, CreatedEvent,
    # StartedEvent, RunningEvent, RecreatedEvent).
    re.compile(r"\bContainer [\w.-]{1,200} {1,10}(?:Created|Started|Running|Recreated)\b"),
    # Docker's pull notice as `docker run` starts an image it lacks (docker/cli cli/command/container/create.go).
    re.compile(r"Unable to find image '[^'\n]{1,300}' locally"),
)
# A start command as pasted, a shell prompt before it or not: docker, podman or nerdctl run, Compose's run or up,
# kubectl's run or exec.
COMMAND = re.compile(
    r"^(?:[^\n$#>]{0,80}[$#>] {0,2})?(?:sudo {1,4})?(?:(?:docker|podman|nerdctl)(?:-compose| {1,4}compose)?"
    r" {1,4}(?:run|up|exec|start)|kubectl {1,4}(?:run|exec))\b(?P<arguments>[^\n]{0,2000})"
)
# What asks for the GPUs in a start command: Docker's --gpus (19.03+), the nvidia runtime (nvidia-docker 2, Compose
# file format 2.3), a CDI device (Podman, NVIDIA Container Toolkit cdi-support), a nvidia.com/gpu limit (kubectl run).
ASKS_FOR_GPUS = re.compile(r"--gpus\b|--runtime[= ]{1,3}nvidia\b|nvidia\.com/gpu")


def sight(found: Found, reader: str) -> None:
    """The start's own signature on the first no-driver line, where the paste shows a runtime starting the container
    and no pasted start command asks for the GPUs."""
    errors = [s for s in found.signatures if s["id"] in NO_DRIVER]
    if not errors:
        return
    started, asked = False, False
    for number in found.holding(NEEDLES):
        line = found.lines[number]
        command = COMMAND.match(line)
        if command:
            started = True
            asked = asked or bool(ASKS_FOR_GPUS.search(command.group("arguments")))
        elif any(pattern.search(line) for pattern in STARTED):
            started = True
    if started and not asked:
        found.signature(SIGNATURE, reader, errors[0]["line"] - 1, {})
