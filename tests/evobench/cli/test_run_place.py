"""``bench run --place modal`` through the signature-checking fake of the ``modal`` package.

The run container's commands run here (the ordinary ``bench run`` on selftest-tiny, evaluating
in the local sandbox since Modal sandboxes cannot be reached); everything the placement asks of
Modal binds to modal's real signatures, and the container's file system vanishes with it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from evobench.cli.run_place import (
    PLACEMENT_FILE,
    PlaceRequest,
    hold,
    inner_argv,
    place_run,
    placement_of,
    secret_env,
)
from evobench.cli.run_plan import PlanError, RunArgs
from harness.envs.secret import KEY_ENV
from harness.results.atomic import unlock_file
from harness.results.leaderboard import load_leaderboard
from harness.results.store import RunStore
from harness.sandbox.modal_backend.client import ImageRecipe
from harness.sandbox.modal_backend.run_sdk import SdkRunHost

# The same signature-checking fake as the evaluation backend's SDK test (tests/harness/sandbox).
from ...harness.sandbox.modal_sdk_fake import FakeModal, FakeSandbox  # type: ignore[misc]

BUDGET = 8


def _recipe(tmp: Path):  # type: ignore[no-untyped-def]
    def make(gpu: str | None) -> ImageRecipe:
        ctx = tmp / f"ctx-{len(list(tmp.glob('ctx-*')))}"
        ctx.mkdir()
        (ctx / "Dockerfile").write_text("FROM scratch\n")
        return ImageRecipe("run", "evobench-run:test", ctx / "Dockerfile", ctx, (("RUN_EXTRAS", "modal"),))

    return make


def _request(tmp: Path, **kw: object) -> PlaceRequest:
    args = RunArgs(
        agent="random-search", env="selftest-tiny", max_evaluations=BUDGET, workers=1,
        results_dir=tmp / "results", leaderboard_dir=tmp / "leaderboards",
    )  # fmt: skip
    base: dict[str, object] = {
        "gpu": "H100",
        "sync_interval_s": 0.5,
        "root": str(tmp / "container"),
        "backend": "local",
    }
    return PlaceRequest(args, **{**base, **kw})  # type: ignore[arg-type]


def _rows(run_dir: Path) -> list[int]:
    with RunStore.open(run_dir, readonly=True) as store:
        return [r.seq for r in store.rows()]


@pytest.mark.run  # two real `bench run`s (sandboxed evaluations) inside the fake container
@pytest.mark.sandbox
@pytest.mark.slow
def test_lost_container_leaves_a_resumable_copy_and_resume_places_it_again(tmp_path: Path) -> None:
    modal, lines = FakeModal(), list[str]()
    results = tmp_path / "results"

    def lose_once_synced(sb: FakeSandbox, argv: tuple[str, ...]) -> None:
        # Preempted right after a copy holding evaluations came back (the run is mid-way).
        journals = list(results.glob("*/candidates.jsonl"))
        if "tar -czf" in " ".join(argv) and journals and journals[0].read_text().count("\n") >= 1:
            sb.terminate()

    # The run is held mid-way (SIGSTOP) once its first evaluation is journaled in the container, so
    # that it cannot finish before the loss however slowly the syncs come on a loaded machine (CI
    # once saw the run finish first). A stopped process is still killed by the container's loss.
    done, stopped = threading.Event(), threading.Event()

    def hold_mid_way() -> None:
        while not done.is_set():
            for sb in modal.sandboxes:
                runs = [p for p in sb.procs if "evobench.cli.main" in " ".join(map(str, p.args))]
                inner = list((tmp_path / "container").glob("results/*/candidates.jsonl"))
                if runs and inner and inner[0].read_text().count("\n") >= 1:
                    os.killpg(runs[0].pid, signal.SIGSTOP)
                    stopped.set()
                    return
            time.sleep(0.01)

    watcher = threading.Thread(target=hold_mid_way, daemon=True)
    watcher.start()
    modal.on_exec = lose_once_synced
    try:
        code = place_run(
            _request(tmp_path), SdkRunHost(modal), _recipe(tmp_path), out=lines.append, err=lines.append
        )
    finally:
        done.set()
        watcher.join()
    assert stopped.is_set()  # the run was held mid-way, not raced
    assert code == 3, lines  # an infra error of the placement
    (run_dir,) = [p for p in results.iterdir() if not p.name.startswith(".")]
    record = placement_of(run_dir)
    assert record is not None and record.gpu == "H100" and "terminated" in record.lost
    assert any(f"bench run --resume {run_dir}" in line for line in lines)
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.info.status == "running" and store.info.backend == "local"
        # The loss is the placement's, recorded in placement.json; no candidate row carries it.
        assert store.rows() and all(r.status.value != "infra_error" for r in store.rows())
    assert not (tmp_path / "container").exists()  # the container's disk went with it
    sb = modal.sandboxes[0]
    assert sb.kwargs["gpu"] == "H100" and sb.tags["evobench.placed"] == "1"
    assert sb.env[KEY_ENV] and sb.command[0] == "sleep"

    # One placement of a run at a time: another bench run holding it is refused before any container.
    held = hold(results, run_dir.name)
    with pytest.raises(PlanError, match="being run on Modal by pid"):
        place_run(PlaceRequest(RunArgs(resume=run_dir)), SdkRunHost(modal), _recipe(tmp_path))
    unlock_file(held)
    assert len(modal.sandboxes) == 1

    # --resume of a placed run: a new container gets the local copy and finishes it there.
    modal.on_exec = None
    resumed = place_run(
        PlaceRequest(RunArgs(resume=run_dir), sync_interval_s=0.5, root=str(tmp_path / "container")),
        SdkRunHost(modal), _recipe(tmp_path), out=lines.append, err=lines.append,
    )  # fmt: skip
    assert resumed == 0, lines[-20:]
    second = modal.sandboxes[1]
    assert second.kwargs["gpu"] == "H100" and second.tags["evobench.run"] == run_dir.name
    seqs = _rows(run_dir)
    assert sorted(seqs) == list(range(BUDGET))  # finished, no evaluation lost or duplicated
    record = placement_of(run_dir)
    assert record is not None and record.lost == "" and record.container == second.object_id
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.info.status == "finished" and store.info.leaderboard == "added"
    # The finished run's row is on the local leaderboard, as for a local run.
    board = load_leaderboard(tmp_path / "leaderboards", "selftest")
    assert run_dir.name in set(board["run_id"]), board
    assert not [p for p in results.iterdir() if p.name.startswith(".sync-")]


def test_inner_command_and_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    req = _request(tmp_path, backend="modal")
    argv = inner_argv(req, None)
    root = str(tmp_path / "container")
    assert argv[:5] == ("python", "-m", "evobench.cli.main", "run", "--no-progress")
    assert ("--backend", "modal") == argv[argv.index("--backend") : argv.index("--backend") + 2]
    assert f"{root}/results" in argv and f"{root}/leaderboards" in argv
    assert "--max-evaluations" in argv and str(tmp_path / "results") not in argv
    resume = inner_argv(PlaceRequest(RunArgs(resume=Path("x/r1")), root=root), "r1")
    assert resume[-2:] == ("--resume", f"{root}/results/r1") and "--backend" not in resume
    model = tmp_path / "policy.gguf"
    model.write_text("")
    with pytest.raises(PlanError, match="local path"):
        inner_argv(PlaceRequest(RunArgs(agent="a", env="e", advisor_model=str(model))), None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-x")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-x")
    monkeypatch.setenv("UNRELATED_SETTING", "1")
    env = dict(secret_env())
    assert env["OPENAI_API_KEY"] == "sk-test" and env["MODAL_TOKEN_ID"] == "ak-x" and KEY_ENV in env
    assert "UNRELATED_SETTING" not in env and "PATH" not in env
    assert "sk-test" not in repr(req) and os.environ["OPENAI_API_KEY"] == "sk-test"


def test_placement_record_is_typed(tmp_path: Path) -> None:
    (tmp_path / PLACEMENT_FILE).write_text(json.dumps({"place": "modal", "gpu": "H100", "bogus": 1}))
    with pytest.raises(ValueError, match="bogus"):
        placement_of(tmp_path)
    assert placement_of(tmp_path / "missing") is None


def test_cli_refusals_exit_2_without_a_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evobench.cli.main import main
    from harness.sandbox.modal_backend.sdk import credentials_present

    monkeypatch.chdir(tmp_path)
    for k in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    base = ["run", "--agent", "random-search", "--env", "selftest-tiny", "--max-evaluations", "2"]
    refused = {
        "add --place modal": ["--gpu", "H100"],  # a GPU only exists on a placed run
        "not --backend docker": ["--place", "modal", "--backend", "docker"],
    }
    if not credentials_present():
        refused["modal token new"] = ["--place", "modal", "--gpu", "H100"]
    for reason, extra in refused.items():
        assert main([*base, *extra]) == 2
        assert reason in capsys.readouterr().err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
