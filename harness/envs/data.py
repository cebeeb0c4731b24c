"""Family data: cache location, checksummed download, and the 'missing data' error."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from .manifest import DataSource
from .registry import Variant


class DataMissingError(FileNotFoundError):
    """A variant's data has not been fetched; the message names the command that fetches it."""


class ChecksumError(ValueError):
    """A downloaded or cached file does not match its recorded sha256."""


class DataAccessError(PermissionError):
    """Gated data: the credentials are missing or were refused; the message says how to get access."""


HF_TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
"""Environment variables read, in order, for a Hugging Face token."""
HF_DEFAULT_ENDPOINT = "https://huggingface.co"


def data_root() -> Path:
    """Root of the data cache: ``$EVOBENCH_DATA`` or ``~/.cache/evobench/data``."""
    env = os.environ.get("EVOBENCH_DATA")
    return Path(env) if env else Path.home() / ".cache" / "evobench" / "data"


def family_data_dir(family: str) -> Path:
    """Cache directory of one family."""
    return data_root() / family


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _recorded_path(family: str) -> Path:
    return family_data_dir(family) / "recorded_sha256.json"


def expected_sha256(family: str, source: DataSource) -> str:
    """The pinned checksum, or the one recorded on the first fetch of an unpinned source."""
    if source.sha256:
        return source.sha256
    rec = _recorded_path(family)
    if rec.is_file():
        return str(json.loads(rec.read_text()).get(source.filename, ""))
    return ""


def record_sha256(family: str, checksums: dict[str, str]) -> None:
    """Record the checksums of unpinned sources (first fetch or import); later ones must match.

    The table is rewritten atomically, so a crash never leaves it half-written.
    """
    rec = _recorded_path(family)
    rec.parent.mkdir(parents=True, exist_ok=True)
    table = json.loads(rec.read_text()) if rec.is_file() else {}
    table.update(checksums)
    fd, tmp_name = tempfile.mkstemp(dir=rec.parent, prefix=".part-")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(table, indent=2, sort_keys=True))
    os.replace(tmp_name, rec)


def require_data(variant: Variant) -> Path:
    """Check that every data file of a variant is present.

    Returns:
        The family's cache directory.

    Raises:
        DataMissingError: If a file is missing; names ``bench data fetch <family>``.
    """
    d = family_data_dir(variant.family)
    missing = [name for _, s in variant.data for name in missing_files(d, s)]
    gated = [s for _, s in variant.data if s.auth and missing_files(d, s)]
    if missing:
        note = "".join(
            f" {s.filename} is gated: the fetch needs a token in {' or '.join(HF_TOKEN_VARS)}. {s.access}"
            for s in gated
        )
        raise DataMissingError(
            f"{variant.id} needs data that is not in {d}: {', '.join(missing)}. "
            f"Run `bench data fetch {variant.family}` (needs network access) first, or "
            f"`bench data import {variant.family} DIR` from a local copy.{note}".strip()
        )
    return d


def missing_files(d: Path, source: DataSource) -> list[str]:
    """Files of a source that are not in the cache directory ``d``."""
    if source.files:
        return [
            f"{source.filename}/{rel}" for rel in source.files if not (d / source.filename / rel).is_file()
        ]
    return [] if (d / source.filename).is_file() else [source.filename]


Downloader = Callable[[str, Path], None]


def download_url(source: DataSource) -> str:
    """The source's URL; for Hugging Face sources, rebased on ``$HF_ENDPOINT`` when that is set."""
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/")
    if source.auth == "huggingface" and endpoint and source.url.startswith(HF_DEFAULT_ENDPOINT + "/"):
        return endpoint + source.url[len(HF_DEFAULT_ENDPOINT) :]
    return source.url


def auth_headers(source: DataSource) -> dict[str, str]:
    """HTTP headers carrying the credentials a source needs (none for public data).

    Raises:
        DataAccessError: The source is gated and no token is set; names the variables and ``access``.
    """
    if source.auth != "huggingface":
        return {}
    token = next((os.environ[v].strip() for v in HF_TOKEN_VARS if os.environ.get(v, "").strip()), "")
    if not token:
        raise DataAccessError(
            f"{source.filename} is gated on Hugging Face and no token is set: put a token with read "
            f"access in {' or '.join(HF_TOKEN_VARS)}. {source.access}".strip()
        )
    return {"Authorization": f"Bearer {token}"}


