"""Sync-back of a placed run's directory: a reader sees the old copy or the new one, never a mixture."""

from __future__ import annotations

import functools
import io
import json
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest

from harness.results import snapshot
from harness.results.records import RunInfo

RUN = "r1"


def _info(n: int) -> dict[str, object]:
    return RunInfo(
        run_id=RUN, env_id="selftest-tiny", family="selftest", variant="selftest-tiny",
        env_version="1", env_hash="h", agent="random-search", seed=0, n_evaluations=n,
    ).model_dump(mode="json")  # fmt: skip


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _copy(n: int) -> bytes:
    """A results directory whose run has ``n`` evaluations, consistent across its files."""
    return _tar({f"./{RUN}/run.json": json.dumps(_info(n)).encode(), f"./{RUN}/journal": f"{n}\n".encode()})


def _open_at(dir_fd: int, path: str, flags: int) -> int:
    return os.open(path, flags, dir_fd=dir_fd)


def _state(results: Path) -> tuple[int, str]:
    run = results / RUN
    return json.loads((run / "run.json").read_text())["n_evaluations"], (run / "journal").read_text()


@pytest.mark.parametrize("exchange", [True, False])
def test_install_swaps_whole_copies_and_leaves_no_staging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    results = tmp_path / "results"
    if not exchange:
        # The two-rename fallback with a slow second rename: the reader below must see its gap
        # (so the check on the exchange path can fail).
        monkeypatch.setattr(snapshot, "_exchange", lambda a, b: False)
        real_rename = os.rename

        def slow(src: str, dst: str) -> None:
            if Path(dst).name == RUN and Path(dst).parent == results:
                time.sleep(0.01)
            real_rename(src, dst)

        monkeypatch.setattr(snapshot.os, "rename", slow)
    assert snapshot.install(b"", results) is None  # nothing synced yet
    assert snapshot.install(_tar({"./.keep": b""}), results) is None  # the run has not started
    assert snapshot.install(_copy(1), results, {"placement.json": {"gpu": "H100"}}) == RUN
    seen: list[tuple[int, str]] = []
    stop = threading.Event()

    def reader() -> None:
        # As a reader that opens the run directory once (a path-based reader across a swap may
        # combine two whole copies, as it may combine two moments of a local run).
        while not stop.is_set():
            try:
                fd = os.open(results / RUN, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                seen.append((-1, "run directory missing"))
                continue
            try:
                at = functools.partial(_open_at, fd)
                with open("run.json", opener=at) as a, open("journal", opener=at) as b:
                    seen.append((json.loads(a.read())["n_evaluations"], b.read()))
            except FileNotFoundError:
                pass  # that copy was replaced and deleted meanwhile
            finally:
                os.close(fd)

    t = threading.Thread(target=reader)
    t.start()
    for n in range(2, 20):
        snapshot.install(_copy(n), results, {"placement.json": {"gpu": "H100"}})
    stop.set()
    t.join()
    if not exchange:
        assert (-1, "run directory missing") in seen
        return
    # Every read saw one whole copy (run.json and journal of the same sync, each complete), never none.
    assert seen and all(journal == f"{n}\n" for n, journal in seen), [s for s in seen if s[1] != f"{s[0]}\n"]
    assert _state(results) == (19, "19\n")
    assert json.loads((results / RUN / "placement.json").read_text()) == {"gpu": "H100"}
    assert [p.name for p in results.iterdir()] == [RUN]


def test_damaged_or_foreign_snapshot_keeps_the_local_copy(tmp_path: Path) -> None:
    results = tmp_path / "results"
    snapshot.install(_copy(3), results)
    bad = [
        _copy(4)[: len(_copy(4)) // 2],  # cut off in transit
        _tar({f"./{RUN}/journal": b"4\n"}),  # no run.json
        _tar({"./other/run.json": json.dumps(_info(4)).encode()}),  # run.json of another run
        _tar({"../escape/run.json": b"{}"}),  # leaves the folder
        _copy(4) and _tar({f"./{RUN}/run.json": b"{}", "./r2/run.json": b"{}"}),  # two runs
    ]
    for data in bad:
        with pytest.raises(snapshot.SnapshotError):
            snapshot.install(data, results)
        assert _state(results) == (3, "3\n")
    assert [p.name for p in results.iterdir()] == [RUN] and not (tmp_path / "escape").exists()


def test_killed_between_the_fallback_renames_is_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    snapshot.install(_copy(1), results)
    monkeypatch.setattr(snapshot, "_exchange", lambda a, b: False)  # a file system without RENAME_EXCHANGE
    real_rename, calls = os.rename, []

    def dies_after_first(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed after moving the old copy aside
        real_rename(src, dst)

    monkeypatch.setattr(snapshot.os, "rename", dies_after_first)
    with pytest.raises(KeyboardInterrupt):
        snapshot.install(_copy(2), results)
    monkeypatch.setattr(snapshot.os, "rename", real_rename)
    assert _state(results) == (1, "1\n")  # interrupted: the old copy was put back at once
    assert [p.name for p in results.iterdir()] == [RUN]
    # A hard kill at that moment skips the cleanup: the next sync or resume recovers it.
    aside = results / f"{snapshot.STAGING_PREFIX}dead" / "old"
    aside.mkdir(parents=True)
    os.rename(results / RUN, aside / RUN)
    snapshot.recover(results)
    assert _state(results) == (1, "1\n")  # the old copy is back, the staging folder gone
    assert [p.name for p in results.iterdir()] == [RUN]
    snapshot.install(_copy(2), results)  # the fallback path itself
    assert _state(results) == (2, "2\n")


def test_pack_round_trips_without_lock_and_placement(tmp_path: Path) -> None:
    run = tmp_path / "a" / RUN
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps(_info(5)))
    (run / ".lock").write_text("pid 1\n")
    (run / "placement.json").write_text("{}")
    out = tmp_path / "b"
    assert snapshot.install(snapshot.pack(run, leave_out=("placement.json",)), out) == RUN
    assert sorted(p.name for p in (out / RUN).iterdir()) == ["run.json"]
