"""The device every result was timed on is recorded and never pooled across (issue 32 item 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.compare.identity import devices, with_identity
from harness.compare.select import DeviceMixError, select_runs
from harness.envs.manifest import Direction, Progress
from harness.evaluation.result import EvalResult, Status
from harness.results.leaderboard import (
    append_leaderboard_row,
    build_leaderboard_row,
    load_leaderboard,
    summarize,
)
from harness.results.records import CandidateRow, LeaderboardRow, RunInfo, arrow_schema, parse_journal
from harness.results.store import RunStore
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer
from harness.scoring.device import DeviceChoice

SXM = "NVIDIA H100 80GB HBM3 (132 SMs)"
PCIE = "NVIDIA H100 PCIe (114 SMs)"


def _lb(run_id: str, seed: int, device: str | None, best: float = 1.0) -> LeaderboardRow:
    return LeaderboardRow(
        run_id=run_id, family="toy", variant="toy", env_version="1", env_hash="h", agent="evo", seed=seed,
        best_score=best, progress=best / 10, direction=Direction.MINIMIZE,
        finished_at=f"2026-01-0{seed + 1}T00:00:00+00:00", device=device,
    )  # fmt: skip


def _cand(seq: int, device: str, status: Status = Status.OK) -> CandidateRow:
    res = EvalResult(
        status=status, score=1.0 + seq if status is Status.OK else None, env_id="toy", env_version="1",
        env_hash="h", program_sha256=f"{seq:064x}", device=device,
    )  # fmt: skip
    return CandidateRow.from_result(
        res, run_id="r", seq=seq, iteration=seq, thread=0, parent_id=None,
        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00",
    )  # fmt: skip


class _Variant:
    id = "toy"
    hash = "h"
    direction = Direction.MINIMIZE
    progress = Progress(y_init=10.0, y_target=0.0)


def _info() -> RunInfo:
    return RunInfo(run_id="r", env_id="toy", family="toy", variant="toy", env_version="1", env_hash="h",
                   agent="evo", seed=0)  # fmt: skip


def test_the_scorers_device_reaches_the_row_and_the_leaderboard() -> None:
    class GpuScorer(Scorer):
        def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
            raise NotImplementedError

    s = GpuScorer.__new__(GpuScorer)
    assert s.device_label() == ""  # CPU-only families record nothing
    s.device = DeviceChoice("cuda", "NVIDIA H100 80GB HBM3", False, 0, 132, 85 * 10**9)  # type: ignore[attr-defined]
    assert s.device_label() == SXM
    rows = [_cand(0, SXM), _cand(1, ""), _cand(2, SXM, Status.INFRA_ERROR)]
    assert [r.device for r in rows] == [SXM, "", SXM]
    assert build_leaderboard_row(_info(), rows, _Variant()).device == SXM
    mixed = build_leaderboard_row(_info(), [*rows, _cand(3, PCIE)], _Variant())
    assert mixed.device == f"{SXM} + {PCIE}"  # one run on two devices cannot pool with either
    assert build_leaderboard_row(_info(), [_cand(0, "")], _Variant()).device is None


def test_files_written_before_the_device_column_stay_readable(tmp_path: Path) -> None:
    old_cands = pa.schema([f for f in arrow_schema(CandidateRow) if f.name != "device"])
    old_lb = pa.schema([f for f in arrow_schema(LeaderboardRow) if f.name != "device"])
    row = _cand(0, SXM).model_dump(mode="json")
    # an old journal line (no "device") and an old run directory's parquet
    line = json.dumps({k: v for k, v in row.items() if k != "device"}).encode() + b"\n"
    assert parse_journal(line)[0][0].device == ""
    run_dir = tmp_path / "results" / "r"
    with RunStore.create(tmp_path / "results", _info()) as store:
        pq.write_table(pa.Table.from_pylist([{k: row[k] for k in old_cands.names}], schema=old_cands),
                       store.parquet_path)  # fmt: skip
    frame = RunStore.open(run_dir, readonly=True).read_parquet()
    assert frame["device"].tolist() == [""]  # upgraded to the current schema: unrecorded
    # an old leaderboard: read, summarised, and appended to (the new row carries its device)
    lbs = tmp_path / "lb"
    lbs.mkdir()
    old = {k: v for k, v in _lb("a", 0, None).model_dump(mode="json").items() if k in old_lb.names}
    pq.write_table(pa.Table.from_pylist([old], schema=old_lb), lbs / "toy.parquet")
    assert devices(load_leaderboard(lbs, "toy")).tolist() == [""]
    append_leaderboard_row(lbs, _lb("b", 1, SXM))
    df = load_leaderboard(lbs, "toy")
    assert devices(df).tolist() == ["", SXM]
    assert summarize(df)["device"].tolist() == ["", SXM]  # split, never pooled


def test_compare_refuses_to_pool_devices_and_picks_one_when_asked() -> None:
    lb = with_identity(pd.DataFrame([
        _lb("a", 0, SXM).model_dump(mode="json"), _lb("b", 1, SXM).model_dump(mode="json"),
        _lb("c", 0, PCIE).model_dump(mode="json"),
    ]))  # fmt: skip
    units = {"evo": tuple(set(lb["identity"]))}
    with pytest.raises(DeviceMixError, match="timed on different devices") as e:
        select_runs(lb, "toy", "h", units, all_versions=False)
    assert SXM in str(e.value) and PCIE in str(e.value) and "--device" in str(e.value)
    with pytest.raises(DeviceMixError):  # --all-versions pools contents, never devices
        select_runs(lb, "toy", "h", units, all_versions=True)
    rows, notes = select_runs(lb, "toy", "h", units, all_versions=False, device=SXM)
    assert sorted(rows["run_id"]) == ["a", "b"] and f"toy: runs timed on {SXM}" in notes
    rows, _ = select_runs(lb, "toy", "h", units, all_versions=False, device=PCIE)
    assert rows["run_id"].tolist() == ["c"]
    # one device throughout: nothing to refuse; unrecorded rows differ from recorded ones
    assert len(select_runs(lb[lb["device"] == SXM], "toy", "h", units, all_versions=False)[0]) == 2
    cpu = lb.assign(device=["cpu", None, "cpu"])  # CPU timings name no CPU: one group with unrecorded
    assert len(select_runs(cpu, "toy", "h", units, all_versions=False)[0]) == 2  # one per seed, no refusal
    lb.loc[lb["run_id"] == "c", "device"] = None
    with pytest.raises(DeviceMixError, match="'not recorded' \\(1 runs\\)"):
        select_runs(lb, "toy", "h", units, all_versions=False)


def test_leaderboard_gives_each_device_its_own_row() -> None:
    df = pd.DataFrame([
        _lb("a", 0, SXM, 2.0).model_dump(mode="json"), _lb("b", 0, PCIE, 3.0).model_dump(mode="json"),
        _lb("c", 1, PCIE, 5.0).model_dump(mode="json"),
    ])  # fmt: skip
    s = summarize(df).set_index("device")
    assert s.loc[SXM, "runs"] == 1 and s.loc[SXM, "best"] == 2.0
    assert s.loc[PCIE, "runs"] == 2 and s.loc[PCIE, "score_mean"] == 4.0
    assert s.loc[SXM, "older_duplicates"] == s.loc[PCIE, "older_duplicates"] == 0  # same seed, other device
