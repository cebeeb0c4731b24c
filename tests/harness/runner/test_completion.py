"""A run's completion: row queued before ``finished``, a failed append kept for retry, first error kept."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from evobench.cli.main import main
from harness.envs.registry import Variant, default_registry
from harness.results.leaderboard import load_leaderboard
from harness.results.records import RunInfo
from harness.results.store import RunStore
from harness.runner import completion, runner
from harness.runner.completion import ROW_FILE, LeaderboardPending, complete, readd
from harness.runner.context import Agent, AgentContext


@pytest.fixture(scope="module")
def variant() -> Variant:
    return default_registry().get("selftest-tiny")


def _store(root: Path, v: Variant, leaderboard_dir: Path | None) -> RunStore:
    info = RunInfo(
        run_id="run-1",
        env_id=v.id,
        family=v.family,
        variant=v.id,
        env_version=v.version,
        env_hash=v.hash,
        agent="boom",
        seed=0,
        leaderboard_dir=str(leaderboard_dir) if leaderboard_dir else None,
    )
    return RunStore.create(root / "results", info)


def _run_json(store: RunStore) -> dict[str, Any]:
    return json.loads((store.run_dir / "run.json").read_text())


def test_failed_append_is_queued_then_readded(tmp_path: Path, variant: Variant) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    store = _store(tmp_path, variant, blocker / "lb")
    with pytest.raises(LeaderboardPending, match="bench leaderboard add") as err:
        complete(store, store.info, [], variant)
    assert str(store.run_dir / ROW_FILE) in str(err.value)
    info = _run_json(store)
    assert (info["status"], info["leaderboard"]) == ("finished", "pending")
    assert (store.run_dir / ROW_FILE).exists()

    good = tmp_path / "lb"
    assert readd(store, variant, good) is True
    assert load_leaderboard(good, variant.family)["run_id"].tolist() == ["run-1"]
    info = _run_json(store)
    assert info["leaderboard"] == "added" and info["leaderboard_dir"] == str(good.resolve())
    assert readd(store, variant) is False  # idempotent: present, nothing to do
    (good / f"{variant.family}.parquet").unlink()  # the row got lost from the leaderboard file
    assert readd(store, variant) is True
    assert load_leaderboard(good, variant.family)["run_id"].tolist() == ["run-1"]
    store.close()


def test_enospc_on_the_leaderboard_keeps_the_row(
    tmp_path: Path, variant: Variant, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "lb" / "selftest.parquet"))

    monkeypatch.setattr(completion, "append_leaderboard_row", full)
    store = _store(tmp_path, variant, tmp_path / "lb")
    with pytest.raises(LeaderboardPending, match="No space left on device"):
        complete(store, store.info, [], variant)
    assert _run_json(store)["leaderboard"] == "pending"
    store.close()
    monkeypatch.undo()
    # The CLI verb re-adds it from the queued row, into the recorded directory.
    assert main(["leaderboard", "add", str(store.run_dir)]) == 0
    assert load_leaderboard(tmp_path / "lb", variant.family)["run_id"].tolist() == ["run-1"]
    assert main(["leaderboard", "add", str(store.run_dir)]) == 0  # again: a no-op


def test_leaderboard_add_refuses_an_unfinished_run(tmp_path: Path, variant: Variant, capsys: Any) -> None:
    store = _store(tmp_path, variant, tmp_path / "lb")
    store.close()
    assert main(["leaderboard", "add", str(store.run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error:") and "--resume" in err[0]


class _Cfg(BaseModel):
    pass


class _Boom(Agent):
    name: ClassVar[str] = "boom"
    Config: ClassVar[type[BaseModel]] = _Cfg

    def run(self, ctx: AgentContext) -> None:
        raise RuntimeError("the first error")


class _Backend:
    workers = 1


def test_abort_on_a_full_disk_writes_failed_and_keeps_the_first_error(
    tmp_path: Path, variant: Variant, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, variant, tmp_path / "lb")
    real = store.write_info

    def no_space(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def write_info(info: RunInfo, *, durable_fallback: bool = False) -> None:
        if info.status == "running":
            return real(info, durable_fallback=durable_fallback)
        monkeypatch.setattr("harness.results.store.atomic_write_text", no_space)  # disk now full
        return real(info, durable_fallback=durable_fallback)

    monkeypatch.setattr(store, "write_info", write_info)
    monkeypatch.setattr(store, "flush_parquet", no_space)
    with pytest.raises(RuntimeError, match="the first error"):
        runner.drive(store, variant=variant, agent=_Boom(), backend=_Backend(), leaderboard_dir=None)  # type: ignore[arg-type]
    info = _run_json(store)  # written in place: no room for a temporary copy
    assert info["status"] == "failed" and "the first error" in info["error"]
    store.close()


def test_abort_whose_status_cannot_be_written_still_raises_the_first_error(
    tmp_path: Path, variant: Variant, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, variant, None)
    real = store.write_info

    def write_info(info: RunInfo, *, durable_fallback: bool = False) -> None:
        if info.status == "running":
            return real(info)
        raise OSError(errno.EROFS, "Read-only file system", str(store.run_dir / "run.json"))

    monkeypatch.setattr(store, "write_info", write_info)
    with pytest.raises(RuntimeError, match="the first error") as err:
        runner.drive(store, variant=variant, agent=_Boom(), backend=_Backend(), leaderboard_dir=None)  # type: ignore[arg-type]
    assert any("Read-only file system" in n for n in getattr(err.value, "__notes__", []))
    store.close()


class _Done(_Boom):
    def run(self, ctx: AgentContext) -> None:
        return None


def test_a_row_that_cannot_be_queued_leaves_the_run_failed_not_running(
    tmp_path: Path, variant: Variant, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "leaderboard_row.json")

    monkeypatch.setattr(completion, "atomic_write_json", full)
    store = _store(tmp_path, variant, tmp_path / "lb")
    with pytest.raises(OSError, match="No space left"):
        lb = tmp_path / "lb"
        runner.drive(store, variant=variant, agent=_Done(), backend=_Backend(), leaderboard_dir=lb)  # type: ignore[arg-type]
    info = _run_json(store)
    assert info["status"] == "failed" and "No space left" in info["error"]
    store.close()