class _SameHostAuthRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but send the credentials only to the host they were meant for.

    Hugging Face answers a file request with a redirect to a signed storage URL on another host,
    which must not receive (and may refuse) the user's token.
    """

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if (
            new is not None
            and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc
        ):
            new.remove_header("Authorization")
        return new


def _urllib_download(url: str, dest: Path, headers: dict[str, str] | None = None, access: str = "") -> None:
    req = urllib.request.Request(url, headers=headers or {})  # noqa: S310 - URL from the manifest
    opener = urllib.request.build_opener(_SameHostAuthRedirect)
    try:
        with opener.open(req, timeout=60) as r, dest.open("wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
    except urllib.error.HTTPError as e:
        if headers and e.code in (401, 403):
            raise DataAccessError(
                f"{url}: access refused (HTTP {e.code}) for the token in {' or '.join(HF_TOKEN_VARS)}. "
                f"{access}".strip()
            ) from e
        raise


def _fetch_one(url: str, dest: Path, want: str, download: Downloader) -> None:
    if dest.is_file() and sha256_file(dest) == want:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        download(url, tmp)
        got = sha256_file(tmp)
        if got != want:
            raise ChecksumError(f"{url}: sha256 {got} does not match expected {want}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _below_top(name: str) -> str:
    """An archive member's path below the archive's single top directory (GitHub: ``repo-<sha>/``)."""
    _, _, rest = name.lstrip("./").partition("/")
    return rest


def _fetch_members(url: str, dest_dir: Path, files: dict[str, str], download: Downloader) -> None:
    """Download a tar.gz once and install only the listed members, all sha256-checked, all or nothing.

    Members are read into memory (never extracted by path), so a hostile archive cannot write
    outside ``dest_dir``; links and other non-files are ignored.
    """
    todo = {
        rel: sha
        for rel, sha in files.items()
        if not ((dest_dir / rel).is_file() and sha256_file(dest_dir / rel) == sha)
    }
    if not todo:
        return
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest_dir, prefix=".part-")
    os.close(fd)
    tmp = Path(tmp_name)
    staged: list[tuple[Path, Path]] = []
    try:
        download(url, tmp)
        found: dict[str, bytes] = {}
        try:
            with tarfile.open(tmp, "r:gz") as tar:
                for member in tar:
                    rel = _below_top(member.name)
                    fobj = tar.extractfile(member) if rel in todo and member.isfile() else None
                    if fobj is not None:
                        found[rel] = fobj.read()
        except (tarfile.TarError, EOFError) as e:
            raise ChecksumError(f"{url}: not a readable tar.gz archive ({e})") from e
        lacking = sorted(set(todo) - set(found))
        if lacking:
            raise ChecksumError(f"{url}: the archive lacks {', '.join(lacking)}")
        for rel, blob in sorted(found.items()):
            got = hashlib.sha256(blob).hexdigest()
            if got != todo[rel]:
                raise ChecksumError(f"{url}: {rel}: sha256 {got} does not match expected {todo[rel]}")
            dest = dest_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, part = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            staged.append((Path(part), dest))
        for part_path, dest in staged:
            os.replace(part_path, dest)
        staged.clear()
    finally:
        tmp.unlink(missing_ok=True)
        for part_path, _ in staged:
            part_path.unlink(missing_ok=True)


def fetch_source(family: str, source: DataSource, download: Downloader | None = None) -> Path:
    """Download one source into the cache (atomically) and verify or record its sha256.

    Args:
        family: Family name (cache subdirectory).
        source: The manifest's data source.
        download: Function ``(url, dest)``; replaceable in tests. Default: HTTP(S) with the
            source's credentials (see :func:`auth_headers`); ``file://`` URLs are read locally.

    Returns:
        Path of the verified file (or directory of a file set or archive).

    Raises:
        ChecksumError: If a file does not match the pinned or recorded sha256 (it is deleted), or
            an archive is unreadable or lacks a listed file (nothing is installed).
        DataAccessError: Gated data without a token, or the token was refused.
        OSError: If the download fails.
    """
    if download is None:
        headers = auth_headers(source)

        def download(url: str, dest: Path) -> None:
            _urllib_download(url, dest, headers, source.access)

    url = download_url(source)
    d = family_data_dir(family)
    d.mkdir(parents=True, exist_ok=True)
    if source.archive:
        _fetch_members(url, d / source.filename, source.files, download)
        return d / source.filename
    if source.files:
        for rel, sha in sorted(source.files.items()):
            _fetch_one(f"{url.rstrip('/')}/{rel}", d / source.filename / rel, sha, download)
        return d / source.filename
    dest = d / source.filename
    want = expected_sha256(family, source)
    if dest.is_file() and want and sha256_file(dest) == want:
        return dest
    fd, tmp_name = tempfile.mkstemp(dir=d, prefix=".part-")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        download(url, tmp)
        got = sha256_file(tmp)
        if want and got != want:
            raise ChecksumError(f"{url}: sha256 {got} does not match expected {want}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    if not want:
        record_sha256(family, {source.filename: got})
    return dest
