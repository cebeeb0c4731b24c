"""``bench run``'s plan: resolved and checked from the options alone, with nothing started."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agents.random_search import RandomSearchAgent
from evobench.cli.run_plan import EXIT_USAGE, PlanError, ReaddPlan, RunArgs, RunPlan, plan_run
from harness.budget import Budget
from harness.envs.registry import default_registry
from harness.results.store import RunStore
from harness.runner.runner import create_run


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning must not start a process, fork, or build a backend."""

    def refuse(*_a: Any, **_k: Any) -> None:
        raise AssertionError("planning started something")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr("harness.sandbox.factory.make_backend", refuse)


def test_new_run_is_resolved_without_a_run_directory(tmp_path: Path, nothing_starts: None) -> None:
    results = tmp_path / "results"
    plan = plan_run(
        RunArgs(
            agent="random-search", env="eplb-tiny", seed=7, backend="docker", workers=3, max_evaluations=12,
            max_wall_s=30.0, results_dir=results, leaderboard_dir=tmp_path / "lb", mode="cold",
        )
    )  # fmt: skip
    assert isinstance(plan, RunPlan)
    assert plan.variant.id == "eplb-tiny" and plan.agent.name == "random-search"
    assert plan.budget == Budget(max_evaluations=12, max_wall_s=30.0)
    assert (plan.backend, plan.workers, plan.mode, plan.seed) == ("docker", 3, "cold", 7)
    assert plan.resume is None and plan.warnings == ()
    assert not results.exists()  # the run directory belongs to the execution


def test_default_workers_are_one_per_core_for_a_cpu_variant(nothing_starts: None) -> None:
    plan = plan_run(RunArgs(agent="random-search", env="eplb-tiny"))
    assert isinstance(plan, RunPlan) and plan.workers == (os.cpu_count() or 1)


def test_agent_config_and_model_overrides_reach_the_agent(
    monkeypatch: pytest.MonkeyPatch, nothing_starts: None
) -> None:
    from agents.pacevolve.agent import PACEvolveAgent

    checked: list[dict[str, Any]] = []
    # The real preflight imports litellm (~15 s on a loaded machine); record that the plan calls it.
    monkeypatch.setattr(PACEvolveAgent, "preflight", lambda self: checked.append(self.config.model_dump()))
    plan = plan_run(
        RunArgs(agent="pacevolve", env="eplb-tiny", model="offline/pacevolve", agent_config='{"islands": 2}')
    )
    assert isinstance(plan, RunPlan)
    cfg = plan.agent.config.model_dump()
    assert cfg["model"] == "offline/pacevolve" and cfg["islands"] == 2
    assert checked == [cfg]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (RunArgs(env="eplb-tiny"), "--agent and --env are required"),
        (RunArgs(agent="random-search", env="eplb-tiny~subset-1-2"), "validation subset"),
        (RunArgs(agent="random-search", env="eplb-tiny", agent_config="{nope"), "bad --agent-config"),
        (RunArgs(agent="random-search", env="eplb-tiny", agent_config='{"no_such_field": 1}'), "bad --agent"),
        (RunArgs(agent="random-search", env="eplb-tiny", model="openai/gpt-4o"), "does not use an LLM"),
        (RunArgs(agent="random-search", env="eplb-tiny", advisor_model="x"), "has no advisor-model"),
        (RunArgs(agent="random-search", env="eplb-tiny", max_evaluations=0), "at least 1"),
        (RunArgs(agent="random-search", env="eplb-tiny", max_evaluations=-3), "at least 1"),
        (RunArgs(agent="random-search", env="eplb-tiny", max_wall_s=0.0), "positive number of seconds"),
        (RunArgs(agent="random-search", env="eplb-tiny", max_wall_s=float("nan")), "positive number"),
        (RunArgs(agent="random-search", env="eplb-tiny", max_cost_usd=-1.0), "non-negative"),
        (RunArgs(agent="random-search", env="eplb-tiny", label="wide=2"), "--label 'wide=2'"),
    ],
)
def test_bad_options_are_refused_as_usage_errors(args: RunArgs, needle: str, nothing_starts: None) -> None:
    with pytest.raises(PlanError, match=needle) as e:
        plan_run(args)
    assert e.value.exit_code == EXIT_USAGE


def test_missing_data_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nothing_starts: None
) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "empty"))
    with pytest.raises(PlanError, match="expert-load") as e:
        plan_run(RunArgs(agent="random-search", env="eplb", results_dir=tmp_path / "r"))
    assert e.value.exit_code == EXIT_USAGE and not (tmp_path / "r").exists()


def test_workers_sharing_a_gpu_is_a_warning(monkeypatch: pytest.MonkeyPatch, nothing_starts: None) -> None:
    monkeypatch.setattr("harness.hardware.gpus.host_gpus", lambda: [0, 1])
    # docker: the GPU is checked in the container, not here; the worker plan still uses this host's GPUs.
    plan = plan_run(RunArgs(agent="random-search", env="trimul-h100", backend="docker", workers=8))
    assert isinstance(plan, RunPlan) and plan.workers == 8
    assert len(plan.warnings) == 1 and "trimul-h100" in plan.warnings[0] and "share 2 GPU" in plan.warnings[0]


@pytest.fixture
def made_run(tmp_path: Path) -> RunStore:
    """A new run of random-search on eplb-tiny, created (and closed) before planning is watched."""
    store = create_run(
        results_dir=tmp_path / "results",
        variant=default_registry().get("eplb-tiny"),
        agent=RandomSearchAgent(),
        seed=5,
        budget=Budget(max_evaluations=9),
        backend="local",
        workers=2,
        mode="cold",
        leaderboard_dir=tmp_path / "frozen-lb",
    )
    store.close()
    return store


