"""Readable identity labels: what differs between the identities shown, user labels, always unique."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness.compare.identity import IDENTITY_COLUMN, AmbiguousAgentError, identity_of, resolve, with_identity
from harness.compare.labels import (
    MAX_KEYS,
    ShownIdentity,
    check_label,
    identity_labels,
    record_labels,
    shown_from_records,
)
from harness.compare.select import agent_curves
from harness.results.leaderboard import load_leaderboard


def _row(agent: str, config: dict | None = None, budget: dict | None = None, **extra: object) -> dict:
    return {
        "agent": agent,
        "agent_config_json": json.dumps(config or {}, sort_keys=True),
        "models_json": json.dumps({"mutator": (config or {}).get("model", "m")}, sort_keys=True),
        "budget_json": json.dumps(budget or {"max_evaluations": 20}, sort_keys=True),
        **extra,
    }


def test_identities_of_one_agent_show_only_the_settings_that_differ() -> None:
    rows = [
        _row("pacevolve", {"islands": 4, "model": "x"}, {"max_evaluations": 20}),
        _row("pacevolve", {"islands": 4, "model": "x"}, {"max_evaluations": 50}),
        _row("pacevolve", {"islands": 2, "model": "x"}, {"max_evaluations": 50}),
        _row("random-search"),
    ]
    ids = [identity_of(r) for r in rows]
    got = record_labels(rows)
    assert [got[i] for i in ids] == [
        "pacevolve[islands=4,budget=20]",
        "pacevolve[islands=4,budget=50]",
        "pacevolve[islands=2,budget=50]",
        "random-search",  # alone of its agent: just the name
    ]
    # the view decides: shown without the third, islands no longer differs
    two = record_labels(rows, identities=ids[:2])
    assert two == {ids[0]: "pacevolve[budget=20]", ids[1]: "pacevolve[budget=50]"}
    assert record_labels(rows, identities=ids[:1]) == {ids[0]: "pacevolve"}


def test_a_model_repeated_by_its_config_key_is_named_once_and_missing_settings_say_unset() -> None:
    a, b = _row("pace", {"model": "gpt-a"}), _row("pace", {"model": "gpt-b"})
    old = {"agent": "pace", "agent_config_json": json.dumps({"model": "gpt-a"})}  # no budget, no models
    got = record_labels([a, b, old])
    assert got[identity_of(a)] == "pace[model=gpt-a,budget=20,mutator=gpt-a]"
    assert got[identity_of(old)] == "pace[model=gpt-a,budget=unset,mutator=unset]"
    assert record_labels([a, b]) == {identity_of(a): "pace[model=gpt-a]", identity_of(b): "pace[model=gpt-b]"}


def test_many_differing_settings_are_counted_and_long_values_cut() -> None:
    n = MAX_KEYS + 2
    a = _row("p", {f"k{i}": 0 for i in range(n)} | {"prompt": "x" * 80})
    b = _row("p", {f"k{i}": 1 for i in range(n)} | {"prompt": "y" * 80})
    la, lb = record_labels([a, b]).values()
    assert la.endswith(f",+{n + 1 - MAX_KEYS}]") and la.count("=") == MAX_KEYS
    assert la != lb
    long = record_labels([_row("p", {"prompt": "x" * 80}), _row("p", {"prompt": "y" * 80})])
    assert all(len(v) < 40 and "…" in v for v in long.values()), long


def test_user_labels_win_and_a_shared_label_is_disambiguated_by_the_config_hash() -> None:
    a = _row("pacevolve", {"islands": 4}, label="wide", finished_at="2026-01-01")
    a_newer = _row("pacevolve", {"islands": 4}, label="wider", finished_at="2026-01-02")
    b = _row("pacevolve", {"islands": 2})
    c = _row("random-search", label="wider")
    ia, ib, ic = identity_of(a), identity_of(b), identity_of(c)
    assert record_labels([a, b]) == {ia: "wide", ib: "pacevolve"}
    # the newest label of an identity counts; two identities labelled alike get their hashes
    got = record_labels([a_newer, a, b, c])
    assert got == {ia: f"wider@{ia.split('@')[1]}", ib: "pacevolve", ic: f"wider@{ic.split('@')[1]}"}
    # a label equal to an agent shown alone: both are widened, never confused
    d = _row("pacevolve", {"islands": 9}, label="random-search")
    got = record_labels([d, c | {"label": None}])
    assert len(set(got.values())) == 2 and all("@" in v for v in got.values()), got


def test_labels_are_unique_whatever_the_inputs() -> None:
    rnd = random.Random(0)
    for _ in range(200):
        shown = []
        for i in range(rnd.randint(1, 8)):
            agent = rnd.choice(["a", "b", "a@x"[:1]])
            cfg = rnd.choice(["111111", "222222", "333333", f"{i:06d}"])
            settings = {f"config.k{j}": rnd.choice([0, 1, "v" * 30, None]) for j in range(rnd.randint(0, 5))}
            label = rnd.choice([None, None, "a", "b", "x", "a@111111"])
            shown.append(ShownIdentity(f"{agent}@{cfg}", settings, label))
        uniq = {s.identity: s for s in shown}
        got = identity_labels(uniq.values())
        assert set(got) == set(uniq) and len(set(got.values())) == len(got), (shown, got)


def test_an_identity_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        identity_labels([ShownIdentity("a@1"), ShownIdentity("a@1")])
    assert [s.identity for s in shown_from_records([_row("a"), _row("a")])] == [identity_of(_row("a"))]


@pytest.mark.parametrize("bad", ["", "a b", "x@1", "k=v", "[x]", "-x", "y" * 49])
def test_check_label_refuses_what_would_not_read_or_parse(bad: str) -> None:
    with pytest.raises(ValueError, match="--label"):
        check_label(bad)
    assert check_label("pace-islands2.v1") == "pace-islands2.v1"


# -- the printers: compare's units and the plots' curves are named by these labels -------------------


def _budgets(store: Any, label: str | None = None) -> tuple[Any, dict[str, str]]:
    """pacevolve at budgets 20 and 50 (the 50 one labelled ``label``) and random-search, 2 seeds each.

    Returns:
        The leaderboard with identities, and run-id prefix -> identity.
    """
    for s in range(2):
        store.run(run_id=f"p20-{s}", agent="pacevolve", seed=s, scores=[1.0], budget={"max_evaluations": 20})
        store.run(
            run_id=f"p50-{s}",
            agent="pacevolve",
            seed=s,
            scores=[2.0],
            budget={"max_evaluations": 50},
            label=label,
        )
        store.run(run_id=f"r-{s}", agent="random-search", seed=s, scores=[1.5])
    lb = with_identity(load_leaderboard(store.leaderboards, "toy"))
    return lb, {p: lb.loc[lb["run_id"] == f"{p}-0", IDENTITY_COLUMN].iloc[0] for p in ("p20", "p50", "r")}


def _curve_names(lb: Any, results: Path) -> list[str]:
    curves, _, _ = agent_curves(
        lb, variant="toy", current_hash="h1", maximize=True, units=None, results_dir=results
    )
    return sorted(curves)


def test_compare_units_and_plot_curves_are_named_by_what_differs(store: Any) -> None:
    lb, ident = _budgets(store)
    sel = resolve((ident["p20"], ident["p50"], "random-search"), lb)
    assert sel.units == {
        "pacevolve[budget=20]": (ident["p20"],),
        "pacevolve[budget=50]": (ident["p50"],),
        "random-search": (ident["r"],),
    }
    assert list(resolve(("pacevolve", "random-search"), lb, pool=True).units) == [
        "pacevolve",
        "random-search",
    ]
    assert list(resolve((f"{ident['p20']}=small", "random-search"), lb).units) == ["small", "random-search"]
    # the view decides: one pacevolve identity compared alone is just "pacevolve"
    assert list(resolve((ident["p50"], "random-search"), lb).units) == ["pacevolve", "random-search"]
    assert _curve_names(lb, store.results) == [
        "pacevolve[budget=20]",
        "pacevolve[budget=50]",
        "random-search",
    ]


def test_a_run_label_names_its_identity_in_compare_and_plots(store: Any) -> None:
    lb, ident = _budgets(store, label="long-run")
    assert list(resolve((ident["p20"], ident["p50"]), lb).units) == ["pacevolve", "long-run"]
    assert _curve_names(lb, store.results) == ["long-run", "pacevolve", "random-search"]
    # the label selects its identity in --agents
    assert resolve(("long-run", "random-search"), lb).units == {
        "long-run": (ident["p50"],),
        "random-search": (ident["r"],),
    }
    other: dict[str, Any] = {"agent": "random-search", "budget": {"max_evaluations": 9}}  # another identity
    store.run(run_id="r-9", seed=9, scores=[1.0], label="long-run", **other)
    lb = with_identity(load_leaderboard(store.leaderboards, "toy"))
    with pytest.raises(AmbiguousAgentError, match="given to 2 identities"):
        resolve(("long-run", "pacevolve"), lb)
    assert set(_curve_names(lb, store.results)) >= {f"long-run@{ident['p50'].split('@')[1]}"}  # told apart
