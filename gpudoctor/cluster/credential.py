"""The run's credential: what makes a value in the store one that this run wrote.

torch's TCPStore takes any connection and any key. A stranger who reaches its port could post a node's report,
a verdict or a plan, and read everything (TCPStore even lists its keys). So every value a run writes is sealed
with a key only the run holds: encrypted, then authenticated together with the store key it sits under. The
key comes from what a cluster already trusts:

- `GPUDOCTOR_RUN_SECRET` (at least 16 characters), or `GPUDOCTOR_RUN_SECRET_FILE` (a regular file nobody but
  its owner may read), handed by the launcher to every node; else
- under Slurm, munge: rank 0 draws a random key and posts it to each node inside a munge credential only that
  node's user can decode (`munge --restrict-uid`), bound to the run and the rank; a node accepts it only if
  munge says it was made by its own user. A credential is decoded once (munge refuses a replay).

Without either, the run goes on unsealed under the old predictable prefix, and its report says so.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.errors import InputError

SECRET_ENV = "GPUDOCTOR_RUN_SECRET"
SECRET_FILE_ENV = "GPUDOCTOR_RUN_SECRET_FILE"
MUNGE_SOCKET_ENV = "GPUDOCTOR_MUNGE_SOCKET"  # where munged listens, if not munge's default
MIN_SECRET = 16
MUNGE_TIMEOUT_S = 10.0
HANDOFF_POLL_S = 0.25
NONCE_BYTES = 16


class CredentialError(InputError):
    """The run's credential is missing where it was promised, or unusable: one line for the user."""


@dataclass(frozen=True)
class Credential:
    """The run's sealing key and where it came from ("secret", "munge" or "none")."""

    kind: str
    key: bytes | None = None

    def prefix(self, run_id: str) -> str:
        """The run's key prefix: derived from the key, so a stranger cannot name the run's keys."""
        if self.key is None:
            return f"gpudoctor/{run_id}/"
        tag = hmac.new(self.key, f"prefix:{run_id}".encode(), hashlib.sha256).hexdigest()[:24]
        return f"gpudoctor/{run_id}.{tag}/"

    def seal(self, store_key: str, text: str) -> str:
        """`text` encrypted (a SHAKE-256 keystream under a fresh nonce) and then authenticated (HMAC-SHA256 over
        the store key, the nonce and the ciphertext): a stranger can neither read it nor move it to another
        key. Plain without a key."""
        if self.key is None:
            return text
        nonce = secrets.token_bytes(NONCE_BYTES)
        body = nonce + _xor(text.encode(), self._stream(nonce, len(text.encode())))
        return f"{self._mac(store_key, body)}:{base64.urlsafe_b64encode(body).decode()}"

    def open(self, store_key: str, sealed: str) -> str | None:
        """The text if this run sealed it under this very key; None for anything else."""
        if self.key is None:
            return sealed
        mac, separator, encoded = sealed.partition(":")
        try:
            body = base64.urlsafe_b64decode(encoded.encode("ascii"))
        except ValueError:
            return None
        if not separator or len(body) < NONCE_BYTES or not hmac.compare_digest(mac, self._mac(store_key, body)):
            return None
        nonce, cipher = body[:NONCE_BYTES], body[NONCE_BYTES:]
        return _xor(cipher, self._stream(nonce, len(cipher))).decode(errors="replace")

    def _subkey(self, purpose: str) -> bytes:
        assert self.key is not None
        return hmac.new(self.key, purpose.encode(), hashlib.sha256).digest()

    def _stream(self, nonce: bytes, size: int) -> bytes:
        return hashlib.shake_256(self._subkey("encrypt") + nonce).digest(size) if size else b""

    def _mac(self, store_key: str, body: bytes) -> str:
        return hmac.new(self._subkey("mac"), store_key.encode() + b"\n" + body, hashlib.sha256).hexdigest()


def _xor(data: bytes, stream: bytes) -> bytes:
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


NONE = Credential("none")


def from_environment(environ: Mapping[str, str]) -> Credential | None:
    """The secret the launcher handed this node, or None where it handed none."""
    if environ.get(SECRET_ENV):
        secret = environ[SECRET_ENV]
        if len(secret) < MIN_SECRET:
            raise CredentialError(f"{SECRET_ENV} is {len(secret)} characters: use at least {MIN_SECRET}")
        return Credential("secret", hashlib.sha256(secret.encode()).digest())
    if environ.get(SECRET_FILE_ENV):
        return Credential("secret", hashlib.sha256(_secret_file(Path(environ[SECRET_FILE_ENV]))).digest())
    return None


