"""Fetch reference programs into the data cache (checksum-verified) and score them like candidates."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.envs.data import data_root
from harness.evaluation.result import EvalResult

from .manifest import ReferenceProgram

MAX_BYTES = 4 * 1024 * 1024
"""Largest reference program accepted (source files are small)."""


class ReferenceError(RuntimeError):
    """A reference could not be fetched or did not match its pinned checksum."""


def reference_dir(family: str) -> Path:
    """Where a family's fetched references live: ``<data root>/<family>/references``."""
    return data_root() / family / "references"


def cached_path(family: str, ref: ReferenceProgram) -> Path:
    """Cache path of one reference."""
    return reference_dir(family) / f"{ref.name}{ref.suffix}"


def fetch_reference(
    family: str, ref: ReferenceProgram, timeout: float = 60.0, mirror: Path | None = None
) -> Path:
    """Download ``ref`` (unless cached with the right checksum) and verify its sha256.

    With ``mirror`` (a local checkout of the repository, for air-gapped machines), the file is read
    from ``mirror / ref.repo_path`` instead of the URL; the same checksum decides.

    Returns:
        The cached file.

    Raises:
        ReferenceError: No sha256 is pinned, the download failed, the file is too large, or the
            bytes do not match the pinned checksum (nothing is written then).
    """
    if not ref.sha256:
        raise ReferenceError(f"{ref.name}: no sha256 pinned (unverified): not fetched")
    dest = cached_path(family, ref)
    if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == ref.sha256:
        return dest
    source = ref.url
    try:
        if mirror is not None:
            if not ref.repo_path:
                raise ReferenceError(f"{ref.name}: its URL does not pin a commit; cannot read a mirror")
            source = str(mirror / ref.repo_path)
            with open(source, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        else:
            with urllib.request.urlopen(ref.url, timeout=timeout) as r:  # noqa: S310 - https or file URLs
                data = r.read(MAX_BYTES + 1)
    except (OSError, ValueError) as e:
        raise ReferenceError(f"{ref.name}: reading {source} failed: {e}") from e
    if len(data) > MAX_BYTES:
        raise ReferenceError(f"{ref.name}: larger than {MAX_BYTES} bytes")
    got = hashlib.sha256(data).hexdigest()
    if got != ref.sha256:
        raise ReferenceError(f"{ref.name}: sha256 mismatch (pinned {ref.sha256}, got {got}); not saved")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(dest.suffix + ".part")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return dest


@dataclass(frozen=True)
class ReferenceRow:
    """A scored reference: a labelled line for leaderboards and plots, never a run."""

    name: str
    """The reference's label."""
    variant: str
    """Variant it was scored on."""
    env_hash: str
    """Content hash of that variant at scoring time."""
    status: str
    """Evaluation status."""
    score: float | None
    """Score here (None unless ``ok``)."""
    paper_value: float | None
    """What the paper reports."""
    protocol: str
    """The paper's protocol (so a reader sees when its test set differs)."""
    url: str
    """Source URL (pinned commit)."""

    @classmethod
    def of(cls, ref: ReferenceProgram, result: EvalResult) -> ReferenceRow:
        """Row from a reference and its evaluation."""
        return cls(
            ref.name, ref.variant, result.env_hash, result.status.value, result.score,
            ref.paper_value, ref.protocol, ref.url,
        )  # fmt: skip


def rows_path(leaderboard_dir: Path, family: str) -> Path:
    """``leaderboards/<family>.references.json``: the family's scored references."""
    return leaderboard_dir / f"{family}.references.json"


def save_rows(leaderboard_dir: Path, family: str, rows: list[ReferenceRow]) -> Path:
    """Write the rows (replacing earlier ones of the same name and variant)."""
    path = rows_path(leaderboard_dir, family)
    old: list[dict[str, Any]] = json.loads(path.read_text()) if path.is_file() else []
    keys = {(r.name, r.variant) for r in rows}
    kept = [o for o in old if (o.get("name"), o.get("variant")) not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(kept + [vars(r) for r in rows], indent=2) + "\n")
    return path


def load_rows(leaderboard_dir: Path, family: str) -> list[ReferenceRow]:
    """The family's scored references (empty when none)."""
    path = rows_path(leaderboard_dir, family)
    if not path.is_file():
        return []
    return [ReferenceRow(**d) for d in json.loads(path.read_text())]
