"""Results schema 2 of ``candidates.parquet``: typed, self-describing, and old (version 1) files still read.

The old file is written by the version-1 writer itself (``records_to_table(rows, CandidateRow)``
through ``atomic_write_parquet``: what ``RunStore.flush_parquet`` wrote before schema 2).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evobench.cli.main import main
from harness.compare.anytime import best_so_far, read_candidates
from harness.compare.identity import with_identity
from harness.envs.registry import default_registry
from harness.evaluation.result import CaseRecord, Status, program_sha256
from harness.report.cases import cases_section
from harness.results.atomic import atomic_write_parquet
from harness.results.candidates import (
    CANDIDATES_SCHEMA_VERSION,
    DESCRIPTION_KEY,
    SCHEMA_VERSION_KEY,
    TIMESTAMP,
    rows_from_table,
    schema_version,
)
from harness.results.leaderboard import build_leaderboard_row, load_leaderboard
from harness.results.records import CandidateRow, LeaderboardRow, RunInfo, arrow_schema, records_to_table
from harness.results.store import RunStore
from harness.runner.completion import ROW_FILE
from harness.runner.repair import repair_run, snapshot_damage

VARIANT = "selftest-tiny"


def _info(run_id: str, *, version: int = CANDIDATES_SCHEMA_VERSION) -> RunInfo:
    v = default_registry().get(VARIANT)
    return RunInfo(
        schema_version=version, run_id=run_id, env_id=v.id, family=v.family, variant=v.id,
        env_version=v.version, env_hash=v.hash, agent="evo", seed=7, agent_config={"k": 2},
        models={"mutator": "m"}, budget={"max_evaluations": 3},
    )  # fmt: skip


def _row(run_id: str, seq: int, sha: str, status: Status, score: float | None, **kw: Any) -> CandidateRow:
    times = {
        "started_at": f"2026-01-01T00:00:0{seq}.250000+00:00",
        "finished_at": f"2026-01-01T00:00:0{seq + 1}+00:00",
    }
    fields = {"env_id": VARIANT, "env_hash": "h", **times, **kw}
    return CandidateRow(
        run_id=run_id, seq=seq, iteration=seq, program_sha256=sha, status=status, score=score, **fields
    )


def _run(root: Path, run_id: str, *, old: bool) -> tuple[RunStore, list[CandidateRow]]:
    """A run of three evaluations (ok with metrics and cases, error, ok) with its programs stored."""
    info = _info(run_id, version=1 if old else CANDIDATES_SCHEMA_VERSION)
    store = RunStore.create(root, info)
    case = CaseRecord(name="c0", status="tle", score=0.0, cpu_seconds=1.5, reason="killed at 2 s")
    specs: list[tuple[Status, float | None, dict[str, float], list[CaseRecord]]] = [
        (Status.OK, 1.0, {"answer": 42.0}, [case]),
        (Status.ERROR, None, {}, []),
        (Status.OK, 3.0, {}, []),
    ]
    rows = []
    for seq, (status, score, metrics, cases) in enumerate(specs):
        sha = store.put_program(f"def probe():\n    return {{'answer': {seq}}}\n", ext="py")
        cases_json = json.dumps([c.model_dump(mode="json") for c in cases])
        reason = "" if score else "ValueError: boom"
        kw = {"metrics_json": json.dumps(metrics), "cases_json": cases_json, "env_hash": info.env_hash}
        rows.append(_row(run_id, seq, sha, status, score, reason=reason, **kw))
        store.append(rows[-1])
    if old:  # the version-1 writer, exactly as flush_parquet called it
        atomic_write_parquet(store.parquet_path, records_to_table(store.rows(), CandidateRow))
    else:
        store.flush_parquet()
    return store, rows


def test_a_snapshot_is_typed_and_describes_itself(tmp_path: Path) -> None:
    store, rows = _run(tmp_path, "new", old=False)
    schema = pq.read_schema(store.parquet_path)
    assert schema_version(schema) == CANDIDATES_SCHEMA_VERSION == 2
    assert schema.metadata[SCHEMA_VERSION_KEY] == b"2"
    assert all(f.metadata and f.metadata[DESCRIPTION_KEY].strip() for f in schema)
    assert schema.field("started_at").type == TIMESTAMP and schema.field("seed").type == pa.int64()
    assert schema.field("metrics").type == pa.struct([pa.field("answer", pa.float64())])
    assert schema.field("cases").type.value_type.field("cpu_seconds").type == pa.float64()
    got = pq.read_table(store.parquet_path).to_pylist()
    lb = build_leaderboard_row(store.info, rows, default_registry().get(VARIANT))
    identity = with_identity(pa.Table.from_pylist([lb.model_dump(mode="json")]).to_pandas())["identity"][0]
    assert {(r["run_id"], r["identity"], r["agent"], r["variant"], r["seed"]) for r in got} == {
        ("new", identity, "evo", VARIANT, 7)
    }
    assert got[0]["metrics"] == {"answer": 42.0} and got[1]["metrics"] is None
    assert got[0]["cases"][0]["reason"] == "killed at 2 s" and got[1]["cases"] == []
    assert got[0]["started_at"] == datetime(2026, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)
    assert got[2]["program_path"] == f"programs/{rows[2].program_sha256[:2]}/{rows[2].program_sha256}.py"
    assert (store.run_dir / got[2]["program_path"]).read_text() == "def probe():\n    return {'answer': 2}\n"
    assert rows_from_table(pq.read_table(store.parquet_path)) == rows  # nothing lost against the journal
    store.close()


def test_an_old_snapshot_reads_everywhere_and_repair_migrates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, rows = _run(tmp_path, "old", old=True)
    new, _ = _run(tmp_path, "new", old=False)
    assert schema_version(pq.read_schema(old.parquet_path)) == 1
    assert pq.read_schema(old.parquet_path).field("started_at").type == pa.string()
    # the store's reader (report) upgrades in memory: the same frame as a version-2 file's
    frame, typed = old.read_parquet(), new.read_parquet()
    assert list(frame.columns) == list(typed.columns)
    assert frame.drop(columns=["run_id"]).equals(typed.drop(columns=["run_id"]))
    verdicts = "<th>tle</th></tr></thead><tbody><tr><td>c0</td><td class='num'>1</td>"
    assert verdicts in cases_section(frame, maximize=True)
    # compare / plot read both versions in one scan (times: strings cast, timestamps as they are)
    table = read_candidates({"old": old.parquet_path, "new": new.parquet_path}, with_times=True)
    curves = best_so_far(table, maximize=True)
    by_run = {r: g for r, g in curves.groupby("run_id", observed=True)}
    for g in by_run.values():
        assert g["best"].tolist() == [1.0, 1.0, 3.0] and g["wall_s"].tolist() == [0.75, 1.75, 2.75]
    # repair rewrites it in the current schema, from the journal; run.json follows
    assert snapshot_damage(old) is None
    done = repair_run(old, None, only_if_damaged=True)
    assert done.old_version == 1 and done.rows == 3
    assert schema_version(pq.read_schema(old.parquet_path)) == 2
    assert rows_from_table(pq.read_table(old.parquet_path)) == rows
    assert json.loads((old.run_dir / "run.json").read_text())["schema_version"] == 2
    assert repair_run(old, None, only_if_damaged=True).rows is None  # now current: left alone
    old.close()
    new.close()
    # and `bench repair` says what it did
    again, _ = _run(tmp_path, "again", old=True)
    again.close()
    assert main(["repair", str(again.run_dir)]) == 0
    assert "was in results schema version 1" in " ".join(capsys.readouterr().out.split())
    assert schema_version(pq.read_schema(again.parquet_path)) == 2


def test_a_snapshot_of_a_newer_schema_is_refused_with_advice(tmp_path: Path) -> None:
    store, _ = _run(tmp_path, "new", old=False)
    table = pq.read_table(store.parquet_path)
    pq.write_table(table.replace_schema_metadata({SCHEMA_VERSION_KEY: b"3"}), store.parquet_path)
    with pytest.raises(ValueError, match="version 3.*update evobench"):
        store.read_parquet()
    store.close()


def test_rows_without_any_metric_still_write(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, _info("bare"))
    sha = store.put_program("x = 1\n", ext="py")
    assert sha == program_sha256("x = 1\n")
    store.append(_row("bare", 0, sha, Status.TIMEOUT, None, reason="killed"))
    assert store.flush_parquet() == 1
    schema = pq.read_schema(store.parquet_path)
    assert schema.field("metrics").type == pa.null()  # Parquet cannot hold a struct without fields
    assert store.read_parquet()["metrics"].isna().all()
    store.close()


def test_repair_names_the_best_program_on_an_old_leaderboard_row(tmp_path: Path) -> None:
    store, rows = _run(tmp_path / "results", "old", old=True)
    lbs = tmp_path / "lb"
    info = store.info.model_copy(
        update={"status": "finished", "leaderboard": "added", "leaderboard_dir": str(lbs)}
    )
    store.write_info(info)
    # the row as results schema 1 wrote it: queued in the run directory and on the leaderboard
    row = build_leaderboard_row(info, rows, default_registry().get(VARIANT)).model_dump(mode="json")
    old = {k: v for k, v in row.items() if not k.startswith("best_program")}
    (store.run_dir / ROW_FILE).write_text(json.dumps(old))
    old_schema = pa.schema([f for f in arrow_schema(LeaderboardRow) if not f.name.startswith("best_program")])
    lbs.mkdir()
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), lbs / "selftest.parquet")
    assert load_leaderboard(lbs, "selftest")["best_program_sha"].isna().all()  # old rows read as null
    assert repair_run(store, None).row_added
    store.close()
    lb = load_leaderboard(lbs, "selftest")
    assert len(lb) == 1 and lb["best_program_sha"].tolist() == [rows[2].program_sha256]  # score 3.0
    path = lb["best_program_path"].iloc[0]
    assert program_sha256((store.run_dir / path).read_text()) == rows[2].program_sha256
    new = pq.read_table(lbs / "selftest.parquet").to_pylist()[0]
    assert {k: v for k, v in new.items() if k in old} == old  # nothing else changed
