"""kuairec-tiny's sequences come from the installation key, not the public data_seed.

The hostile candidate ``hacks/kuairec-tiny/regenerate_targets.py`` regenerates the public draw and
knows the next item of every validation / test history in it (measured through the sandbox: 0.307
against the honest 0.034 with ``heldout = "public"``); on the secret draw it knows none.
"""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import numpy as np
import pytest

from environments.kuairec.data import split, synthetic_sequences
from environments.kuairec.scorer import KuaiRecScorer
from harness.envs.registry import Variant, default_registry
from harness.envs.secret import KEY_ENV, key_id

HACK = Path(__file__).resolve().parents[1] / "hacks" / "kuairec-tiny" / "regenerate_targets.py"
KEY = "5a" * 32


def _scorer(heldout: str) -> KuaiRecScorer:
    v: Variant = default_registry().get("kuairec-tiny")
    v = dataclasses.replace(v, scorer_params={**v.scorer_params, "heldout": heldout})
    s = KuaiRecScorer(v, Path("/nonexistent"))
    s.prepare()
    return s


def _hits(table: dict[tuple[int, ...], int], s: KuaiRecScorer) -> int:
    """Users whose test history the table answers with the true test target."""
    th = s.split.test_history
    return sum(
        table.get(tuple(int(i) for i in th.user(u)[0])) == int(s.split.test_target[u])
        for u in range(th.num_users)
    )


@pytest.fixture(scope="module")
def table() -> dict[tuple[int, ...], int]:
    module = types.ModuleType("hostile")
    source = default_registry().get("kuairec-tiny").initial_program + "\n\n" + HACK.read_text()
    exec(compile(source, "hostile.py", "exec"), module.__dict__)  # noqa: S102 - our own test program
    return {k: int(v) for k, v in module._next_items().items()}


def test_the_public_draw_is_regenerable(table: dict[tuple[int, ...], int]) -> None:
    s = _scorer("public")
    assert s.key_id is None
    assert _hits(table, s) == s.split.test_history.num_users


def test_the_secret_draw_is_not(table: dict[tuple[int, ...], int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    s = _scorer("secret")
    assert s.key_id == key_id(bytes.fromhex(KEY))
    assert _hits(table, s) == 0
    # Same recipe: the draw's statistics match the public one's (users, lengths, catalogue).
    public = _scorer("public").split
    assert (
        s.split.train.num_users == public.train.num_users
        and s.split.train.num_items == public.train.num_items
    )
    lengths = np.diff(s.split.test_history.offsets)
    assert abs(lengths.mean() - np.diff(public.test_history.offsets).mean()) < 3


def test_another_key_is_another_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    a = _scorer("secret").split.test_target
    monkeypatch.setenv(KEY_ENV, "a5" * 32)
    assert not np.array_equal(a, _scorer("secret").split.test_target)


def test_the_public_draw_matches_the_data_module() -> None:
    p = default_registry().get("kuairec-tiny").scorer_params
    seqs = synthetic_sequences(
        users=p["users"], items=p["items"], factors=p["factors"], min_len=p["min_len"], max_len=p["max_len"],
        drift=p["drift"], temperature=p["data_temperature"], seed=p["data_seed"],
    )  # fmt: skip
    assert np.array_equal(split(seqs).test_target, _scorer("public").split.test_target)
