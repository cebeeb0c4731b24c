"""Helpers the family test modules share: one evaluation call, one data cache holding a secret."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult, Status


def evaluate(backend: object, variant: Variant, source: str) -> EvalResult:
    """Evaluate ``source`` on ``variant``; whatever the verdict, it must not be the harness's failure."""
    result = backend.evaluate(variant, source)  # type: ignore[attr-defined]
    assert isinstance(result, EvalResult)
    assert result.status is not Status.INFRA_ERROR, result.reason
    return result


@contextmanager
def data_cache_with(root: Path, family: str, files: dict[str, str]) -> Iterator[Path]:
    """``root`` as EVOBENCH_DATA, with ``files`` (name: text) in ``<root>/<family>``; yields that folder.

    Set it before the backend starts: sandboxes must not see it, whatever the candidate probes.
    """
    family_dir = root / family
    family_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (family_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (family_dir / name).write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVOBENCH_DATA", str(root))
        yield family_dir
