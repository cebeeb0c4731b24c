"""The exchange directory refuses what a hostile sandboxed process can plant."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest

from harness.evaluation.errors import CandidateError
from harness.scoring.exchange import ExchangeDir


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.fixture
def ex(tmp_path: Path):  # type: ignore[no-untyped-def]
    e = ExchangeDir(tmp_path, "t")
    yield e
    e.close()


def test_round_trip_and_checks(ex: ExchangeDir, tmp_path: Path) -> None:
    d = tmp_path / ex.name
    (d / "a.npy").write_bytes(_npy(np.ones((3, 2), dtype=np.float32)))
    assert ex.read_array("a.npy", "float32", (3, None), 10_000).shape == (3, 2)
    with pytest.raises(CandidateError, match="expected shape"):
        ex.read_array("a.npy", "float32", (4, None), 10_000)
    with pytest.raises(CandidateError, match="expected dtype float64"):
        ex.read_array("a.npy", "float64", (3, 2), 10_000)
    with pytest.raises(CandidateError, match="cap"):
        ex.read_array("a.npy", "float32", (3, 2), 10)
    (d / "obj.npy").write_bytes(_npy(np.array([{"x": 1}], dtype=object)))
    with pytest.raises(CandidateError, match="not allowed"):
        ex.read_array("obj.npy", "float32", (None,), 10_000)  # no pickle, ever
    with pytest.raises(CandidateError, match="did not leave"):
        ex.read_bytes("missing.npy", 100)


def test_symlink_fifo_and_swapped_directory_refused(ex: ExchangeDir, tmp_path: Path) -> None:
    d = tmp_path / ex.name
    secret = tmp_path / "secret.npy"
    secret.write_bytes(_npy(np.zeros(3, dtype=np.float32)))
    os.symlink(secret, d / "link.npy")
    with pytest.raises(CandidateError):
        ex.read_bytes("link.npy", 10_000)
    os.mkfifo(d / "fifo.npy")
    with pytest.raises(CandidateError, match="not a regular file"):
        ex.read_bytes("fifo.npy", 10_000)
    # The directory is swapped for a link elsewhere: reads still go to the original directory.
    (d / "mine.npy").write_bytes(b"original")
    os.rename(d, tmp_path / "moved")
    os.symlink(tmp_path, d)
    assert ex.read_bytes("mine.npy", 100) == b"original"
    with pytest.raises(CandidateError):
        ex.read_bytes("secret.npy", 10_000)


def test_write_new_never_follows_or_overwrites(ex: ExchangeDir, tmp_path: Path) -> None:
    d = tmp_path / ex.name
    target = tmp_path / "victim"
    target.write_text("keep")
    os.symlink(target, d / "planted")
    with pytest.raises(CandidateError, match="created by the candidate"):
        ex.write_new("planted", b"x")  # a pre-created name is the candidate's failure, never infra
    assert target.read_text() == "keep"
    ex.write_new("fresh", b"y")
    assert (d / "fresh").read_bytes() == b"y" and oct((d / "fresh").stat().st_mode & 0o777) == "0o644"


def test_copy_to_streams_and_refuses_planted_or_oversized(ex: ExchangeDir, tmp_path: Path) -> None:
    d = tmp_path / ex.name
    dest = ExchangeDir(tmp_path, "dest", writable=False)
    try:
        (d / "ckpt.pt").write_bytes(b"w" * 5000)
        ex.copy_to("ckpt.pt", dest, "checkpoint.pt", 10_000)
        assert (tmp_path / dest.name / "checkpoint.pt").read_bytes() == b"w" * 5000
        with pytest.raises(CandidateError, match="created by the candidate"):
            ex.copy_to("ckpt.pt", dest, "checkpoint.pt", 10_000)
        with pytest.raises(CandidateError, match="cap"):
            ex.copy_to("ckpt.pt", dest, "other.pt", 100)
        os.symlink(tmp_path / dest.name / "checkpoint.pt", d / "link.pt")
        with pytest.raises(CandidateError):
            ex.copy_to("link.pt", dest, "third.pt", 10_000)
    finally:
        dest.close()


def test_huge_declared_array_is_refused_before_reading(ex: ExchangeDir, tmp_path: Path) -> None:
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"
    blob = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 64
    (tmp_path / ex.name / "huge.npy").write_bytes(blob)
    with pytest.raises(CandidateError, match=r"huge\.npy: .*over the 4096-byte cap"):
        ex.read_array("huge.npy", "float32", (None,), 4096)
