"""A family's sandbox driver: loaded next to the candidate, reached with ``call_driver``, hashed.

A copy of the selftest family gets a driver and a scorer that calls it; a second copy has no
driver but a scorer that calls ``call_driver`` anyway (a harness bug: ``infra_error``, never the
candidate's fault). Both run through the real local sandbox in warm and cold mode.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.manifest import ManifestError
from harness.envs.registry import Registry, environments_root
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend

DRIVER = """
import sys


def twice(candidate, x):
    # Runs in the candidate's process: the candidate module is the first argument.
    assert sys.modules["candidate"] is candidate
    return {"twice": 2.0 * candidate.value(x), "driver_in_candidate": float(hasattr(candidate, "twice"))}
"""

SCORER = """
from harness.scoring.api import ScoreOutcome, Scorer, require_finite


class DriverScorer(Scorer):
    def score(self, candidate):
        res = candidate.call_driver("twice", 21)
        metrics = {k: require_finite(k, v) for k, v in res.value.items()}
        return ScoreOutcome(score=metrics["twice"], metrics={**metrics, "score": metrics["twice"]})
"""


def _family(root: Path, name: str, *, driver: bool) -> None:
    d = root / name
    shutil.copytree(environments_root() / "selftest", d, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "scorer.py").write_text(SCORER)
    text = (d / "env.toml").read_text()
    for old, new in (
        ('name = "selftest"', f'name = "{name}"'),
        ('"scorer:ProbeScorer"', '"scorer:DriverScorer"'),
        ("[variants.selftest-tiny]", f"[variants.{name}-tiny]"),
    ):
        assert old in text
        text = text.replace(old, new)
    if driver:
        (d / "driver.py").write_text(DRIVER)
        text = text.replace(
            'scorer = "scorer:DriverScorer"', 'scorer = "scorer:DriverScorer"\nsandbox_driver = "driver.py"'
        )
    (d / "env.toml").write_text(text)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("driver-envs") / "envs"
    _family(root, "withdriver", driver=True)
    _family(root, "nodriver", driver=False)
    return root


@pytest.fixture(scope="module", params=["warm", "cold"])
def backend(request: pytest.FixtureRequest, root: Path) -> Iterator[LocalBackend]:
    with LocalBackend(workers=1, mode=request.param, env_root=str(root), infra_retries=0) as b:
        yield b


CANDIDATE = "def value(x):\n    return x + 0.5\n"


def test_driver_calls_the_candidate_in_its_process(backend: LocalBackend, root: Path) -> None:
    variant = Registry(root).get("withdriver-tiny")
    res = backend.evaluate(variant, CANDIDATE)
    assert res.status is Status.OK, res.reason
    assert res.metrics["twice"] == 43.0 and res.metrics["driver_in_candidate"] == 0.0


def test_candidate_without_the_entry_point_is_its_own_error(backend: LocalBackend, root: Path) -> None:
    res = backend.evaluate(Registry(root).get("withdriver-tiny"), "def other(x):\n    return x\n")
    assert res.status is Status.ERROR and "value" in res.reason, res.reason


def test_call_driver_without_a_driver_is_an_infra_error(backend: LocalBackend, root: Path) -> None:
    res = backend.evaluate(Registry(root).get("nodriver-tiny"), CANDIDATE)
    assert res.status is Status.INFRA_ERROR and "declares no sandbox_driver" in res.reason, res.reason


def test_driver_is_hashed_and_must_exist(root: Path, tmp_path: Path) -> None:
    before = Registry(root).get("withdriver-tiny").hash
    copy = tmp_path / "envs"
    shutil.copytree(root, copy)
    (copy / "withdriver" / "driver.py").write_text(DRIVER + "\n# changed\n")
    assert Registry(copy).get("withdriver-tiny").hash != before
    (copy / "withdriver" / "driver.py").unlink()
    with pytest.raises(ManifestError, match="sandbox_driver"):
        Registry(copy)
    text = (copy / "withdriver" / "env.toml").read_text()
    (copy / "withdriver" / "env.toml").write_text(text.replace('language = "python"', 'language = "cpp"'))
    (copy / "withdriver" / "driver.py").write_text(textwrap.dedent(DRIVER))
    with pytest.raises(ManifestError, match="only supported for Python"):
        Registry(copy)
