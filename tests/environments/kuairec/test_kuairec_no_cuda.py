"""KuaiRec: a sandbox without CUDA is a clear error, never a silent CPU training (issue 21)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from environments.kuairec import scorer as kuairec_scorer

DRIVER = Path(kuairec_scorer.__file__).with_name("sandbox_driver.py")


@pytest.mark.parametrize("argv", [["train"], ["test", "1"]])
def test_driver_refuses_cuda_protocol_without_cuda(tmp_path: Path, argv: list[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: the refusal cannot be observed")
    shutil.copy(DRIVER, tmp_path / "sandbox_driver.py")
    (tmp_path / "params.json").write_text(json.dumps({"device": "cuda", "threads": 1, "seed": 0}))
    # A candidate that would train happily on CPU: it must never be imported.
    (tmp_path / "candidate.py").write_text("open(__file__ + '.ran', 'w').close()\n")
    res = subprocess.run(
        [sys.executable, "-I", "-B", str(tmp_path / "sandbox_driver.py"), *argv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == kuairec_scorer.NO_CUDA_EXIT, res.stderr[-2000:]
    assert "no CUDA GPU is usable in the sandbox" in res.stderr
    assert not (tmp_path / "candidate.py.ran").exists()


def test_scorer_reports_missing_cuda_as_a_clear_candidate_error() -> None:
    from types import SimpleNamespace

    from harness.evaluation.errors import CandidateError

    res = SimpleNamespace(
        stderr=b"no CUDA GPU is usable in the sandbox although the scorer runs on one\n",
        timed_out=False, returncode=kuairec_scorer.NO_CUDA_EXIT, limit=None, seconds=1.0,
    )  # fmt: skip
    candidate = SimpleNamespace(remaining=lambda: 60.0, run=lambda argv, timeout: res)
    run = kuairec_scorer.KuaiRecScorer._run
    # Never infra_error: the exit code comes from a process the candidate controls.
    with pytest.raises(CandidateError, match="bench doctor --gpu") as e:
        run(None, candidate, SimpleNamespace(name="ex"), ["train"], "training")  # type: ignore[arg-type]
    assert "no CUDA GPU is usable" in str(e.value)
