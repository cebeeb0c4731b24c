"""A run on a held-out key's draw is measured against that draw's bounds, end to end.

The quick start's comparison on a fresh machine (issue: u was 0 for every run): key ``5eed...``
draws eplb-tiny cases on which the initial program scores 0.7064, below the manifest's public-draw
y_init (0.7137), so against the manifest's bounds every run of a few evaluations had u = 0 and
IQM 0. Against the key's own bounds the initial program sits at u = 0.2 and the comparison is not
degenerate; rows of another key are refused on one u scale; a run cannot resume on another key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.pacevolve import PACEvolveAgent, PACEvolveConfig
from agents.random_search import RandomSearchAgent, RandomSearchConfig
from evobench.cli.commands_info import leaderboard
from harness.compare.identity import with_identity
from harness.compare.paired import compare
from harness.compare.select import KeyMixError, key_labels, variant_runs
from harness.envs import draw_bounds
from harness.envs.registry import default_registry
from harness.envs.secret import KEY_ENV, fingerprint
from harness.evaluation.result import program_sha256
from harness.results.leaderboard import load_leaderboard
from harness.runner.context import Budget
from harness.runner.runner import PHASE_AGENT, PHASE_BOUNDS, ResumeError, create_run, drive, run_bounds
from harness.sandbox.factory import make_backend
from harness.scoring.progress import normalized_progress

FRESH_KEY = "5eed" * 16
OTHER_KEY = "0bad" * 16
EVALUATIONS = 4


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    with make_backend("local", workers=2, mode="warm", prewarm=("eplb-tiny",)) as b:
        yield b


@pytest.fixture
def fresh_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv(KEY_ENV, FRESH_KEY)
    return tmp_path


def _run(backend: Any, root: Path, agent: str, seed: int, phases: list[str] | None = None) -> Path:
    v = default_registry().get("eplb-tiny")
    a: Any = (
        PACEvolveAgent(PACEvolveConfig(model="offline/pacevolve", islands=2, max_ideas=2))
        if agent == "pacevolve"
        else RandomSearchAgent(RandomSearchConfig())
    )
    store = create_run(results_dir=root / "results", variant=v, agent=a, seed=seed,
                       budget=Budget(max_evaluations=EVALUATIONS), backend="local", workers=2)  # fmt: skip
    try:
        drive(store, variant=v, agent=a, backend=backend, leaderboard_dir=root / "lb",
              on_phase=None if phases is None else phases.append)  # fmt: skip
    finally:
        store.close()
    return store.run_dir


def _runs(root: Path, key: str | None = None) -> Any:
    v = default_registry().get("eplb-tiny")
    lb = with_identity(load_leaderboard(root / "lb", "eplb"))
    units = {
        a: tuple(sorted(set(lb.loc[lb["agent"] == a, "identity"]))) for a in ("pacevolve", "random-search")
    }
    return variant_runs(lb, variant=v.id, current_hash=v.hash, maximize=True, progress=v.progress,
                        units=units, results_dir=root / "results", key=key)  # fmt: skip


def test_a_fresh_key_gets_its_own_bounds_and_a_comparison_that_says_something(
    backend: Any, fresh_machine: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fresh_machine
    v = default_registry().get("eplb-tiny")
    phases: list[list[str]] = [[] for _ in range(4)]
    dirs = [
        _run(backend, root, agent, seed, phases[i])
        for i, (agent, seed) in enumerate((a, s) for a in ("pacevolve", "random-search") for s in (1, 2))
    ]
    # what `bench run` shows before the first result: the initial program scored for this key's
    # bounds in the key's first run only, then the agent's start
    assert phases == [[PHASE_BOUNDS, PHASE_AGENT]] + [[PHASE_AGENT]] * 3
    fp = fingerprint()
    bounds = [json.loads((d / "run.json").read_text())["progress_bounds"] for d in dirs]
    assert all(b == bounds[0] for b in bounds) and bounds[0]["key"] == fp and bounds[0]["measured"]
    y_init = bounds[0]["y_init"]
    assert y_init < v.progress.y_init  # this key's draw: the manifest's floor would have pinned u at 0
    assert normalized_progress(y_init, v.progress.y_init, v.progress.y_target) == 0.0  # the old rule
    # measured once for the key, stored beside it; equal to the initial program's score in the runs
    assert json.loads((root / "data" / draw_bounds.STORE_FILE).read_text()) == {
        fp: {f"{v.id}@{v.hash}": y_init}
    }
    first = pd.read_parquet(dirs[2] / "candidates.parquet").sort_values("seq").iloc[0]
    assert first["program_sha256"] == program_sha256(v.initial_program) and first["score"] == y_init
    lb = load_leaderboard(root / "lb", "eplb")
    assert set(lb["heldout_key"]) == {fp} and set(lb["y_floor"]) == {bounds[0]["y_floor"]}
    vr = _runs(root)
    assert not [n for n in vr.notes if "cannot tell these agents apart" in n], vr.notes
    assert (vr.runs["u"] >= 0.2 - 1e-9).all() and (vr.runs["u"] < 1.0).all()  # every run starts at u = 0.2
    iqm = [
        g
        for g in compare([vr], ("pacevolve", "random-search"), n_resamples=200).aggregates
        if g.kind == "iqm"
    ]
    assert len(iqm) == 2 and all(0.0 < g.estimate < 1.0 for g in iqm), iqm

    # Another key's run of the same variant: never on one u scale with the first key's runs.
    monkeypatch.setenv(KEY_ENV, OTHER_KEY)
    _run(backend, root, "random-search", 1)
    with pytest.raises(KeyMixError, match=rf"{fp} \(4 runs\).*--key"):
        _runs(root)
    lb = load_leaderboard(root / "lb", "eplb")
    assert sorted(key_labels(lb).value_counts().tolist()) == [1, 4]
    assert len(_runs(root, key=fp).runs) == 4 and len(_runs(root, key=fingerprint()).runs) == 1
    assert leaderboard(env="eplb-tiny", leaderboard_dir=root / "lb", format="json") == 0
    shown = json.loads(capsys.readouterr().out)  # this installation's key only, the other named
    assert [r["runs"] for r in shown] == [1]
    assert leaderboard(env="eplb-tiny", leaderboard_dir=root / "lb", format="json", key=fp) == 0
    assert sorted(r["runs"] for r in json.loads(capsys.readouterr().out)) == [2, 2]

    # A run started on the first key cannot continue on the second (its draw would change).
    info = json.loads((dirs[0] / "run.json").read_text())
    from harness.results.records import RunInfo

    with pytest.raises(ResumeError, match=f"held-out key {fp}"):
        run_bounds(RunInfo.model_validate(info), v, backend)
