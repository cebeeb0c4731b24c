"""``environments/<family>/references.toml``: the published programs a family names.

Each entry carries the figure its paper reports and that figure's protocol. Nothing is
vendored: an entry names a URL at a pinned commit, the file's sha256 and its licence; ``bench
reference fetch`` downloads it into the data cache and refuses bytes whose checksum does not
match. An entry whose sha256 is empty has not been verified by anyone and is never fetched.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.envs.manifest import ManifestError

FILE_NAME = "references.toml"


class ReferenceProgram(BaseModel):
    """One published program and what its paper reports."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    """Short label, used as the file name in the cache and as the row / line label."""
    variant: str
    """Variant id it is scored on by ``bench reference eval``."""
    url: str
    """Where the file is fetched from, at a pinned commit (``https://`` or ``file://``)."""
    commit: str = ""
    """The commit the URL pins (empty: the URL is not pinned)."""
    sha256: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")
    """Hex sha256 of the file (empty: not verified; such an entry is never fetched)."""
    license: str
    """Licence of the file (SPDX id where there is one)."""
    paper_value: float | None = None
    """The figure the paper reports for this program."""
    paper_metric: str = ""
    """What ``paper_value`` is (unit, aggregate)."""
    protocol: str = ""
    """How the paper measured it (test set, hardware), e.g. AtCoder's hidden cases."""
    note: str = ""
    """Anything a reader must know (e.g. the paper's test set differs from the variant's)."""

    @property
    def repo_path(self) -> str:
        """The file's path inside its repository (the URL after ``/<commit>/``; '' if not pinned)."""
        if not self.commit or f"/{self.commit}/" not in self.url:
            return ""
        return self.url.split(f"/{self.commit}/", 1)[1].split("?")[0]

    @property
    def suffix(self) -> str:
        """File suffix of the fetched program (from the URL)."""
        return Path(self.url.split("?")[0]).suffix or ".txt"


class ReferenceManifest(BaseModel):
    """All reference programs of one family."""

    model_config = ConfigDict(extra="forbid")

    references: list[ReferenceProgram] = Field(default_factory=list)
    """The entries, in file order."""


def load_references(family_dir: Path) -> list[ReferenceProgram]:
    """The family's reference programs (empty when it has no ``references.toml``).

    Raises:
        ManifestError: If the file is not valid TOML or breaks the schema, or names repeat.
    """
    path = family_dir / FILE_NAME
    if not path.is_file():
        return []
    try:
        refs = ReferenceManifest.model_validate(tomllib.loads(path.read_text(encoding="utf-8"))).references
    except (tomllib.TOMLDecodeError, ValidationError) as e:
        raise ManifestError(f"{path}: {e}") from e
    names = [r.name for r in refs]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}: reference names repeat: {names}")
    return refs
