"""Damaged results are repaired, not blocking: ``bench repair`` and ``--resume`` rebuild from the journal."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evobench.cli.main import main
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status
from harness.results.leaderboard import load_leaderboard
from harness.results.records import CandidateRow, RunInfo
from harness.results.store import RunStore
from harness.runner.completion import complete


def _finished_run(root: Path, v: Variant, agent: str, seed: int, scores: list[float]) -> Path:
    """A finished run as ``bench run`` leaves it: journal, parquet snapshot, leaderboard row."""
    info = RunInfo(
        run_id=f"{agent}-{seed}", env_id=v.id, family=v.family, variant=v.id, env_version=v.version,
        env_hash=v.hash, agent=agent, seed=seed, budget={"max_evaluations": len(scores)},
        leaderboard_dir=str(root / "lb"),
    )  # fmt: skip
    store = RunStore.create(root / "results", info)
    rows = [
        CandidateRow(
            run_id=info.run_id,
            seq=i,
            iteration=i,
            status=Status.OK,
            score=s,
            env_id=v.id,
            env_hash=v.hash,
            program_sha256=f"{i:064x}",
            started_at=f"2026-01-01T00:00:{i:02d}+00:00",
            finished_at=f"2026-01-01T00:00:{i + 1:02d}+00:00",
        )  # fmt: skip
        for i, s in enumerate(scores)
    ]
    for r in rows:
        store.append(r)
    store.flush_parquet()
    complete(store, info.model_copy(update={"n_evaluations": len(rows)}), rows, v)
    store.close()
    return store.run_dir


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    v = default_registry().get("selftest-tiny")
    return {
        f"{a}-{s}": _finished_run(tmp_path, v, a, s, [0.1 * s + base, 0.5 + base])
        for a, base in (("A", 0.2), ("B", 0.0))
        for s in (0, 1)
    }


def _compare(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(
        ["compare", "--env", "selftest-tiny", "--agents", "A", "B", "--resamples", "200"]
        + ["--leaderboard-dir", str(root / "lb"), "--results-dir", str(root / "results")]
    )
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_damaged_snapshot_is_skipped_by_compare_and_rebuilt_by_repair(
    tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    parquet = runs["A-1"] / "candidates.parquet"
    original = pd.read_parquet(parquet)
    parquet.write_bytes(parquet.read_bytes()[:100])  # a copy cut short: no footer
    code, text = _compare(tmp_path, capsys)
    assert code == 0, text
    note = f"A-1 (Parquet magic bytes not found in footer; rebuild it: bench repair {runs['A-1']})"
    assert "".join(note.split()) in "".join(text.split())  # the console may wrap the note

    assert main(["repair", str(runs["A-1"])]) == 0
    out = capsys.readouterr().out
    assert "was damaged" in out and "(2 rows)" in out and "already in" in out
    pd.testing.assert_frame_equal(pd.read_parquet(parquet), original)
    code, text = _compare(tmp_path, capsys)
    assert code == 0 and "bench repair" not in text


def test_resume_of_a_finished_run_rebuilds_a_damaged_snapshot_and_a_lost_row(
    tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    d = runs["B-0"]
    original = pd.read_parquet(d / "candidates.parquet")
    (d / "candidates.parquet").write_bytes(b"garbage")
    lb = tmp_path / "lb"
    family = default_registry().get("selftest-tiny").family
    table = load_leaderboard(lb, family)
    table[table["run_id"] != "B-0"].to_parquet(lb / f"{family}.parquet")  # the row lost too
    assert main(["run", "--resume", str(d), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "damaged (unreadable: Parquet file size is 7 bytes" in out and "from the journal (2 rows)" in out
    assert "was added to" in out
    pd.testing.assert_frame_equal(pd.read_parquet(d / "candidates.parquet"), original)
    assert "B-0" in set(load_leaderboard(lb, family)["run_id"])


def test_repair_refuses_what_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repair", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error:") and "run.json" in err[0]