def test_a_label_is_planned_recorded_in_run_json_and_kept_on_resume(tmp_path: Path) -> None:
    from evobench.cli.run_exec import _open_store

    plan = plan_run(
        RunArgs(agent="random-search", env="eplb-tiny", label="rs-baseline", results_dir=tmp_path / "results")
    )
    assert isinstance(plan, RunPlan) and plan.label == "rs-baseline"
    store = _open_store(plan)  # what `bench run` creates from the plan
    assert isinstance(store, RunStore)
    store.close()
    assert RunStore.open(store.run_dir, readonly=True).info.label == "rs-baseline"
    again = plan_run(RunArgs(resume=store.run_dir, label="rs-baseline"))  # the same label is no conflict
    assert isinstance(again, RunPlan) and again.label == "rs-baseline"


def test_resume_takes_the_runs_frozen_settings_not_the_flags(
    tmp_path: Path, made_run: RunStore, nothing_starts: None
) -> None:
    store = made_run
    # Flags at their defaults, or equal to what the run recorded, are no conflict.
    plan = plan_run(
        RunArgs(resume=store.run_dir, env="eplb-tiny", seed=5, max_evaluations=50, workers=0, mode="warm")
    )
    assert isinstance(plan, RunPlan) and plan.resume == store.run_dir
    assert (plan.backend, plan.workers, plan.mode, plan.seed) == ("local", 2, "cold", 5)
    assert plan.budget.max_evaluations == 9 and plan.agent.name == "random-search"
    assert plan.leaderboard_dir == (tmp_path / "frozen-lb").resolve() and plan.warnings == ()
    RunStore.open(store.run_dir).close()  # planning left the run unlocked for the execution


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"env": "eplb"}, ["--env eplb (recorded eplb-tiny)"]),
        (
            {"agent": "pacevolve", "model": "offline/pacevolve"},
            ["--agent pacevolve", "--model offline/pacevolve"],
        ),
        ({"seed": 9, "max_evaluations": 3}, ["--seed 9 (recorded 5)", "--max-evaluations 3 (recorded 9)"]),
        ({"max_wall_s": 60.0}, ["--max-wall-s 60.0 (recorded unset)"]),
        (
            {"backend": "docker", "workers": 7},
            ["--backend docker (recorded local)", "--workers 7 (recorded 2)"],
        ),
        ({"agent_config": '{"tournament": 5}'}, ["--agent-config tournament=5 (recorded 3)"]),
        ({"leaderboard_dir": Path("/elsewhere")}, ["--leaderboard-dir /elsewhere"]),
        ({"label": "renamed"}, ["--label renamed (recorded unset)"]),
    ],
)
def test_resume_refuses_flags_that_contradict_the_record(
    made_run: RunStore, flags: dict[str, Any], named: list[str], nothing_starts: None
) -> None:
    before = (made_run.run_dir / "run.json").read_bytes()
    with pytest.raises(PlanError) as e:
        plan_run(RunArgs(resume=made_run.run_dir, **flags))
    msg = str(e.value)
    assert e.value.exit_code == EXIT_USAGE and "\n" not in msg and "recorded" in msg
    assert all(n in msg for n in named), msg
    assert (made_run.run_dir / "run.json").read_bytes() == before


def test_resume_ignores_mode_and_results_dir_with_a_warning(
    tmp_path: Path, made_run: RunStore, nothing_starts: None
) -> None:
    plan = plan_run(RunArgs(resume=made_run.run_dir, mode="warm", results_dir=tmp_path / "other"))
    assert isinstance(plan, RunPlan) and plan.mode == "cold"
    assert len(plan.warnings) == 1 and "--results-dir" in plan.warnings[0]
    made_run_dir = made_run.run_dir
    with RunStore.open(made_run_dir) as store:  # a run recorded warm, resumed with --mode cold
        store.write_info(store.info.model_copy(update={"mode": "warm"}))
    plan = plan_run(RunArgs(resume=made_run_dir, mode="cold"))
    assert isinstance(plan, RunPlan) and plan.mode == "warm"
    assert plan.warnings == ("--mode cold ignored: the run continues in its recorded mode warm",)


def test_resume_of_a_finished_run_plans_only_the_leaderboard_row(made_run: RunStore) -> None:
    with RunStore.open(made_run.run_dir) as store:
        store.write_info(store.info.model_copy(update={"status": "finished"}))
    plan = plan_run(RunArgs(resume=store.run_dir))
    assert plan == ReaddPlan(run_dir=store.run_dir, variant=default_registry().get("eplb-tiny"))


def test_resume_of_a_non_run_is_a_usage_error(tmp_path: Path, nothing_starts: None) -> None:
    with pytest.raises(PlanError, match="run.json") as e:
        plan_run(RunArgs(resume=tmp_path))
    assert e.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("n", ["0", "-3"])
def test_a_run_without_evaluations_is_refused_before_anything_exists(tmp_path: Path, n: str) -> None:
    """``bench run --max-evaluations 0`` once exited 0 and added a leaderboard row."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "evobench.cli.main", "run", "--agent", "random-search", "--env", "eplb-tiny"]
        + ["--max-evaluations", n, "--results-dir", "res", "--leaderboard-dir", "lb"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == EXIT_USAGE and "at least 1" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1  # one line
    assert not (tmp_path / "res").exists() and not (tmp_path / "lb").exists()
