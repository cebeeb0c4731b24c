"""KuaiRec's trusted side under hostile outputs: bounded decoding, blame, and trusted memory.

A fake runtime stands in for the sandbox: it writes what a (hostile) candidate process could leave
in the output directory the scorer names on the command line, so the scorer's own reading of those
bytes is measured in this process with ``tracemalloc`` (numpy reports its buffers to it).
"""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from environments.kuairec.scorer import KuaiRecScorer
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateError, CandidateInvalid
from harness.scoring.api import ExecResult

Writer = Callable[[Path, str, int], None]  # (out dir, phase, epochs)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


class FakeRuntime:
    """Plays the sandbox: ``run`` writes the files ``writer`` chooses into the named output dir."""

    def __init__(self, workdir: Path, writer: Writer, epochs: int) -> None:
        self.workdir, self.writer, self.epochs = workdir, writer, epochs
        self.source = "# not run"
        self.stdin_sizes: list[int] = []

    def remaining(self) -> float:
        return 60.0

    def run(self, argv: list[str], stdin: bytes = b"", **_: object) -> ExecResult:
        self.stdin_sizes.append(len(stdin))
        phase, out = argv[-2], argv[-1]
        self.writer(self.workdir / out, phase, self.epochs)
        return ExecResult(0, b"", b"", 0.01, 0.01)


@pytest.fixture(scope="module")
def scorer() -> KuaiRecScorer:
    v = default_registry().get("kuairec-tiny")
    s = KuaiRecScorer(v, Path("/nonexistent"))
    s.prepare()
    return s


def _honest(s: KuaiRecScorer) -> Writer:
    users, items = s.split.train.num_users, s.split.train.num_items + 1
    rng = np.random.default_rng(0)
    reps = rng.normal(size=(users, 16)).astype(np.float32)
    emb = rng.normal(size=(items, 16)).astype(np.float32)

    def write(out: Path, phase: str, epochs: int) -> None:
        if phase == "train":
            for e in range(1, epochs + 1):
                (out / f"val_reps_{e}.npy").write_bytes(_npy(reps))
                (out / f"items_{e}.npy").write_bytes(_npy(emb))
                (out / f"ckpt_{e}.pt").write_bytes(b"checkpoint bytes")
        else:
            for name, arr in (
                ("test_reps", reps),
                ("test_items", emb),
                ("val_reps", reps),
                ("val_items", emb),
            ):
                (out / f"{name}.npy").write_bytes(_npy(arr))

    return write


def _huge_header(out: Path, name: str) -> None:
    h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 16), }"
    (out / name).write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + b"\0" * 1024)


def _bomb(out: Path, name: str) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z, z.open("x.npy", "w", force_zip64=True) as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
    (out / name).write_bytes(buf.getvalue())


def _widest(s: KuaiRecScorer) -> Writer:
    """Valid outputs as wide as the caps allow: the largest reply the scorer accepts."""
    users, items = s.split.train.num_users, s.split.train.num_items + 1
    cols = s.max_rep_bytes // (4 * users)
    reps = np.random.default_rng(1).normal(size=(users, cols)).astype(np.float32)
    emb = np.random.default_rng(2).normal(size=(items, cols)).astype(np.float32)

    def write(out: Path, phase: str, epochs: int) -> None:
        names = [f"{k}_{e}" for e in range(1, epochs + 1) for k in ("val_reps", "items")]
        if phase != "train":
            names = ["test_reps", "test_items", "val_reps", "val_items"]
        for name in names:
            (out / f"{name}.npy").write_bytes(_npy(emb if "items" in name else reps))
        for e in range(1, epochs + 1):
            (out / f"ckpt_{e}.pt").write_bytes(b"checkpoint bytes")

    return write


def _hostile(s: KuaiRecScorer, how: Callable[[Path, str], None], phase: str, name: str) -> Writer:
    honest = _honest(s)

    def write(out: Path, ph: str, epochs: int) -> None:
        honest(out, ph, epochs)
        if ph == phase:
            how(out, name)

    return write


def _measure(s: KuaiRecScorer, tmp: Path, writer: Writer) -> tuple[int, BaseException | None]:
    tmp.mkdir()
    rt = FakeRuntime(tmp, writer, int(s.params["epochs"]))
    tracemalloc.start()
    err: BaseException | None = None
    try:
        s.score(rt)  # type: ignore[arg-type]
    except (CandidateError, CandidateInvalid) as e:
        err = e
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, err


CASES = {
    "huge-header-val": ("train", "val_reps_1.npy", _huge_header),
    "huge-header-test": ("test", "test_reps.npy", _huge_header),
    "bomb-items": ("train", "items_2.npy", _bomb),
    "bomb-test-items": ("test", "test_items.npy", _bomb),
    "truncated": ("train", "val_reps_2.npy", lambda out, n: (out / n).write_bytes(b"\x93NUMPY\x01\x00")),
    "fifo": ("test", "val_reps.npy", lambda out, n: (out / n).unlink() or __import__("os").mkfifo(out / n)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_outputs_are_the_candidates_and_bounded(
    scorer: KuaiRecScorer, tmp_path: Path, case: str
) -> None:
    honest_peak, err = _measure(scorer, tmp_path / "honest", _honest(scorer))
    assert err is None
    phase, name, how = CASES[case]
    peak, err = _measure(scorer, tmp_path / "hostile", _hostile(scorer, how, phase, name))
    assert isinstance(err, CandidateError), err
    assert name in str(err)
    assert peak <= 1.5 * honest_peak, (peak, honest_peak)


def test_widest_allowed_reply_stays_within_memory_bound(scorer: KuaiRecScorer, tmp_path: Path) -> None:
    honest_peak, _ = _measure(scorer, tmp_path / "honest", _honest(scorer))
    peak, err = _measure(scorer, tmp_path / "wide", _widest(scorer))
    assert err is None, err  # accepted: the bound holds for the worst *valid* reply too
    assert peak <= 1.5 * honest_peak, (peak, honest_peak)


def test_data_reach_the_sandbox_only_on_stdin(scorer: KuaiRecScorer, tmp_path: Path) -> None:
    rt = FakeRuntime(tmp_path, _honest(scorer), int(scorer.params["epochs"]))
    with pytest.raises(CandidateInvalid, match="rule 'protocol'"):  # honest fake: val reps random
        _mismatch = _hostile(
            scorer, lambda out, n: (out / n).write_bytes(_npy(-np.load(out / n))), "test", "val_reps.npy"
        )
        rt.writer = _mismatch
        scorer.score(rt)  # type: ignore[arg-type]
    files = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert not [f for f in files if f.endswith(".npz") or f == "params.json"], files
    assert rt.stdin_sizes[0] > len(scorer.train_npz) and rt.stdin_sizes[1] > len(scorer.test_npz)
