"""`nvidia-smi -L`: each GPU's index, full name and UUID (the index a `-q` section of that UUID is placed at), and
the MIG devices listed under it, recorded at the end of the paste only where nothing else (the table's MIG box,
`-q`) gives that GPU's MIG devices."""

from __future__ import annotations

import re

from gpudoctor.paste.nvsmi.state import MAX_GPUS, Paste, Weak, clean

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)", and the MIG devices under it, newer
# "  MIG 3g.40gb Device 0: (UUID: MIG-...)" or R450's "MIG-GPU-<uuid>/<GI>/<CI>".
LIST_GPU = re.compile(r"^\s*GPU (\d{1,5}): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
LIST_MIG = re.compile(r"^\s*MIG \S+\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")
MIG_UUID_IDS = re.compile(r"/(\d+)/(\d+)$")


def starts(line: str) -> bool:
    return LIST_GPU.match(line) is not None


def read(paste: Paste, i: int) -> int:
    """The `-L` lines from line `i` on: each GPU's name and UUID, and the MIG devices listed under it."""
    index = -1
    while i < len(paste.lines):
        line = clean(paste.lines[i])
        listed, mig = LIST_GPU.match(line), LIST_MIG.match(line)
        if listed and int(listed.group(1)) < MAX_GPUS:
            index = int(listed.group(1))
            paste.fact("nvml.status", "ok", i)
            paste.gpu(index, {"name": listed.group(2).strip(), "uuid": listed.group(3)}, i)
            paste.index_of_uuid.setdefault(listed.group(3), index)
        elif mig and 0 <= index < MAX_GPUS:
            ids = MIG_UUID_IDS.search(mig.group(2))
            device = {
                "index": int(mig.group(1)),
                "gpu_instance_id": int(ids.group(1)) if ids else None,
                "compute_instance_id": int(ids.group(2)) if ids else None,
                "memory_total_mib": None,
            }
            paste.mig_listed.setdefault(index, ([], i))[0].append(device)
        else:
            break
        i += 1
    return i


def finish(paste: Paste) -> None:
    """Each GPU's listed MIG devices, to be recorded where nothing else gives them."""
    for index, (devices, line) in paste.mig_listed.items():
        paste.weak.append(Weak(index, "mig_devices", devices, line, lambda recorded: recorded is not None))
