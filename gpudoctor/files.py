"""Reading and writing the tool's JSON files: atomic writes, one-line errors on reads."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path, text: str) -> None:
    """Write beside the target and rename, so a reader never sees half a file. The file gets the mode any new
    file of this process gets (0644 under umask 022), not mkstemp's 0600: reports are read by other users
    (a CI agent, a web server, node_exporter)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data))


def read_json(path: Path, what: str, error: type[Exception]) -> Any:
    """A JSON file's content, or `error` with one line naming the file and what is wrong with it."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{what} {path} is not valid JSON ({exc})") from None
