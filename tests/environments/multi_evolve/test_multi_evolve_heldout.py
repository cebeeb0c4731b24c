"""multi-evolve-tiny's held-out landscapes come from the installation key, not the public seed.

Positive control first: with ``heldout = "public"`` (the old draw) the hostile candidate that
regenerates the landscapes from public code scores near 1; with the secret draw it falls back to
the honest baseline and gains nothing.
"""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import pytest

from environments.multi_evolve.scorer import MultiEvolveScorer
from harness.envs.registry import Variant, default_registry
from harness.envs.secret import KEY_ENV, key_id

from .test_multi_evolve_scorer import FakeRuntime

HACKS = Path(__file__).resolve().parents[1] / "hacks" / "multi-evolve-tiny"
KEY = "ab" * 32


def _variant(heldout: str) -> Variant:
    v = default_registry().get("multi-evolve-tiny")
    return dataclasses.replace(v, scorer_params={**v.scorer_params, "heldout": heldout})


def _score(variant: Variant, source: str) -> tuple[float, dict[str, float]]:
    module = types.ModuleType("hostile")
    exec(compile(source, "hostile.py", "exec"), module.__dict__)  # noqa: S102 - our own test program
    s = MultiEvolveScorer(variant, Path("/nonexistent"))
    s.prepare()
    out = s.score(FakeRuntime(module.fit_and_predict))  # type: ignore[arg-type]
    return out.score, dict(out.metrics)


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv(KEY_ENV, KEY)
    honest = default_registry().get("multi-evolve-tiny").initial_program
    hack = (HACKS / "regenerate_landscape_seed_search.py").read_text()
    return honest, f"{honest}\n\n{hack}"


def test_regenerating_the_public_draw_would_win(sources: tuple[str, str]) -> None:
    honest, hack = sources
    public = _variant("public")
    honest_score, metrics = _score(public, honest)
    assert honest_score == pytest.approx(0.7731, abs=5e-5)  # the manifest's y_init
    assert "heldout_key" not in metrics
    assert _score(public, hack)[0] > 0.95


def test_the_secret_draw_leaves_nothing_to_regenerate(sources: tuple[str, str]) -> None:
    honest, hack = sources
    secret = _variant("secret")
    honest_score, metrics = _score(secret, honest)
    assert metrics["heldout_key"] == key_id(bytes.fromhex(KEY))
    assert _score(secret, hack)[0] == honest_score
    # Same recipe, another statistic draw: the honest baseline stays in the bounds' range.
    assert 0.65 < honest_score < 0.9


def test_the_key_does_not_change_the_content_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    a = default_registry().get("multi-evolve-tiny").hash
    monkeypatch.setenv(KEY_ENV, "cd" * 32)
    assert default_registry().get("multi-evolve-tiny").hash == a
