"""Reading and writing the tool's files: atomic writes; reads that take only a regular file (or standard input
for `-`), at most MAX_INPUT_BYTES of it, in any encoding a tool writes, and say in one line what is wrong."""

from __future__ import annotations

import json
import os
import select
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpudoctor.errors import InputError

MAX_INPUT_BYTES = 64 * 2**20  # a whole nvidia-bug-report.log of a big node is a few MB; 200 MB is no capture
MAX_DEPTH = 64  # nesting of a JSON document: gpudoctor's own go 8 deep
KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def require_writable(path: str | None) -> None:
    """A file to write whose folder is missing is bad input, found before any work is done, not after."""
    if path and not Path(path).resolve().parent.is_dir():
        raise InputError(f"cannot write {path}: folder {Path(path).resolve().parent} does not exist")


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


def read_input(path: Path | str, what: str, error: type[Exception], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file, of a pipe (`<(command)`, a FIFO: for at most PIPE_WAIT_S), or of standard
    input for `-`: never a device or socket (/dev/zero never ends), never more than `limit`; else `error`
    with one line."""
    stdin = str(path) == "-"
    data = _read_stdin(limit, what, error) if stdin else _read_path(Path(path), what, error, limit)
    if len(data) > limit:
        raise error(f"{what} {path} is larger than {limit // 2**20} MB, the most gpudoctor reads")
    return data


def _read_path(path: Path, what: str, error: type[Exception], limit: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # a FIFO's open does not wait for a writer
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind not in (stat.S_IFIFO, stat.S_IFREG):
        os.close(fd)  # a folder is not even opened as a file object (fdopen refuses it with a traceback)
        raise error(f"{what} {path} is {KINDS.get(kind, 'not a regular file')}, not a file gpudoctor reads")
    with os.fdopen(fd, "rb", buffering=0) as handle:
        try:
            if kind == stat.S_IFIFO:
                return _read_pipe(fd, limit, path, what, error)
            os.set_blocking(fd, True)
            return handle.read(limit + 1)
        except OSError as exc:
            raise error(f"cannot read {what} {path}: {exc.strerror}") from None


PIPE_WAIT_S = 30.0  # a pipe that sends nothing for this long has no writer that will


def _read_stdin(limit: int, what: str, error: type[Exception]) -> bytes:
    """Standard input as a pipe is read (the same silence limit): a terminal or a pipe nobody writes to is an
    error after PIPE_WAIT_S, not a wait without end; a file redirected in is read whole."""
    fd = sys.stdin.fileno()
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return sys.stdin.buffer.read(limit + 1)
    return _read_pipe(fd, limit, Path("-"), what, error)


def _read_pipe(fd: int, limit: int, path: Path, what: str, error: type[Exception]) -> bytes:
    """A pipe's bytes until its writer closes it (none at all where nobody holds it open), `limit` + 1 at
    most; `error` if it stays silent PIPE_WAIT_S."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        ready, _, _ = select.select([fd], [], [], PIPE_WAIT_S)
        if not ready:
            said = "standard input" if str(path) == "-" else f"{what} {path}"
            raise error(f"{said} sent nothing for {PIPE_WAIT_S:g} s (a pipe whose writer never writes)")
        try:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        except BlockingIOError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def decode(data: bytes) -> str | None:
    """Text as the tools write it: UTF-8 (with or without a BOM), UTF-16 or UTF-32 with a BOM, or UTF-16
    without one (its NUL bytes tell the byte order); None if it is none of them."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return _decoded(data[len(bom) :], encoding)
    head = data[:512]
    if len(head) >= 2 and head.count(0) * 3 >= len(head):  # ASCII as UTF-16: every other byte NUL
        even = head[0::2].count(0) > head[1::2].count(0)
        return _decoded(data, "utf-16-be" if even else "utf-16-le")
    return _decoded(data, "utf-8")


BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def _decoded(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        return None


def read_text(path: Path | str, what: str, error: type[Exception], limit: int = MAX_INPUT_BYTES) -> str:
    """A text file (see read_input and decode); `error` if it is not text."""
    text = decode(read_input(path, what, error, limit))
    if text is None:
        raise error(f"{what} {path} is not text: neither UTF-8 nor UTF-16/32 with a byte-order mark")
    return text


def read_json(path: Path | str, what: str, error: type[Exception], limit: int = MAX_INPUT_BYTES) -> Any:
    """A JSON file's content (see parse_json), or `error` with one line naming the file and the problem."""
    return parse_json(read_input(path, what, error, limit), path, what, error)


def parse_json(data: bytes, path: Path | str, what: str, error: type[Exception]) -> Any:
    """JSON read from `path`'s bytes, or `error` naming what is wrong: not text, not JSON, NaN or Infinity (not
    JSON either, though Python writes them), a number past Python's digit limit, or nesting deeper than
    MAX_DEPTH."""
    text = decode(data)
    if text is None:
        raise error(f"{what} {path} is not text: neither UTF-8 nor UTF-16/32 with a byte-order mark")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise error(f"{what} {path} is nested too deep (gpudoctor reads at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise error(f"{what} {path} is not valid JSON ({str(exc).splitlines()[0]})") from None
    if depth(value) > MAX_DEPTH:
        raise error(f"{what} {path} is nested too deep (gpudoctor reads at most {MAX_DEPTH} levels)")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def depth(data: Any) -> int:
    """How deep lists and objects nest in `data`, counted without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest
