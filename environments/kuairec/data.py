"""Data recipe of the KuaiRec family: per-user item sequences, split leave-last-out.

Two sources, both yielding :class:`Sequences` (1-based item ids, 0 is padding):

* :func:`load_kuairec` reads KuaiRec 2.0's ``big_matrix.csv`` from the archive fetched by
  ``bench data fetch kuairec`` (or installed with ``bench data import``), and preprocesses it as
  the FuXi-Linear pipeline does: an iterative 5-core filter (users and items with at least 5
  interactions) to a fixed point, item ids remapped to 1..n in sorted original-id order, each
  user's interactions sorted by timestamp (ties keep file order). The result is cached beside the
  archive as ``.npz`` (written atomically) keyed by the archive's sha256.
* :func:`synthetic_sequences` generates the tiny CPU variant: latent-factor users and items with a
  first-order Markov drift, Poisson arrivals with daily periodicity, lengths 10..50.

Split (:func:`split`): leave-last-out. Training sees ``s[:-2]``; the validation target is
``s[-2]`` (input ``s[:-2]``), used only to pick the epoch; the test target is ``s[-1]`` (input
``s[:-1]``).
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.envs.data import ChecksumError, DataMissingError, sha256_file

FETCH_HINT = "Run `bench data fetch kuairec` (or `bench data import kuairec DIR`) first."
CSV_MEMBER = "big_matrix.csv"
MIN_INTERACTIONS = 5


@dataclass(frozen=True)
class Sequences:
    """Every user's interactions in time order, concatenated."""

    items: np.ndarray
    """[total] int64 item ids in 1..num_items."""
    times: np.ndarray
    """[total] int64 seconds since the data set's first interaction."""
    offsets: np.ndarray
    """[users + 1] int64: user u owns ``items[offsets[u]:offsets[u + 1]]``."""
    num_items: int
    """Size of the catalog."""

    @property
    def num_users(self) -> int:
        """Number of users."""
        return int(self.offsets.shape[0] - 1)

    def user(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """Items and times of user ``u``."""
        a, b = int(self.offsets[u]), int(self.offsets[u + 1])
        return self.items[a:b], self.times[a:b]


@dataclass(frozen=True)
class Split:
    """Histories and targets of one stage of the leave-last-out protocol."""

    train: Sequences
    """``s[:-2]`` of every user: all the training process ever sees."""
    val_target: np.ndarray
    """[users] ``s[-2]`` (trusted side only; input is ``train``)."""
    test_history: Sequences
    """``s[:-1]`` of every user (sent only to the final inference process)."""
    test_target: np.ndarray
    """[users] ``s[-1]`` (trusted side only)."""


def _drop_tail(seqs: Sequences, k: int) -> Sequences:
    lengths = np.diff(seqs.offsets) - k
    if (lengths < 1).any():
        raise ValueError(f"every user needs more than {k} interactions")
    keep = np.ones(seqs.items.shape[0], dtype=bool)
    for j in range(1, k + 1):
        keep[seqs.offsets[1:] - j] = False
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Sequences(seqs.items[keep], seqs.times[keep], offsets, seqs.num_items)


def split(seqs: Sequences) -> Split:
    """Leave-last-out with a validation target (see module docstring).

    Raises:
        ValueError: If a user has fewer than 3 interactions.
    """
    ends = seqs.offsets[1:]
    return Split(
        train=_drop_tail(seqs, 2),
        val_target=seqs.items[ends - 2].copy(),
        test_history=_drop_tail(seqs, 1),
        test_target=seqs.items[ends - 1].copy(),
    )


def k_core(users: np.ndarray, items: np.ndarray, k: int = MIN_INTERACTIONS) -> np.ndarray:
    """Boolean mask of the rows kept by the iterative k-core filter (users and items >= k rows)."""
    keep = np.ones(users.shape[0], dtype=bool)
    while True:
        u_ids, u_inv, u_cnt = np.unique(users[keep], return_inverse=True, return_counts=True)
        i_ids, i_inv, i_cnt = np.unique(items[keep], return_inverse=True, return_counts=True)
        ok = (u_cnt[u_inv] >= k) & (i_cnt[i_inv] >= k)
        if ok.all():
            return keep
        idx = np.flatnonzero(keep)
        keep[idx[~ok]] = False


def sequences_from_rows(users: np.ndarray, items: np.ndarray, timestamps: np.ndarray) -> Sequences:
    """5-core filter, remap ids (sorted original order), sort each user's rows by time (stable)."""
    keep = k_core(users, items)
    users, items, timestamps = users[keep], items[keep], timestamps[keep]
    item_ids, item_index = np.unique(items, return_inverse=True)
    _, user_index = np.unique(users, return_inverse=True)
    order = np.lexsort((np.arange(users.shape[0]), timestamps, user_index))
    counts = np.bincount(user_index, minlength=int(user_index.max()) + 1 if users.size else 0)
    t = timestamps[order]
    t0 = float(t.min()) if t.size else 0.0
    return Sequences(
        items=(item_index[order] + 1).astype(np.int64),
        times=np.floor(t - t0).astype(np.int64),
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        num_items=int(item_ids.shape[0]),
    )


def _save_npz(path: Path, seqs: Sequences) -> None:
    buf = io.BytesIO()
    np.savez(buf, items=seqs.items, times=seqs.times, offsets=seqs.offsets, num_items=seqs.num_items)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(buf.getvalue())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_kuairec(data_dir: Path, archive_name: str, expected_sha256: str) -> Sequences:
    """Preprocessed KuaiRec sequences (cached as ``.npz`` keyed by the archive's checksum).

    Raises:
        DataMissingError: If the archive has not been fetched.
        ChecksumError: If the archive does not match its recorded sha256.
        ValueError: If the archive holds no ``big_matrix.csv``.
    """
    archive = data_dir / archive_name
    if not archive.is_file():
        raise DataMissingError(f"{archive} is missing. {FETCH_HINT}")
    digest = sha256_file(archive)
    if expected_sha256 and digest != expected_sha256:
        raise ChecksumError(f"{archive}: sha256 {digest} != recorded {expected_sha256}; fetch it again")
    cache = data_dir / f"sequences-{digest[:16]}.npz"
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as z:
            return Sequences(z["items"], z["times"], z["offsets"], int(z["num_items"]))
    import pandas as pd

    with zipfile.ZipFile(archive) as zf:
        members = [n for n in zf.namelist() if n.endswith("/" + CSV_MEMBER) or n == CSV_MEMBER]
        if not members:
            raise ValueError(f"{archive} holds no {CSV_MEMBER}")
        with zf.open(members[0]) as f:
            df = pd.read_csv(f, usecols=["user_id", "video_id", "timestamp"])
    df = df.dropna()
    seqs = sequences_from_rows(
        df["user_id"].to_numpy(np.int64), df["video_id"].to_numpy(np.int64), df["timestamp"].to_numpy(float)
    )
    _save_npz(cache, seqs)
    return seqs


def synthetic_sequences(
    *,
    users: int,
    items: int,
    factors: int,
    min_len: int,
    max_len: int,
    drift: float,
    temperature: float,
    seed: int,
) -> Sequences:
    """Latent-factor preferences with a Markov drift and daily-periodic arrival times.

    Each user has a taste vector; each step picks the next item from a softmax over
    ``taste + drift * (embedding of the previous item)`` (so order matters), without repeating
    the previous item. Arrivals are exponential gaps whose rate follows a daily cycle.
    """
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(items, factors)) / np.sqrt(factors)
    popularity = rng.normal(scale=1.0, size=items)
    out_items, out_times, offsets = [], [], [0]
    for _ in range(users):
        taste = rng.normal(size=factors)
        n = int(rng.integers(min_len, max_len + 1))
        t = float(rng.uniform(0, 86400 * 3))
        prev = -1
        for _ in range(n):
            logits = emb @ taste + popularity
            if prev >= 0:
                logits = logits + drift * (emb @ emb[prev]) * np.sqrt(factors)
                logits[prev] = -np.inf
            p = np.exp((logits - logits.max()) / temperature)
            prev = int(rng.choice(items, p=p / p.sum()))
            out_items.append(prev + 1)
            rate = 1.0 / 1800.0 * (1.5 + np.sin(2 * np.pi * t / 86400.0))
            t += float(rng.exponential(1.0 / rate))
            out_times.append(int(t))
        offsets.append(len(out_items))
    return Sequences(
        items=np.asarray(out_items, dtype=np.int64),
        times=np.asarray(out_times, dtype=np.int64),
        offsets=np.asarray(offsets, dtype=np.int64),
        num_items=items,
    )


__all__ = ["ChecksumError", "DataMissingError", "Sequences", "Split", "load_kuairec", "split"]
