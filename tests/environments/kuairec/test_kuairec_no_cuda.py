"""KuaiRec: a sandbox without CUDA is a clear error, never a silent CPU training (issue 21)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from environments.kuairec import scorer as kuairec_scorer

DRIVER = kuairec_scorer.DRIVER_FILE


@pytest.mark.parametrize("argv", [["train"], ["test"]])
def test_driver_refuses_cuda_protocol_without_cuda(tmp_path: Path, argv: list[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: the refusal cannot be observed")
    shutil.copy(DRIVER, tmp_path / "sandbox_driver.py")
    # The protocol parameters arrive as the first stdin frame (8-byte little-endian length + JSON).
    params = json.dumps(
        {"device": "cuda", "threads": 1, "seed": 0, "data_shape": {"num_items": 4, "num_users": 2}}
    ).encode()
    # A candidate that would train happily on CPU: it must never be imported.
    (tmp_path / "candidate.py").write_text("open(__file__ + '.ran', 'w').close()\n")
    res = subprocess.run(
        [sys.executable, "-I", "-B", str(tmp_path / "sandbox_driver.py"), *argv, str(tmp_path / "out")],
        input=struct.pack("<Q", len(params)) + params, capture_output=True, timeout=120,
    )  # fmt: skip
    stderr = res.stderr.decode(errors="replace")
    assert res.returncode == kuairec_scorer.NO_CUDA_EXIT, stderr[-2000:]
    assert "no CUDA GPU is usable in the sandbox" in stderr
    assert not (tmp_path / "candidate.py.ran").exists()


def test_scorer_reports_missing_cuda_as_a_clear_candidate_error() -> None:
    from types import SimpleNamespace

    from harness.evaluation.errors import CandidateError

    res = SimpleNamespace(
        stderr=b"no CUDA GPU is usable in the sandbox although the scorer runs on one\n",
        timed_out=False, returncode=kuairec_scorer.NO_CUDA_EXIT, limit=None, seconds=1.0,
    )  # fmt: skip
    candidate = SimpleNamespace(remaining=lambda: 60.0, run=lambda argv, stdin, timeout: res)
    run = kuairec_scorer.KuaiRecScorer._run
    # Never infra_error: the exit code comes from a process the candidate controls.
    with pytest.raises(CandidateError, match="bench doctor --gpu") as e:
        run(SimpleNamespace(protocol={}), candidate, SimpleNamespace(name="ex"), ["train"], b"", "training")  # type: ignore[arg-type]
    assert "no CUDA GPU is usable" in str(e.value)