def _secret_file(path: Path) -> bytes:
    try:
        info = path.stat()
    except OSError as exc:
        raise CredentialError(f"{SECRET_FILE_ENV}={path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CredentialError(f"{SECRET_FILE_ENV}={path} is not a regular file")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialError(
            f"{SECRET_FILE_ENV}={path} may be read by others (mode {info.st_mode & 0o777:o}): chmod 600"
        )
    data = path.read_bytes()[:4096].strip()
    if len(data) < MIN_SECRET:
        raise CredentialError(f"{SECRET_FILE_ENV}={path} holds {len(data)} bytes: use at least {MIN_SECRET}")
    return data


# --- munge ------------------------------------------------------------------------------------------------
def munge_available(environ: Mapping[str, str]) -> bool:
    """munge is installed and its daemon answers (where Slurm authenticates with munge, it does on every
    node; where it does not, no node uses munge, so all agree)."""
    if not (shutil.which("munge") and shutil.which("unmunge")):
        return False
    return _run(["munge", *_munge_args(environ), "--no-input"], "").returncode == 0


def _munge_args(environ: Mapping[str, str]) -> list[str]:
    socket = environ.get(MUNGE_SOCKET_ENV)
    return [f"--socket={socket}"] if socket else []


def _payload(run_id: str, rank: int, key: bytes) -> str:
    return f"gpudoctor:{run_id}:{rank}:{key.hex()}"


def munge_issue(run_id: str, rank: int, key: bytes, ttl_s: float, environ: Mapping[str, str]) -> str:
    """A munge credential holding the key for one rank of one run, decodable only by this user."""
    ttl = str(max(60, min(3600, math.ceil(ttl_s))))
    argv = ["munge", *_munge_args(environ), f"--restrict-uid={os.geteuid()}", f"--ttl={ttl}"]
    proc = _run(argv, _payload(run_id, rank, key))
    if proc.returncode:
        raise CredentialError(f"munge could not make a credential: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout.strip()


def munge_accept(credential: str, run_id: str, rank: int, environ: Mapping[str, str]) -> bytes | None:
    """The key inside a credential made by this user for this run and rank; None for anything else."""
    proc = _run(["unmunge", *_munge_args(environ), "--numeric"], credential)
    if proc.returncode:
        return None
    head, _, payload = proc.stdout.partition("\n\n")
    fields = dict(line.split(":", 1) for line in head.splitlines() if ":" in line)
    if fields.get("UID", "").strip() != str(os.geteuid()):
        return None
    prefix = f"gpudoctor:{run_id}:{rank}:"
    if not payload.startswith(prefix):
        return None
    try:
        return bytes.fromhex(payload[len(prefix) :].strip())
    except ValueError:
        return None


def _run(argv: list[str], given: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, input=given, capture_output=True, text=True, timeout=MUNGE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def handoff_key(run_id: str, rank: int) -> str:
    """Where rank 0 posts a node's munge credential: under the run's public prefix (the key is not known yet)."""
    return f"gpudoctor/{run_id}/credential/{rank}"


def munge_lead(store: Any, run_id: str, world_size: int, ttl_s: float, environ: Mapping[str, str]) -> Credential:
    """Rank 0: draw the run's key and post it to every other rank inside its own munge credential."""
    key = secrets.token_bytes(32)
    for rank in range(1, world_size):
        store.set(handoff_key(run_id, rank), munge_issue(run_id, rank, key, ttl_s, environ))
    return Credential("munge", key)


def munge_follow(store: Any, run_id: str, rank: int, wait_s: float, environ: Mapping[str, str]) -> Credential:
    """Any other rank: wait for rank 0's credential for this rank and accept only one munge vouches for."""
    deadline = time.monotonic() + wait_s
    key = handoff_key(run_id, rank)
    tried: set[bytes] = set()
    while time.monotonic() < deadline:
        if store.check([key]):
            sealed = store.get(key)
            if sealed not in tried:
                tried.add(sealed)
                found = munge_accept(sealed.decode(errors="replace"), run_id, rank, environ)
                if found is not None:
                    return Credential("munge", found)
        time.sleep(HANDOFF_POLL_S)
    raise CredentialError(f"no munge credential from rank 0 that this node's munge accepts within {wait_s:g} s")
