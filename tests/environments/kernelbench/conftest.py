"""A fixture KernelBench: our own tiny problem texts in upstream's archive layout, and a copy of
the kernelbench family whose manifest pins them (``file://`` URL, their sha256s).

No upstream file is used: the real archive cannot be reached from the tests (see the README).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.envs.registry import Registry, environments_root

FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOP = f"KernelBench-{FAKE_COMMIT}"

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Fixture problem {n}: Model scales tanh(x W^T + b) (not an upstream file)."""

    def __init__(self, features, scale):
        super(Model, self).__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x):
        return torch.tanh(self.linear(x)) * self.scale + {n}


features = 8


def get_inputs():
    return [torch.randn(4, features)]


def get_init_inputs():
    return [features, 0.5]
'''


def problem_text(rel: str) -> str:
    """The fixture text standing in for one upstream problem file."""
    return PROBLEM.format(n=sum(map(ord, rel)) % 7)


def sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def build_archive(
    path: Path, files: dict[str, str], extra: dict[str, str] | None = None, links: tuple[str, ...] = ()
) -> Path:
    """A tar.gz laid out like GitHub's tarball: one top directory ``KernelBench-<sha>/``.

    ``links`` are paths stored as symlinks (to ``/etc/passwd``) instead of files.
    """
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in {**files, **(extra or {})}.items():
            info = tarfile.TarInfo(f"{TOP}/{rel}")
            if rel in links:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
                continue
            blob = text.encode()
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


@dataclass
class FixtureKB:
    """A fixture environments root holding a kernelbench copy that pins the fixture archive."""

    root: Path
    """Environments root (holds ``kernelbench/``)."""
    archive: Path
    """The fixture tarball."""
    texts: dict[str, str]
    """Archive path (below the top directory) -> fixture problem text."""

    @property
    def manifest(self) -> Path:
        return self.root / "kernelbench" / "env.toml"

    def registry(self) -> Registry:
        return Registry(self.root)

    def pin(self, rel: str, sha256: str) -> None:
        """Change the sha256 the fixture manifest pins for one file."""
        text = self.manifest.read_text()
        new = re.sub(rf'("{re.escape(rel)}" = )"[0-9a-f]{{64}}"', rf'\g<1>"{sha256}"', text)
        assert new != text
        self.manifest.write_text(new)


def real_problem_files() -> list[str]:
    """The archive paths the real manifest pins."""
    gelu = Registry(environments_root()).get("kernelbench-gelu")
    ((_, source),) = gelu.data
    return sorted(source.files)


@pytest.fixture
def fixture_kb(tmp_path: Path) -> FixtureKB:
    root = tmp_path / "envs"
    shutil.copytree(
        environments_root() / "kernelbench",
        root / "kernelbench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    texts = {rel: problem_text(rel) for rel in real_problem_files()}
    archive = build_archive(tmp_path / "kb.tar.gz", texts, extra={"README.md": "not a problem\n"})
    manifest = root / "kernelbench" / "env.toml"
    text = manifest.read_text()
    text, n = re.subn(r'url = "https://codeload[^"]*"', f'url = "{archive.as_uri()}"', text)
    assert n == 1
    for rel, body in texts.items():
        text = re.sub(rf'("{re.escape(rel)}" = )"[0-9a-f]{{64}}"', rf'\g<1>"{sha(body)}"', text)
    manifest.write_text(text)
    return FixtureKB(root, archive, texts)
