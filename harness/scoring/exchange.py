"""Files exchanged with a sandboxed process through its work directory, read safely.

The trusted side creates a fresh exchange directory inside the candidate's work directory and
keeps a file descriptor of it: everything is then opened relative to that descriptor with
``O_NOFOLLOW``, so a candidate that renames the directory, swaps in a symbolic link or plants a
FIFO cannot make the trusted process (often root) read or write anything else. Arrays are read
with ``allow_pickle=False`` under a size cap, and their dtype and shape are checked.
"""

from __future__ import annotations

import io
import os
import secrets
import stat
from pathlib import Path

import numpy as np

from harness.evaluation.errors import CandidateError


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
        """Create ``name`` (it must not exist) world-readable and write ``data``."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)
        try:
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(data)
        finally:
            os.close(fd)

    def read_bytes(self, name: str, max_bytes: int) -> bytes:
        """Read a regular file the sandbox wrote.

        Raises:
            CandidateError: If it is missing, not a regular file, or larger than ``max_bytes``.
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
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read(max_bytes + 1)[:max_bytes]
        finally:
            os.close(fd)

    def read_array(self, name: str, dtype: str, shape: tuple[int | None, ...], max_bytes: int) -> np.ndarray:
        """Read a ``.npy`` array of ``dtype`` whose shape matches ``shape`` (None: any size).

        Raises:
            CandidateError: If the file is missing, malformed, or of another dtype or shape.
        """
        raw = self.read_bytes(name, max_bytes)
        try:
            arr = np.load(io.BytesIO(raw), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise CandidateError(f"{name} is not a valid .npy array: {e}") from e
        if not isinstance(arr, np.ndarray) or arr.dtype != np.dtype(dtype) or arr.ndim != len(shape):
            raise CandidateError(
                f"{name}: expected {dtype} array of rank {len(shape)}, got {arr.dtype} {arr.shape}"
            )
        if any(want is not None and got != want for got, want in zip(arr.shape, shape, strict=True)):
            raise CandidateError(f"{name}: expected shape {shape}, got {arr.shape}")
        return arr

    def close(self) -> None:
        """Release the directory descriptor (the work directory itself is wiped by the worker)."""
        try:
            os.close(self.fd)
        except OSError:
            pass
