from __future__ import annotations

import math
import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.envs.manifest import Direction, Progress
from harness.evaluation.result import Status
from harness.results.leaderboard import (
    LEADERBOARD_COLUMNS,
    SUMMARY_COLUMNS,
    append_leaderboard_row,
    build_leaderboard_row,
    leaderboard_path,
    load_leaderboard,
    summarize,
)
from harness.results.records import CandidateRow, LeaderboardRow, RunInfo
from harness.results.summary import read_records, summarize_records


def lb_row(
    run_id: str,
    agent: str = "evo",
    seed: int = 0,
    best: float | None = 1.0,
    progress: float = 0.5,
    variant: str = "eplb-tiny",
    direction: Direction = Direction.MAXIMIZE,
    family: str = "eplb",
    **kw: object,
) -> LeaderboardRow:
    base: dict[str, object] = dict(
        run_id=run_id,
        family=family,
        variant=variant,
        env_version="1.0.0",
        env_hash="h",
        agent=agent,
        seed=seed,
        best_score=best,
        progress=progress if best is not None else 0.0,
        direction=direction,
        finished_at="2025-01-01T00:00:00+00:00",
    )
    base.update(kw)
    return LeaderboardRow.model_validate(base)


def test_load_absent_gives_typed_empty_frame(tmp_path: Path) -> None:
    df = load_leaderboard(tmp_path, "eplb")
    assert df.empty
    assert list(df.columns) == list(LEADERBOARD_COLUMNS)
    summary = summarize(df)
    assert summary.empty and list(summary.columns) == list(SUMMARY_COLUMNS)


def test_append_and_replace_is_idempotent(tmp_path: Path) -> None:
    path = append_leaderboard_row(tmp_path, lb_row("r1", best=1.0))
    assert path == tmp_path / "eplb.parquet"
    append_leaderboard_row(tmp_path, lb_row("r2", best=2.0))
    append_leaderboard_row(tmp_path, lb_row("r3", best=None, n_infra_error=2))
    df = load_leaderboard(tmp_path, "eplb")
    assert df["run_id"].tolist() == ["r1", "r2", "r3"]
    assert list(df.columns) == list(LEADERBOARD_COLUMNS)
    assert pd.isna(df["best_score"].iloc[2])
    assert df["direction"].tolist() == ["maximize"] * 3

    before = path.read_bytes()
    append_leaderboard_row(tmp_path, lb_row("r2", best=2.0))
    assert path.read_bytes() == before  # same row again: nothing changes

    append_leaderboard_row(tmp_path, lb_row("r1", best=5.0, cost_usd=1.25))
    df = load_leaderboard(tmp_path, "eplb")
    assert df["run_id"].tolist() == ["r1", "r2", "r3"]  # replaced in place
    assert df["best_score"].iloc[0] == 5.0
    assert df["cost_usd"].iloc[0] == 1.25
    assert (tmp_path / "eplb.parquet.lock").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eplb.parquet", "eplb.parquet.lock"]


def test_families_are_separate_files(tmp_path: Path) -> None:
    append_leaderboard_row(tmp_path, lb_row("a", family="eplb"))
    append_leaderboard_row(tmp_path, lb_row("b", family="tsp", variant="tsp-tiny"))
    assert load_leaderboard(tmp_path, "eplb")["run_id"].tolist() == ["a"]
    assert load_leaderboard(tmp_path, "tsp")["run_id"].tolist() == ["b"]
    with pytest.raises(ValueError):
        leaderboard_path(tmp_path, "../evil")


def _append_many(directory: str, start: int) -> None:
    for i in range(start, start + 10):
        append_leaderboard_row(Path(directory), lb_row(f"r{i}", seed=i))


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), k * 10)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    df = load_leaderboard(tmp_path, "eplb")
    assert sorted(df["run_id"]) == sorted(f"r{i}" for i in range(30))


