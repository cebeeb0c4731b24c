from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.evaluation.result import CaseRecord, EvalResult, PhaseDurations, Status, program_sha256
from harness.results import atomic
from harness.results.atomic import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_parquet,
    atomic_write_text,
)
from harness.results.candidates import candidates_schema, rows_from_table
from harness.results.provenance import git_state, host_info, package_versions
from harness.results.records import CandidateRow, RunInfo
from harness.results.store import RunLockedError, RunStore, RunStoreError

T0 = "2025-01-01T00:00:00+00:00"


def make_info(run_id: str = "run-1", **kw: object) -> RunInfo:
    base: dict[str, object] = dict(
        run_id=run_id,
        env_id="eplb-tiny",
        family="eplb",
        variant="eplb-tiny",
        env_version="1.0.0",
        env_hash="0123456789abcdef",
        agent="random",
        seed=0,
    )
    base.update(kw)
    return RunInfo.model_validate(base)


def make_row(seq: int, score: float | None = 1.0, run_id: str = "run-1", **kw: object) -> CandidateRow:
    base: dict[str, object] = dict(
        run_id=run_id,
        seq=seq,
        iteration=seq,
        thread=0,
        program_sha256=program_sha256(f"prog {seq}"),
        status=Status.OK if score is not None else Status.ERROR,
        score=score,
        started_at="2025-01-01T00:00:00+00:00",
        finished_at="2025-01-01T00:00:01+00:00",
        env_id="eplb-tiny",
        env_hash="0123456789abcdef",
    )
    base.update(kw)
    return CandidateRow.model_validate(base)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# ----------------------------------------------------------------------------- atomic writes


def test_atomic_writers_round_trip(tmp_path: Path) -> None:
    atomic_write_bytes(tmp_path / "a" / "b.bin", b"\x00\x01")
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"
    atomic_write_text(tmp_path / "t.txt", "héllo")
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "héllo"
    atomic_write_json(tmp_path / "j.json", {"x": [1, 2.5, None]})
    assert json.loads((tmp_path / "j.json").read_text()) == {"x": [1, 2.5, None]}
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    atomic_write_parquet(tmp_path / "d.parquet", df)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "d.parquet"), df, check_dtype=False)
    assert leftovers(tmp_path) == []


