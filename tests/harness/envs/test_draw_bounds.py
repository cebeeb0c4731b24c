"""Progress bounds belong to the draw that is scored: manifest bounds, or measured once per held-out key."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.envs import draw_bounds
from harness.envs.draw_bounds import BoundsError, bounds_for, cached_bounds, key_label, keyed_bounds
from harness.envs.manifest import Progress
from harness.envs.registry import default_registry
from harness.envs.secret import KEY_ENV, fingerprint

KEY_A = "a1" * 32
KEY_B = "b2" * 32


def variant(heldout: str = "secret", y_init: float = 0.7, y_target: float = 0.9) -> SimpleNamespace:
    return SimpleNamespace(
        id="toy-tiny",
        hash="0123456789abcdef",
        progress=Progress(y_init=y_init, y_target=y_target),
        scorer_params={"heldout": heldout},
    )


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(KEY_ENV, KEY_A)
    return tmp_path / "data"


class Scorer:
    """Counts the initial program's evaluations and returns a fixed score."""

    def __init__(self, score: float | None) -> None:
        self.score, self.calls = score, 0

    def __call__(self) -> float | None:
        self.calls += 1
        return self.score


@given(
    y_init=st.floats(-1e6, 1e6),
    span=st.floats(1e-3, 1e6) | st.floats(-1e6, -1e-3),
    headroom=st.none() | st.floats(0.01, 10.0),
)
def test_the_initial_program_sits_strictly_inside_0_1(
    y_init: float, span: float, headroom: float | None
) -> None:
    p = Progress(y_init=y_init, y_target=y_init + span, headroom=headroom)
    u = p.u(y_init)
    h = 0.25 if headroom is None else headroom
    assert 0.0 < u < 1.0 and u == pytest.approx(h / (1 + h), rel=1e-4)  # y_init 5e5, span 1e-3: ULPs
    assert p.u(p.y_target) == pytest.approx(1.0) and p.u(p.y_floor) == pytest.approx(0.0, abs=1e-9)
    assert p.u(math.nan) == 0.0 and p.u(None) == 0.0 and p.u(math.inf) == 0.0


def test_a_keyed_draw_is_measured_once_and_reused(data_root: Path) -> None:
    v, scorer = variant(), Scorer(0.68)
    first = bounds_for(v, scorer)
    # y_init is this draw's initial score; the span is the manifest's (0.2); the floor a quarter below
    assert first.measured and first.key == fingerprint() and first.y_init == 0.68
    assert first.y_target == pytest.approx(0.88) and first.y_floor == pytest.approx(0.63)
    assert first.u(0.68) == pytest.approx(0.2) and first.y_init_public == 0.7
    again = bounds_for(v, scorer)
    assert again == first and scorer.calls == 1 and cached_bounds(v) == first
    stored = json.loads((data_root / draw_bounds.STORE_FILE).read_text())
    assert stored == {fingerprint(): {"toy-tiny@0123456789abcdef": 0.68}}


def test_another_key_gets_its_own_bounds(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = variant()
    a = bounds_for(v, Scorer(0.68))
    monkeypatch.setenv(KEY_ENV, KEY_B)
    b = bounds_for(v, Scorer(0.74))
    assert (a.key, b.key) == (fingerprint(bytes.fromhex(KEY_A)), fingerprint(bytes.fromhex(KEY_B)))
    assert b.y_init == 0.74 and b.y_target == pytest.approx(0.94)
    monkeypatch.setenv(KEY_ENV, KEY_A)
    assert bounds_for(v, Scorer(None)) == a  # key A's bounds were kept, not re-measured


def test_public_draws_and_unkeyed_variants_use_the_manifest(
    data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scorer = Scorer(0.1)
    plain = bounds_for(variant(heldout="public"), scorer)
    assert (plain.key, plain.measured, plain.y_init, plain.y_target) == ("", False, 0.7, 0.9)
    monkeypatch.setenv(KEY_ENV, "public")
    pub = bounds_for(variant(), scorer)
    assert (pub.key, pub.measured, pub.y_init) == ("public", False, 0.7) and key_label(variant()) == "public"
    assert scorer.calls == 0 and not (data_root / draw_bounds.STORE_FILE).exists()


def test_an_initial_program_that_does_not_score_sets_no_bounds(data_root: Path) -> None:
    with pytest.raises(BoundsError, match="did not score on this held-out key's draw"):
        bounds_for(variant(), Scorer(None))
    assert cached_bounds(variant()) is None
    with pytest.raises(BoundsError):
        keyed_bounds(variant(), math.inf, "abcdef")


def test_a_damaged_store_is_measured_again(data_root: Path) -> None:
    data_root.mkdir(parents=True)
    (data_root / draw_bounds.STORE_FILE).write_text("{not json")
    scorer = Scorer(0.5)
    assert bounds_for(variant(), scorer).y_init == 0.5 and scorer.calls == 1


def test_minimised_scores_keep_their_direction(data_root: Path) -> None:
    v = variant(y_init=-1.0, y_target=-5.0)  # e.g. log10 NMSE
    b = bounds_for(v, Scorer(-1.5))
    assert b.y_target == pytest.approx(-5.5) and b.y_floor == pytest.approx(-0.5)
    assert b.u(-1.5) == pytest.approx(0.2) and b.u(-6.0) == 1.0 and b.u(0.0) == 0.0


def test_every_keyed_tiny_variant_draws_from_the_key() -> None:
    keyed = sorted(v.id for v in default_registry().variants() if v.tiny and draw_bounds.keyed(v))
    assert keyed == ["eplb-tiny", "kuairec-tiny", "multi-evolve-tiny"]
