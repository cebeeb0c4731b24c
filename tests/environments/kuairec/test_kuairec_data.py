"""KuaiRec data recipe: 5-core fixed point, id remapping, time order, split, archive loading."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from environments.kuairec.data import (
    ChecksumError,
    DataMissingError,
    k_core,
    load_kuairec,
    sequences_from_rows,
    split,
    synthetic_sequences,
)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 9)), min_size=0, max_size=300))
def test_k_core_is_the_largest_fixed_point(rows: list[tuple[int, int]]) -> None:
    users = np.array([r[0] for r in rows], dtype=np.int64)
    items = np.array([r[1] for r in rows], dtype=np.int64)
    keep = k_core(users, items, 5)
    for arr in (users[keep], items[keep]):
        if arr.size:
            assert np.bincount(arr).max() >= 5 and (np.bincount(arr)[np.unique(arr)] >= 5).all()
    # Brute force: repeatedly drop rows of users/items below 5 (same fixed point).
    alive = np.ones(len(rows), dtype=bool)
    changed = True
    while changed:
        changed = False
        for arr in (users, items):
            counts = np.bincount(arr[alive], minlength=arr.max() + 1 if arr.size else 0)
            drop = alive & (counts[arr] < 5) if arr.size else alive
            if drop.any():
                alive &= ~drop
                changed = True
    assert (keep == alive).all()


def test_remap_sorted_and_time_ordered() -> None:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(6) * 10, 8)
    items = np.tile(np.array([100, 7, 55, 3000, 42, 9, 600, 12]), 6)
    ts = rng.permutation(48).astype(float) + 1e9
    seqs = sequences_from_rows(users, items, ts)
    assert seqs.num_users == 6 and seqs.num_items == 8
    for u in range(6):
        it, t = seqs.user(u)
        assert (np.diff(t) >= 0).all()
        orig = np.sort(np.unique(items))[it - 1]  # id k <-> k-th smallest original id
        rows = np.flatnonzero(users == u * 10)
        assert list(orig) == list(items[rows][np.argsort(ts[rows], kind="stable")])
    assert seqs.times.min() == 0


def test_split_leaves_two_out() -> None:
    seqs = synthetic_sequences(
        users=20, items=30, factors=4, min_len=5, max_len=9, drift=0.5, temperature=0.5, seed=1
    )
    s = split(seqs)
    for u in range(seqs.num_users):
        full, _ = seqs.user(u)
        assert list(s.train.user(u)[0]) == list(full[:-2])
        assert list(s.test_history.user(u)[0]) == list(full[:-1])
        assert s.val_target[u] == full[-2] and s.test_target[u] == full[-1]


def _archive(tmp: Path) -> tuple[Path, str]:
    rng = np.random.default_rng(3)
    n = 400
    csv = "user_id,video_id,play_duration,video_duration,time,date,timestamp,watch_ratio\n" + "".join(
        f"{u},{i},1,2,x,20200705,{t},0.5\n"
        for u, i, t in zip(
            rng.integers(0, 15, n), rng.integers(0, 25, n), rng.uniform(1.59e9, 1.6e9, n), strict=True
        )
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("KuaiRec 2.0/data/big_matrix.csv", csv)
    path = tmp / "KuaiRec.zip"
    path.write_bytes(buf.getvalue())
    return path, hashlib.sha256(buf.getvalue()).hexdigest()


def test_load_from_archive_caches_and_checks(tmp_path: Path) -> None:
    path, digest = _archive(tmp_path)
    a = load_kuairec(tmp_path, path.name, digest)
    assert list(tmp_path.glob("sequences-*.npz")), "preprocessed arrays are cached"
    b = load_kuairec(tmp_path, path.name, "")
    assert (a.items == b.items).all() and (a.offsets == b.offsets).all()
    assert np.diff(a.offsets).min() >= 5
    with pytest.raises(ChecksumError):
        load_kuairec(tmp_path, path.name, "0" * 64)
    with pytest.raises(DataMissingError, match="bench data fetch kuairec"):
        load_kuairec(tmp_path / "nowhere", path.name, digest)
