"""Public test inputs: read the pinned file set of a ``[data.<key>]`` source from the data cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.envs.data import ChecksumError, DataMissingError
from harness.envs.manifest import DataSource


def read_file_set(data_dir: Path, source: DataSource, count: int, family: str) -> list[tuple[str, bytes]]:
    """The first ``count`` files of a multi-file source (sorted by name), sha256-checked.

    Args:
        data_dir: The family's data cache directory.
        source: The manifest's data source (``files`` maps name -> sha256).
        count: How many files to read (the sorted names are ``<task>_<seed:06d>_input.txt``, so
            this takes seeds ``0 .. count-1``).
        family: Family name, for the fetch hint.

    Returns:
        ``(file name, bytes)`` pairs.

    Raises:
        DataMissingError: If a file is absent (names ``bench data fetch <family>``).
        ChecksumError: If a cached file does not match its pinned sha256.
        ValueError: If ``count`` exceeds the number of files.
    """
    names = sorted(source.files)
    if count > len(names):
        raise ValueError(f"{count} public cases requested, the source pins only {len(names)} files")
    root = Path(data_dir) / source.filename
    out = []
    for name in names[:count]:
        path = root / name
        if not path.is_file():
            raise DataMissingError(
                f"public input {path} is missing. "
                f"Run `bench data fetch {family}` (needs network access) first."
            )
        data = path.read_bytes()
        got = hashlib.sha256(data).hexdigest()
        if got != source.files[name]:
            raise ChecksumError(f"{path}: sha256 {got} does not match the pinned {source.files[name]}")
        out.append((name, data))
    return out