def test_summarize_hand_computed(tmp_path: Path) -> None:
    rows = [
        lb_row("a1", agent="A", seed=0, best=1.0, progress=0.1, cost_usd=0.5, n_infra_error=1),
        lb_row("a2", agent="A", seed=1, best=2.0, progress=0.2, cost_usd=0.25),
        lb_row("a3", agent="A", seed=2, best=6.0, progress=0.6),
        lb_row("a4", agent="A", seed=2, best=None, n_infra_error=3),  # failed run, repeated seed
        lb_row("b1", agent="B", seed=0, best=4.0, progress=0.4),
        lb_row("c1", variant="eplb-large", agent="A", seed=0, best=7.0, progress=0.7),
    ]
    for r in rows:
        append_leaderboard_row(tmp_path, r)
    s = summarize(load_leaderboard(tmp_path, "eplb"))
    assert list(s.columns) == list(SUMMARY_COLUMNS)
    assert list(zip(s["variant"], s["agent"], strict=True)) == [
        ("eplb-large", "A"),
        ("eplb-tiny", "B"),  # higher mean progress first within a variant
        ("eplb-tiny", "A"),
    ]
    a = s[(s["variant"] == "eplb-tiny") & (s["agent"] == "A")].iloc[0]
    # one run per (identity, seed): a4 (appended last, same finish time) replaces a3 for seed 2
    assert a["runs"] == 3 and a["older_duplicates"] == 1 and a["scored"] == 2 and a["seeds"] == 3
    assert a["best"] == 2.0 and a["identity"].startswith("A@")
    # scores 1, 2: mean 1.5, sample var 0.5, SEM sqrt(0.5 / 2) = 0.5
    assert a["score_mean"] == pytest.approx(1.5)
    assert a["score_sem"] == pytest.approx(0.5)
    # progress 0.1, 0.2 and 0 for the failed run: mean 0.1, sample var 0.02 / 2, SEM sqrt(0.01 / 3)
    assert a["progress_mean"] == pytest.approx(0.1)
    assert a["progress_sem"] == pytest.approx(math.sqrt(0.01 / 3))
    assert a["n_infra_error"] == 4  # a1's 1 + a4's 3 (a3, ignored, had none)
    assert a["cost_usd"] == pytest.approx(0.75)
    b = s[s["agent"] == "B"].iloc[0]
    assert b["runs"] == 1 and b["score_mean"] == 4.0 and math.isnan(b["score_sem"])
    assert math.isnan(b["progress_sem"])

    only = summarize(load_leaderboard(tmp_path, "eplb"), variant="eplb-large")
    assert only["variant"].tolist() == ["eplb-large"] and only["best"].iloc[0] == 7.0
    # bench leaderboard's path: the same summary from pyarrow records, no frame
    light = summarize_records(read_records(tmp_path, "eplb"))
    assert pd.DataFrame(light, columns=list(SUMMARY_COLUMNS)).equals(s)


def test_summarize_minimize_picks_smaller_best() -> None:
    rows = [
        lb_row("m1", seed=0, best=30.0, progress=0.2, direction=Direction.MINIMIZE),
        lb_row("m2", seed=1, best=10.0, progress=0.8, direction=Direction.MINIMIZE),
        lb_row("m3", seed=2, best=20.0, progress=0.5, direction=Direction.MINIMIZE),
    ]
    df = pd.DataFrame([r.model_dump(mode="json") for r in rows])
    s = summarize(df)
    assert s["best"].iloc[0] == 10.0
    assert s["direction"].iloc[0] == "minimize"
    assert s["score_mean"].iloc[0] == pytest.approx(20.0)
    assert s["score_sem"].iloc[0] == pytest.approx(10.0 / math.sqrt(3))


def test_summarize_all_failed_and_mixed_direction() -> None:
    df = pd.DataFrame([lb_row("f1", best=None).model_dump(mode="json")])
    s = summarize(df)
    assert s["runs"].iloc[0] == 1 and s["scored"].iloc[0] == 0
    assert math.isnan(s["best"].iloc[0]) and math.isnan(s["score_mean"].iloc[0])
    assert s["progress_mean"].iloc[0] == 0.0
    mixed = pd.DataFrame(
        [
            lb_row("x", agent="A").model_dump(mode="json"),
            lb_row("y", agent="B", direction=Direction.MINIMIZE).model_dump(mode="json"),
        ]
    )
    with pytest.raises(ValueError, match="mixed directions"):
        summarize(mixed)


