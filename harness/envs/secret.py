"""The installation's held-out key: seeds of synthetic held-out data that no candidate can compute.

A tiny variant's synthetic data used to be a pure function of public code and the manifest's
seed, so a candidate could regenerate the targets it is scored on (issue 20). Variants that set
``heldout = "secret"`` derive their generator seed from this key instead:
``seed = HMAC-SHA256(key, scope)``, where ``scope`` names the family, variant and the manifest's
public seed. The key is 32 random bytes in ``<data root>/heldout.key`` (created 0600 on first
use; the data root is never bound into a sandbox), or ``$EVOBENCH_HELDOUT_KEY`` (64 hex digits)
to reproduce another installation's draw. The candidate's environment is allow-listed, so the
variable never reaches a sandbox. Where the data root is read-only (a container image) and no key
file exists, the process draws a key of its own (logged; draws then differ between workers).

The key is not part of a variant's content hash (the recipe is, the draw is not): results carry
:func:`key_id`, a public fingerprint, so scores from different keys are told apart.

Sharing: a team (or a CI job) that wants comparable tiny scores uses one key: ``bench key export``
prints it, ``bench key import`` installs it as the key file, or a CI secret sets
``$EVOBENCH_HELDOUT_KEY``. ``EVOBENCH_HELDOUT_KEY=public`` scores every secret-keyed variant on
its public draw instead (fully public numbers, labelled ``public`` and regenerable by a candidate).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path

from .data import data_root

log = logging.getLogger(__name__)

KEY_FILE = "heldout.key"
KEY_ENV = "EVOBENCH_HELDOUT_KEY"
KEY_BYTES = 32
PUBLIC = "public"
"""The value of ``$EVOBENCH_HELDOUT_KEY`` that selects the public draw."""


class HeldoutKeyError(RuntimeError):
    """The key file or variable is unusable (wrong size, unreadable, too permissive)."""


def _key_path() -> Path:
    return data_root() / KEY_FILE


def _private_temp(path: Path, key: bytes) -> Path:
    """``key`` as hex in a fresh 0600 file beside ``path``, synced (the caller links or renames it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key.hex().encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def _create(path: Path) -> None:
    """Write a fresh key atomically: the first writer wins, a concurrent one reads the winner's."""
    tmp = _private_temp(path, secrets.token_bytes(KEY_BYTES))
    try:
        os.link(tmp, path)  # fails if another process created it first
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def installation_key() -> bytes:
    """The 32-byte held-out key (``$EVOBENCH_HELDOUT_KEY``, else the key file, created if absent).

    Raises:
        HeldoutKeyError: If the variable or file does not hold 64 hex digits, or the file is
            readable by other users.
    """
    env = os.environ.get(KEY_ENV)
    if env:
        return _decode(env, KEY_ENV)
    path = _key_path()
    if not path.exists():
        try:
            _create(path)
        except OSError as e:
            return _process_key(path, e)
    if path.stat().st_mode & 0o077:
        raise HeldoutKeyError(f"{path} is readable by other users: chmod 600 it (or delete it)")
    return _decode(path.read_text(encoding="ascii").strip(), str(path))


_PROCESS_KEY: list[bytes] = []


def _process_key(path: Path, err: OSError) -> bytes:
    """Where no key file can be written (a read-only container image): a key for this process only.

    Still secret (drawn here, never written), but another process draws another one, so scores
    of secret-keyed variants then compare only within one worker (``heldout_key`` tells).
    """
    if not _PROCESS_KEY:
        _PROCESS_KEY.append(secrets.token_bytes(KEY_BYTES))
        log.warning(
            "held-out key: cannot create %s (%s); using a key for this process only (set %s to share one)",
            path,
            err,
            KEY_ENV,
        )
    return _PROCESS_KEY[0]


def _decode(text: str, where: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise HeldoutKeyError(f"{where} must hold {2 * KEY_BYTES} hex digits")
    return key


def secret_seed(scope: str, key: bytes | None = None) -> int:
    """A 63-bit seed for ``scope`` that only a holder of the key can compute.

    Raises:
        HeldoutKeyError: If the installation key is unusable (see :func:`installation_key`).
    """
    mac = hmac.new(key if key is not None else installation_key(), scope.encode(), hashlib.sha256)
    return int.from_bytes(mac.digest()[:8], "big") >> 1


def key_id(key: bytes | None = None) -> float:
    """A public 24-bit fingerprint of the key (exact as a float metric); reveals nothing of seeds.

    Raises:
        HeldoutKeyError: If the installation key is unusable (see :func:`installation_key`).
    """
    digest = hashlib.sha256(b"evobench-heldout-key-id\x00" + (key or installation_key())).digest()
    return float(int.from_bytes(digest[:3], "big"))


def heldout_seed(params: dict[str, object], scope: str, public_seed: int) -> tuple[int, float | None]:
    """The generator seed a scorer uses and the key id to record (None: public seed).

    ``params["heldout"]``: ``"secret"`` derives the seed from the key and ``scope`` (which should
    include ``public_seed``); ``"public"`` (default) keeps ``public_seed``, e.g. to reproduce the
    draw the progress bounds were measured on.

    Raises:
        ValueError: If ``heldout`` is neither value.
        HeldoutKeyError: If the installation key is unusable.
    """
    mode = str(params.get("heldout", "public"))
    if mode == "public" or public_draw_forced():
        return public_seed, None
    if mode != "secret":
        raise ValueError(f"scorer parameter heldout must be 'secret' or 'public', not {mode!r}")
    key = installation_key()
    return secret_seed(f"{scope}/{public_seed}", key), key_id(key)


def public_draw_forced() -> bool:
    """Whether ``$EVOBENCH_HELDOUT_KEY`` is ``public``: secret-keyed variants use their public draw."""
    return os.environ.get(KEY_ENV, "").strip().lower() == PUBLIC


def key_env_value() -> str:
    """``$EVOBENCH_HELDOUT_KEY`` for a trusted scorer elsewhere (a container, a Modal sandbox).

    Raises:
        HeldoutKeyError: If the installation key is unusable.
    """
    return PUBLIC if public_draw_forced() else installation_key().hex()


def fingerprint(key: bytes | None = None) -> str:
    """:func:`key_id` as six hex digits, the form printed with results (``public``: no key in use).

    Raises:
        HeldoutKeyError: If the installation key is unusable.
    """
    if key is None and public_draw_forced():
        return PUBLIC
    return f"{int(key_id(key)):06x}"


def key_source() -> str:
    """Where the key in use comes from: the variable, the key file (its path), or ``public``."""
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return PUBLIC if env.lower() == PUBLIC else f"${KEY_ENV}"
    return str(_key_path())


def export_key() -> str:
    """The key in use as 64 hex digits (created first if there is none), for a CI secret or a teammate.

    Raises:
        HeldoutKeyError: If the key is unusable, or the public draw is selected (there is no key).
    """
    if public_draw_forced():
        raise HeldoutKeyError(f"${KEY_ENV}=public selects the public draw: there is no key to export")
    return installation_key().hex()


def import_key(text: str, *, force: bool = False) -> Path:
    """Install a shared key as this installation's key file (0600, written atomically).

    An existing different key is replaced only with ``force``; it is kept beside the new one as
    ``heldout.key.<fingerprint>`` so scores made with it can still be reproduced.

    Raises:
        HeldoutKeyError: If ``text`` is not 64 hex digits, or another key is installed and
            ``force`` is not set.
    """
    key = _decode(text, "the imported key")
    path = _key_path()
    if path.exists():
        old = _decode(path.read_text(encoding="ascii").strip(), str(path))
        if old == key:
            return path
        if not force:
            raise HeldoutKeyError(
                f"{path} already holds key {fingerprint(old)}; scores made with it would no longer "
                f"reproduce. Pass --force to replace it (it is kept as {KEY_FILE}.{fingerprint(old)})"
            )
        try:  # the old key stays reachable under its fingerprint; the key file is never absent
            os.link(path, path.with_name(f"{KEY_FILE}.{fingerprint(old)}"))
        except FileExistsError:
            pass
    tmp = _private_temp(path, key)
    os.replace(tmp, path)
    return path