def test_atomic_write_keeps_old_file_when_replace_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.json"
    atomic_write_json(target, {"v": 1})
    before = target.read_bytes()

    def boom(src: object, dst: object) -> None:
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        atomic_write_json(target, {"v": 2})
    with pytest.raises(OSError, match="simulated"):
        atomic_write_parquet(tmp_path / "f.json", pd.DataFrame({"a": [1]}))
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_atomic_write_keeps_old_file_when_writer_dies_mid_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "d.parquet"
    atomic_write_parquet(target, pd.DataFrame({"a": [1, 2, 3]}))
    before = target.read_bytes()

    def half_then_die(table: object, where: object, **kw: object) -> None:
        assert hasattr(where, "write")
        where.write(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr("pyarrow.parquet.write_table", half_then_die)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_parquet(target, pd.DataFrame({"a": [9]}))
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_atomic_write_json_rejects_unserialisable_without_touching(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    atomic_write_json(target, [1])
    with pytest.raises(ValueError):
        atomic_write_json(target, [float("nan")])
    with pytest.raises(TypeError):
        atomic_write_json(target, {"s": {1, 2}})
    assert json.loads(target.read_text()) == [1]


def test_atomic_write_preserves_mode(tmp_path: Path) -> None:
    target = tmp_path / "m.txt"
    target.write_text("old")
    target.chmod(0o640)
    atomic_write_text(target, "new")
    assert target.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "fresh.txt"
    atomic_write_text(fresh, "x")
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~atomic._UMASK


# ----------------------------------------------------------------------------- run store


def test_create_and_open(tmp_path: Path) -> None:
    info = make_info(agent_config={"pop": 4}, models={"mutator": "openai/gpt-4o"}, command=["bench", "run"])
    with RunStore.create(tmp_path, info) as store:
        assert store.run_dir == tmp_path / "run-1"
        assert (store.run_dir / "run.json").is_file()
        store.write_info(info.model_copy(update={"status": "finished", "best_score": 2.0}))
    with RunStore.open(tmp_path / "run-1") as again:
        assert again.info.status == "finished"
        assert again.info.best_score == 2.0
        assert again.info.models == {"mutator": "openai/gpt-4o"}
        with pytest.raises(ValueError, match="does not match"):
            again.write_info(make_info("other"))


def test_create_refuses_existing_dir(tmp_path: Path) -> None:
    RunStore.create(tmp_path, make_info()).close()
    with pytest.raises(RunStoreError, match="already exists"):
        RunStore.create(tmp_path, make_info())


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden"])
def test_create_rejects_unsafe_run_id(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        RunStore.create(tmp_path, make_info(bad))


def test_open_missing_or_corrupt_run_json(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match="not a directory"):
        RunStore.open(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunStoreError, match="run.json is missing"):
        RunStore.open(tmp_path / "empty", readonly=True)
    RunStore.create(tmp_path, make_info()).close()
    (tmp_path / "run-1" / "run.json").write_text("{not json")
    with pytest.raises(RunStoreError, match="corrupt"):
        RunStore.open(tmp_path / "run-1")
    # the failed open must not keep the lock
    (tmp_path / "run-1" / "run.json").write_text(make_info().model_dump_json())
    RunStore.open(tmp_path / "run-1").close()


def test_journal_append_rows_dedup_and_parquet(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, make_info()) as store:
        for i in range(3):
            store.append(make_row(i, score=float(i)))
        store.append(make_row(1, score=10.0))  # supersedes seq 1
        store.append(make_row(4, score=None, reason="boom"))
        rows = store.rows()
        assert [r.seq for r in rows] == [0, 1, 2, 4]
        assert rows[1].score == 10.0
        assert rows[3].status is Status.ERROR
        assert store.flush_parquet() == 4
        df = pd.read_parquet(store.parquet_path)
        assert list(df.columns) == candidates_schema().names
        assert df["seq"].tolist() == [0, 1, 2, 4]
        assert df["status"].tolist() == ["ok", "ok", "ok", "error"]
        assert pd.isna(df["score"].iloc[3])
        assert rows_from_table(pq.read_table(store.parquet_path)) == rows
        with pytest.raises(ValueError, match="appended to run"):
            store.append(make_row(5, run_id="other"))


def test_empty_parquet_is_typed(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, make_info()) as store:
        assert store.read_parquet().empty
        assert store.flush_parquet() == 0
        df = store.read_parquet()
        assert df.empty and list(df.columns) == candidates_schema().names
        assert pq.read_schema(store.parquet_path).field("score").type == "double"


def test_torn_journal_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, make_info()) as store:
        store.append(make_row(0))
        store.append(make_row(1))
        store.flush_parquet()
        journal = store.journal_path
    full = make_row(2).model_dump_json().encode()
    with open(journal, "ab") as f:
        f.write(full[: len(full) // 2])  # killed mid-write
    reader = RunStore.open(tmp_path / "run-1", readonly=True)
    assert [r.seq for r in reader.rows()] == [0, 1]
    assert len(reader.read_parquet()) == 2
    with RunStore.open(tmp_path / "run-1") as store:  # writable open cuts the torn tail
        store.append(make_row(2))
        assert [r.seq for r in store.rows()] == [0, 1, 2]
    assert journal.read_bytes().count(b"\n") == 3


def test_garbage_last_line_ignored_but_middle_corruption_raises(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, make_info()) as store:
        store.append(make_row(0))
        journal = store.journal_path
    with open(journal, "ab") as f:
        f.write(b"\x00\x00\x00\n")
    assert [r.seq for r in RunStore.open(tmp_path / "run-1", readonly=True).rows()] == [0]
    with open(journal, "ab") as f:
        f.write(make_row(1).model_dump_json().encode() + b"\n")
    with pytest.raises(RunStoreError, match="corrupt journal line 2"):
        RunStore.open(tmp_path / "run-1", readonly=True).rows()


def test_sigkilled_writer_leaves_readable_journal_and_parquet(tmp_path: Path) -> None:
    RunStore.create(tmp_path, make_info()).close()
    code = (  # append forever, flushing the parquet every 5 rows; say "ready" after 21 rows
        "import sys, itertools; from pathlib import Path; from harness.results.store import RunStore\n"
        "from test_results_store import make_row\n"
        "s = RunStore.open(Path(sys.argv[1]))\n"
        "for i in itertools.count():\n"
        "    s.append(make_row(i, score=float(i)))\n"
        "    _ = i % 5 or s.flush_parquet()\n"
        "    _ = i != 20 or print('ready', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "run-1")], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        proc.kill()  # SIGKILL: no cleanup, possibly mid-append or mid-flush
        proc.wait()
    with RunStore.open(tmp_path / "run-1") as store:  # lock released by the kernel
        rows = store.rows()
        assert len(rows) >= 21
        assert [r.seq for r in rows] == list(range(len(rows)))
        snapshot = store.read_parquet()
        assert 1 <= len(snapshot) <= len(rows)
        assert snapshot["seq"].tolist() == list(range(len(snapshot)))
        store.append(make_row(len(rows)))
        assert len(store.rows()) == len(rows) + 1
    # a kill mid-flush may leave a hidden ".candidates.parquet.*.tmp"; never a partial parquet
    pq.read_table(tmp_path / "run-1" / "candidates.parquet")


def test_readonly_store_refuses_writes(tmp_path: Path) -> None:
    RunStore.create(tmp_path, make_info()).close()
    ro = RunStore.open(tmp_path / "run-1", readonly=True)
    assert ro.readonly
    with pytest.raises(RunStoreError, match="read-only"):
        ro.append(make_row(0))
    with pytest.raises(RunStoreError, match="read-only"):
        ro.put_program("x")
    with pytest.raises(RunStoreError, match="read-only"):
        ro.save_checkpoint("a.json", {})
    assert ro.load_checkpoint("a.json") is None
    assert not (tmp_path / "run-1" / "checkpoints").exists()


def test_content_addressed_programs(tmp_path: Path) -> None:
    src = "def f():\n    return 1\n"
    with RunStore.create(tmp_path, make_info()) as store:
        sha = store.put_program(src, ext="py")
        assert sha == program_sha256(src)
        path = store.run_dir / "programs" / sha[:2] / f"{sha}.py"
        assert path.read_text() == src
        mtime = path.stat().st_mtime_ns
        assert store.put_program(src, ext="py") == sha
        assert path.stat().st_mtime_ns == mtime  # not rewritten
        assert store.get_program(sha) == src
        other = store.put_program("int main() {}", ext=".cpp")
        assert store.program_path(other).suffix == ".cpp"
        assert store.put_program("plain") == program_sha256("plain")
        assert store.program_path(program_sha256("plain")).suffix == ".txt"
        with pytest.raises(KeyError):
            store.get_program("0" * 64)
        with pytest.raises(ValueError):
            store.get_program("../../etc/passwd")
        with pytest.raises(ValueError):
            store.put_program(src, ext="p/y")
        path.write_text("tampered")
        with pytest.raises(RunStoreError, match="content address"):
            store.get_program(sha)


def test_lock_contention_in_process(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, make_info())
    with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
        RunStore.open(tmp_path / "run-1")
    RunStore.open(tmp_path / "run-1", readonly=True).rows()  # readers never block
    store.close()
    store.close()  # idempotent
    RunStore.open(tmp_path / "run-1").close()


def test_lock_contention_across_processes(tmp_path: Path) -> None:
    RunStore.create(tmp_path, make_info()).close()
    code = (
        "import sys, time; from pathlib import Path; from harness.results.store import RunStore\n"
        "s = RunStore.open(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "run-1")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"pid {proc.pid}"):
            RunStore.open(tmp_path / "run-1")
    finally:
        proc.kill()
        proc.wait()
    RunStore.open(tmp_path / "run-1").close()  # the kernel released the dead holder's lock


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    state = {"population": [{"sha": "a", "score": 1.5}], "rng": [1, 2, 3], "iteration": 7}
    with RunStore.create(tmp_path, make_info()) as store:
        assert store.load_checkpoint("agent.json") is None
        path = store.save_checkpoint("agent.json", state)
        assert path == store.checkpoint_path("agent.json")
        assert path.parent == store.run_dir / "checkpoints"
        assert store.load_checkpoint("agent.json") == state
        store.save_checkpoint("agent.json", {"iteration": 8})
        assert store.load_checkpoint("agent.json") == {"iteration": 8}
        for bad in ("../x", "a/b", ".."):
            with pytest.raises(ValueError):
                store.checkpoint_path(bad)
        path.write_text("{trunc")
        with pytest.raises(RunStoreError, match="corrupt"):
            store.load_checkpoint("agent.json")


def test_candidate_row_from_result() -> None:
    durations = PhaseDurations(setup=0.1, candidate=0.2, score=0.3, total=0.7)
    env: dict[str, Any] = dict(env_id="eplb-tiny", env_version="1.0.0", env_hash="h", backend="docker")
    scored: dict[str, Any] = dict(status=Status.OK, score=3.5, metrics={"b": 2.0, "a": 1.0}, attempts=2)
    res = EvalResult(**scored, durations=durations, program_sha256="s" * 64, **env)
    spend: dict[str, Any] = dict(tokens_in=10, tokens_out=5, cost_usd=0.01)
    where: dict[str, Any] = dict(run_id="r", seq=3, iteration=1, thread=2, parent_id=None)
    row = CandidateRow.from_result(res, **where, started_at="t0", finished_at="t1", **spend)
    assert row.metrics == {"a": 1.0, "b": 2.0}
    timings = (row.duration_setup, row.duration_candidate, row.duration_score, row.duration_total)
    assert timings == (0.1, 0.2, 0.3, 0.7)
    assert (row.backend, row.attempts, row.score, row.status) == ("docker", 2, 3.5, Status.OK)
    assert (row.tokens_in, row.tokens_out, row.cost_usd, row.program_sha256) == (10, 5, 0.01, "s" * 64)
    assert CandidateRow.model_validate_json(row.model_dump_json()) == row
    assert row.cases == [] and row.cases_json == "[]"


def test_candidate_row_keeps_per_case_records_through_parquet(tmp_path: Path) -> None:
    cases = [
        CaseRecord(name="c0", status="ok", score=7.0, cpu_seconds=1.96, wall_seconds=9.8),
        CaseRecord(name="c1", status="runtime_error", score=0.0, cpu_seconds=0.01, reason="killed by SIGFPE"),
        CaseRecord(name="c2", status="tle", score=0.0, cpu_seconds=float("nan")),  # unmeasured -> None
    ]
    env: dict[str, Any] = dict(env_id="eplb-tiny", env_version="1.0.0", env_hash="h")
    res = EvalResult(status=Status.OK, score=2.3, cases=cases, program_sha256="s" * 64, **env)
    assert res.cases[2].cpu_seconds is None and res.cases[2].wall_seconds is None
    where: dict[str, Any] = dict(run_id="run-1", seq=0, iteration=0, thread=0, parent_id=None)
    row = CandidateRow.from_result(res, **where, started_at=T0, finished_at=T0)
    assert row.cases == res.cases
    with RunStore.create(tmp_path / "run-1", make_info()) as store:
        store.append(row)
        store.flush_parquet()
        back = list(store.read_parquet()["cases"].iloc[0])
    assert [c["status"] for c in back] == ["ok", "runtime_error", "tle"]
    assert back[1]["reason"] == "killed by SIGFPE" and back[0]["cpu_seconds"] == 1.96


def test_provenance() -> None:
    versions = package_versions(("numpy", "pydantic", "definitely-not-installed-pkg"))
    assert set(versions) == {"numpy", "pydantic"}
    assert all(versions.values())
    assert set(host_info()) >= {"host", "python", "platform"}


def test_git_state(tmp_path: Path) -> None:
    assert git_state(tmp_path) == (None, None)
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    repo.mkdir()
    (repo / "f.txt").write_text("1")
    for args in (["init", "-q"], ["add", "f.txt"], ["commit", "-qm", "x"]):
        subprocess.run([*git, *args], check=True)
    commit, dirty = git_state(repo)
    assert commit is not None and len(commit) == 40 and dirty is False
    (repo / "untracked.txt").write_text("u")
    assert git_state(repo)[1] is False
    (repo / "f.txt").write_text("2")
    assert git_state(repo) == (commit, True)