def _cand(
    seq: int, status: Status, score: float | None, cost: float = 0.0, env: str = "eplb-tiny"
) -> CandidateRow:
    return CandidateRow(
        run_id="r",
        seq=seq,
        iteration=seq,
        program_sha256=f"{seq:064x}",
        status=status,
        score=score,
        cost_usd=cost,
        started_at="t",
        finished_at="t",
        env_id=env,
        env_hash="h",
    )


@pytest.mark.parametrize(
    ("direction", "y_init", "y_target", "best", "progress"),
    # u = (y - floor) / (target - floor), floor a quarter span below y_init: (8 + 2.5) / 12.5
    [(Direction.MAXIMIZE, 0.0, 10.0, 8.0, 0.84), (Direction.MINIMIZE, 10.0, 0.0, 2.0, 0.84)],
)
def test_build_leaderboard_row(
    direction: Direction, y_init: float, y_target: float, best: float, progress: float
) -> None:
    info = RunInfo(
        run_id="r",
        env_id="eplb-tiny",
        family="eplb",
        variant="eplb-tiny",
        env_version="1.0.0",
        env_hash="h",
        agent="evo",
        seed=3,
        models={"mutator": "m"},
        budget={"max_evaluations": 5},
        ended_at="2025-01-02T00:00:00+00:00",
    )
    variant = SimpleNamespace(
        id="eplb-tiny", hash="h", direction=direction, progress=Progress(y_init=y_init, y_target=y_target)
    )
    rows = [
        _cand(0, Status.OK, 2.0, cost=0.1),
        _cand(1, Status.OK, 8.0, cost=0.2),
        _cand(2, Status.INFRA_ERROR, None),
        _cand(3, Status.TIMEOUT, None),
        _cand(4, Status.OK, 5.0),
    ]
    # a later tie of the best, and a better score on a validation subset (never the run's best)
    rows += [
        _cand(5, Status.OK, best),
        _cand(6, Status.OK, 99.0 if best > 5 else -99.0, env="eplb-tiny~quick"),
    ]
    paths = {f"{i:064x}": f"programs/00/{i:064x}.py" for i in range(7)}
    row = build_leaderboard_row(info, rows, variant, program_paths=paths)
    assert row.best_score == best
    best_seq = 1 if direction is Direction.MAXIMIZE else 0  # the earliest of the tied best
    assert row.best_program_sha == f"{best_seq:064x}" and row.best_program_path == paths[f"{best_seq:064x}"]
    assert build_leaderboard_row(info, rows, variant).best_program_path is None  # paths unknown
    assert row.progress == pytest.approx(progress)
    assert (row.n_evaluations, row.n_ok, row.n_infra_error) == (7, 5, 1)
    assert row.cost_usd == pytest.approx(0.3)
    assert row.finished_at == info.ended_at and row.models_json == '{"mutator": "m"}'
    assert row.budget_json == '{"max_evaluations": 5}'  # part of the run identity
    assert row.label is None
    assert build_leaderboard_row(info.model_copy(update={"label": "mine"}), rows, variant).label == "mine"
    failed = build_leaderboard_row(info, rows[2:4], variant)
    assert failed.best_score is None and failed.progress == 0.0 and failed.best_program_sha is None
    with pytest.raises(ValueError, match="not eplb-tiny@other"):
        build_leaderboard_row(info, rows, SimpleNamespace(**{**vars(variant), "hash": "other"}))


def test_append_times_out_when_lock_is_held(tmp_path: Path) -> None:
    from harness.results.atomic import LockHeldError, lock_file, unlock_file

    fd = lock_file(tmp_path / "eplb.parquet.lock", stamp="pid 4242")
    try:
        with pytest.raises(LockHeldError, match="pid 4242") as info:
            append_leaderboard_row(tmp_path, lb_row("r1"), lock_timeout=0.1)
        assert isinstance(info.value, TimeoutError)
    finally:
        unlock_file(fd)
    assert not (tmp_path / "eplb.parquet").exists()
    append_leaderboard_row(tmp_path, lb_row("r1"))
    assert load_leaderboard(tmp_path, "eplb")["run_id"].tolist() == ["r1"]
