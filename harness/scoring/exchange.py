"""Files exchanged with a sandboxed process through its work directory, read safely.

The trusted side creates a fresh exchange directory inside the candidate's work directory and
keeps a file descriptor of it: everything is then opened relative to that descriptor with
``O_NOFOLLOW``, so a candidate that renames the directory, swaps in a symbolic link or plants a
FIFO cannot make the trusted process (often root) read or write anything else. Everything read
back is decoded by :mod:`harness.scoring.decode` (declared shape x dtype checked against the
expected spec before allocating, JSON depth-limited); a decode failure is the candidate's
``CandidateError``. Files the scorer creates go into a directory made fresh, under an unpredictable
name, after which no candidate process can have written there; ``writable=False`` keeps it so.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import stat
from pathlib import Path

import numpy as np

from harness.evaluation.errors import CandidateError
from harness.scoring.decode import MAX_NPY_HEADER, ArraySpec, DecodeError, decode_json, decode_npz, read_npy


class ExchangeDir:
    """A fresh directory in a candidate's work directory, held open by descriptor."""

    def __init__(self, workdir: Path, prefix: str, *, writable: bool = True) -> None:
        """Create ``workdir/<prefix>-<random>``.

        Args:
            workdir: The candidate's work directory (trusted-side path).
            prefix: Start of the directory's name.
            writable: Mode 0777 (the sandbox user writes results into it) or 0755 (inputs only).
        """
        self.name = f"{prefix}-{secrets.token_hex(8)}"
        path = Path(workdir) / self.name
        mode = 0o777 if writable else 0o755
        path.mkdir(mode=mode)
        os.chmod(path, mode)
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

    def write_new(self, name: str, data: bytes) -> None:
        """Create ``name`` (it must not exist) world-readable and write ``data``.

        Raises:
            CandidateError: If ``name`` already exists: only a candidate process can have put it in
                this fresh directory (write the scorer's files before any candidate code runs, or
                into a directory made with ``writable=False``).
        """
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)
        except FileExistsError:
            raise CandidateError(f"{name} was created by the candidate before the scorer wrote it") from None
        try:
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(data)
        finally:
            os.close(fd)

    def _open(self, name: str, max_bytes: int) -> int:
        """Open a regular file the sandbox wrote, no bigger than ``max_bytes``; return its descriptor.

        Raises:
            CandidateError: If it is missing, not a regular file, or too large.
        """
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError as e:
            raise CandidateError(f"the sandboxed process did not leave {name} ({e.strerror})") from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise CandidateError(f"{name} is not a regular file")
            if st.st_size > max_bytes:
                raise CandidateError(f"{name} is {st.st_size} bytes, over the {max_bytes}-byte cap")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, name: str, max_bytes: int) -> bytes:
        """Read a regular file the sandbox wrote.

        Raises:
            CandidateError: If it is missing, not a regular file, or larger than ``max_bytes``.
        """
        with os.fdopen(self._open(name, max_bytes), "rb") as f:
            return f.read(max_bytes + 1)[:max_bytes]

    def copy_to(self, name: str, dest: ExchangeDir, dest_name: str, max_bytes: int) -> None:
        """Copy a file the sandbox wrote into ``dest`` (a fresh name), streamed: O(1) trusted memory.

        Raises:
            CandidateError: If the source is missing, not a regular file, or over ``max_bytes``, or
                ``dest_name`` already exists in ``dest``.
        """
        with os.fdopen(self._open(name, max_bytes), "rb") as src:
            try:
                fd = os.open(
                    dest_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dest.fd
                )
            except FileExistsError:
                raise CandidateError(f"{dest_name} was created by the candidate before the scorer") from None
            with os.fdopen(fd, "wb") as out:
                os.fchmod(fd, 0o644)
                shutil.copyfileobj(src, out, 1 << 20)

    def read_array(self, name: str, dtype: str, shape: tuple[int | None, ...], max_bytes: int) -> np.ndarray:
        """Read a ``.npy`` array of ``dtype`` whose shape matches ``shape`` (None: any size).

        The header is read and checked against the spec first; then exactly the declared data are
        read (the file is streamed, never held whole), so memory stays within ``max_bytes``.

        Raises:
            CandidateError: If the file is missing, malformed, or of another dtype or shape.
        """
        with os.fdopen(self._open(name, max_bytes + MAX_NPY_HEADER + 16), "rb") as f:
            try:
                return read_npy(f, name, ArraySpec(dtype, shape, max_bytes))
            except DecodeError as e:
                raise CandidateError(str(e)) from None

    def read_npz(self, name: str, specs: dict[str, ArraySpec], max_bytes: int) -> dict[str, np.ndarray]:
        """Read a ``.npz`` archive with exactly the members of ``specs`` (inflated under caps).

        Raises:
            CandidateError: If the file is missing, over ``max_bytes`` (on disk or inflated), or malformed.
        """
        raw = self.read_bytes(name, max_bytes)
        try:
            return decode_npz(raw, name, specs, max_total_bytes=max_bytes)
        except DecodeError as e:
            raise CandidateError(str(e)) from None

    def read_json(self, name: str, max_bytes: int, max_depth: int = 64) -> object:
        """Read a JSON file under a size cap and a nesting limit.

        Raises:
            CandidateError: If the file is missing, over a limit, or not valid JSON.
        """
        raw = self.read_bytes(name, max_bytes)
        try:
            return decode_json(raw, name, max_bytes=max_bytes, max_depth=max_depth)
        except DecodeError as e:
            raise CandidateError(str(e)) from None

    def listen_unix(self, name: str) -> socket.socket:
        """A listening Unix socket ``name`` in this directory that any uid may connect to.

        Bound through ``/proc/self/fd``, so the work directory's path may be longer than the
        108 bytes ``sun_path`` holds (a deep ``TMPDIR``), and the socket lands in the directory this
        descriptor holds even if the path was swapped since. Unlink it with :meth:`unlink` once the
        peer is connected.

        Raises:
            OSError: The socket could not be bound (``name`` exists, or no ``/proc``).
        """
        lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lst.bind(f"/proc/self/fd/{self.fd}/{name}")
            os.chmod(name, 0o777, dir_fd=self.fd)  # the sandbox runs as another uid
            lst.listen(1)
        except BaseException:
            lst.close()
            raise
        return lst

    def unlink(self, name: str) -> None:
        """Remove ``name`` from this directory if it is there."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Release the directory descriptor (the work directory itself is wiped by the worker)."""
        try:
            os.close(self.fd)
        except OSError:
            pass
