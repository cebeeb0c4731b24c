"""``bench data import``: install a family's data from a local directory or mirror (air-gapped use).

Every file is checked against the manifest's sha256 (or, for an unpinned source, the checksum
recorded on its first fetch or import, which an import records the same way a fetch does). The
import is all-or-nothing: each file is copied into a staging file next to its destination and
verified; only when every file of every source has passed are they moved into place.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .data import ChecksumError, expected_sha256, family_data_dir, record_sha256, sha256_file
from .manifest import DataSource
from .registry import Registry, default_registry


class DataImportError(ValueError):
    """The import directory is missing, or lacks files the family's sources need."""


@dataclass(frozen=True)
class ImportReport:
    """What an import did, file by file (paths relative to the family's cache directory)."""

    family: str
    """Family name."""
    installed: list[str] = field(default_factory=list)
    """Files copied into the cache."""
    unchanged: list[str] = field(default_factory=list)
    """Files already in the cache with the right checksum (left as they were)."""
    recorded: dict[str, str] = field(default_factory=dict)
    """Unpinned sources whose checksum this import recorded: name -> sha256."""


@dataclass(frozen=True)
class _Planned:
    rel: str  # path under the family cache directory
    src: Path
    want: str  # expected sha256; "" for an unpinned source without a recorded checksum
    pinned: bool  # whether ``want`` comes from the manifest (else it was recorded)
    source_name: str  # DataSource.filename (the key of recorded_sha256.json)


def _sources(name: str, registry: Registry) -> tuple[str, dict[str, DataSource]]:
    """Family name and data sources of a family (all its variants') or of one variant id."""
    variants = registry.family_of(name)
    if name in registry.ids():
        variants = [registry.get(name)]
    return variants[0].family, {k: s for v in variants for k, s in v.data}


def _locate(root: Path, source: DataSource, rel: str) -> Path | None:
    """Where ``rel`` of ``source`` lies in the import directory, or None.

    A file set is looked up as ``<dir>/<filename>/<rel>`` (the cache layout) and then as
    ``<dir>/<rel>`` (a directory holding the set's files themselves); the checksum decides, not the
    layout.
    """
    candidates = [root / source.filename / rel, root / rel] if source.files else [root / source.filename]
    return next((p for p in candidates if p.is_file()), None)


def _plan(family: str, root: Path, sources: dict[str, DataSource]) -> tuple[list[_Planned], list[str]]:
    planned: list[_Planned] = []
    missing: list[str] = []
    for source in sources.values():
        items = sorted(source.files.items()) if source.files else [("", expected_sha256(family, source))]
        for rel, want in items:
            target = f"{source.filename}/{rel}" if source.files else source.filename
            found = _locate(root, source, rel)
            if found is None:
                missing.append(target)
            else:
                pinned = bool(source.files or source.sha256)
                planned.append(_Planned(target, found, want, pinned, source.filename))
    return planned, missing


def _copy_hashing(src: Path, dest: Path) -> str:
    h = hashlib.sha256()
    with src.open("rb") as fin, dest.open("wb") as fout:
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            h.update(chunk)
            fout.write(chunk)
    return h.hexdigest()


def import_data(name: str, directory: Path, *, registry: Registry | None = None) -> ImportReport:
    """Install the data of a family (or of one variant) from a local directory, sha256-checked.

    ``directory`` is laid out like the family's cache directory (``<filename>`` per single-file
    source, ``<filename>/<path>`` per file of a set; a set's files may also lie directly in it), or
    is a mirror of the whole data root holding ``<family>/`` in that layout.

    Args:
        name: Family name (``llm_sr``), its id prefix (``llm-sr``) or a variant id (then only that
            variant's sources are imported).
        directory: The local directory or mirror.
        registry: Registry to resolve ``name`` in (default: the installed environments).

    Returns:
        What was installed, left unchanged and recorded.

    Raises:
        UnknownIdError: If ``name`` is neither a family nor a variant (with close matches).
        DataImportError: If the directory does not exist or lacks files; nothing is installed.
        ChecksumError: If a file does not match its pinned or recorded sha256; nothing is installed.
        OSError: If reading or writing fails (staged files are removed).
    """
    reg = registry or default_registry()
    family, sources = _sources(name, reg)
    if not sources:
        return ImportReport(family)
    root = Path(directory)
    if not root.is_dir():
        raise DataImportError(f"{root}: no such directory")
    planned, missing = _plan(family, root, sources)
    if missing and not planned and (root / family).is_dir():  # a mirror of the whole data root
        root = root / family
        planned, missing = _plan(family, root, sources)
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        complete = [
            v.id
            for v in reg.family_of(family)
            if v.data and v.id != name and not _plan(family, root, dict(v.data))[1]
        ]
        hint = (
            f" These variants' data is all there; import one by its id: {', '.join(complete)}."
            if complete
            else ""
        )
        raise DataImportError(
            f"{root} lacks {len(missing)} of the {len(missing) + len(planned)} files "
            f"{name} needs: {shown}. Nothing was installed.{hint}"
        )
    cache = family_data_dir(family)
    report = ImportReport(family)
    staged: list[tuple[Path, Path]] = []
    try:
        for item in planned:
            dest = cache / item.rel
            if item.want and dest.is_file() and sha256_file(dest) == item.want:
                if sha256_file(item.src) != item.want:
                    raise ChecksumError(_mismatch(item, sha256_file(item.src)))
                report.unchanged.append(item.rel)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".import-")
            os.close(fd)
            tmp = Path(tmp_name)
            staged.append((tmp, dest))
            got = _copy_hashing(item.src, tmp)
            if item.want and got != item.want:
                raise ChecksumError(_mismatch(item, got))
            if not item.want:
                report.recorded[item.source_name] = got
            report.installed.append(item.rel)
        for tmp, dest in staged:
            os.replace(tmp, dest)
        staged.clear()
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    if report.recorded:
        record_sha256(family, report.recorded)
    return report


def _mismatch(item: _Planned, got: str) -> str:
    origin = "pinned in the manifest" if item.pinned else "recorded on its first fetch or import"
    return (
        f"{item.src}: sha256 {got} does not match the checksum {origin}, {item.want}, "
        f"for {item.rel}. Nothing was installed."
    )
