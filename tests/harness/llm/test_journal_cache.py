"""The JSONL + Parquet record journal and the response cache."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.llm import CachedResponse, LLMCallRow, RecordJournal, ResponseCache, request_key


def row(n: int) -> LLMCallRow:
    return LLMCallRow(call_id=f"c{n}", started_at="t", role="advisor", model="m", tokens_in=n)


def test_torn_last_line_is_ignored_and_cut_on_reopen(tmp_path: Path) -> None:
    j = RecordJournal(tmp_path, "calls", LLMCallRow)
    for n in range(3):
        j.append(row(n))
    with open(tmp_path / "calls.jsonl", "ab") as f:
        f.write(b'{"call_id": "torn", "start')
    assert [r.call_id for r in j.rows()] == ["c0", "c1", "c2"]
    again = RecordJournal(tmp_path, "calls", LLMCallRow)
    again.append(row(3))
    assert [r.call_id for r in again.rows()] == ["c0", "c1", "c2", "c3"]
    assert again.flush() == 4
    df = pd.read_parquet(tmp_path / "calls.parquet")
    assert list(df["tokens_in"]) == [0, 1, 2, 3] and "cache_hit" in df.columns


def test_keyed_journal_keeps_the_last_record_per_key(tmp_path: Path) -> None:
    j = RecordJournal(tmp_path, "calls", LLMCallRow, key=lambda r: r.role)
    j.append(row(1))
    j.append(row(2).model_copy(update={"role": "implementer"}))
    j.append(row(3))
    assert [r.call_id for r in j.rows()] == ["c3", "c2"]
    assert len((tmp_path / "calls.jsonl").read_text().splitlines()) == 3
    assert j.flush() == 2


def test_in_memory_journal(tmp_path: Path) -> None:
    j = RecordJournal(None, "calls", LLMCallRow)
    j.append(row(1))
    assert j.flush() == 1 and [r.call_id for r in j.rows()] == ["c1"]
    assert not list(tmp_path.iterdir())


def test_cache_round_trip_and_keys(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    msgs = [{"role": "user", "content": "x"}]
    key = request_key("m", msgs, {"temperature": 1.0}, 3)
    assert key == request_key("m", msgs, {"temperature": 1.0}, 3)
    assert len({key, request_key("m", msgs, {"temperature": 0.5}, 3), request_key("m", msgs, {}, 4)}) == 3
    assert cache.get(key) is None
    cache.put(key, CachedResponse("text", 1, 2, "m"))
    assert cache.get(key) == CachedResponse("text", 1, 2, "m")
    (tmp_path / key[:2] / f"{key}.json").write_text("{broken")
    assert cache.get(key) is None
