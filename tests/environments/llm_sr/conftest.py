"""Shared fixtures of the LLM-SR tests: a data cache built from the real CSVs, a fake runtime."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.envs.data_import import import_data
from harness.evaluation.errors import CandidateError, CandidateTimeout
from harness.sandbox.launch import fill, project_root
from harness.scoring.api import CallResult, ExecResult

REPO = Path(__file__).resolve().parents[3]
SHARED_LLM_SR = REPO.parent / "shared" / "data" / "llm-sr"
_clock = time.perf_counter
_DRIVER = types.ModuleType("llm_sr_sandbox_driver")
exec(  # noqa: S102 - the family's own driver, as the sandbox loads it
    compile(
        (REPO / "environments" / "llm_sr" / "inside" / "driver.py").read_text(), "sandbox_driver.py", "exec"
    ),
    _DRIVER.__dict__,
)


def _real_data_dir() -> Path:
    if not SHARED_LLM_SR.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{SHARED_LLM_SR} is missing in CI")
        pytest.skip(f"{SHARED_LLM_SR} not present")
    return SHARED_LLM_SR


@pytest.fixture(scope="session")
def llm_sr_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding ``llm_sr/llm-sr/<problem>/<split>.csv``, installed from the shared data.

    Installed with ``bench data import``'s API, which checks every file against the sha256 pinned
    in the manifest (as ``bench data fetch`` and the scorer do), so a test cannot pass on
    unexpected files. Returns the root to use as ``EVOBENCH_DATA``.
    """
    src = _real_data_dir()
    root = tmp_path_factory.mktemp("llm-sr-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVOBENCH_DATA", str(root))
        report = import_data("llm-sr-osc1", src.parent)  # the public CSVs (the HDF5 source is gated)
    assert len(report.installed) == 12
    return root


@pytest.fixture(scope="session")
def llm_sr_family_dir(llm_sr_cache: Path) -> Path:
    """The family's cache directory (``<root>/llm_sr``), to pass to a scorer directly."""
    return llm_sr_cache / "llm_sr"


class FakeRuntime:
    """In-process stand-in for the sandbox: runs ``equation`` directly and ``run`` as a plain subprocess.

    ``calls`` records copies of the arguments of every ``call``; ``runs`` records every ``run``
    argv. Candidate exceptions become ``CandidateError`` with the real runtime's message format.
    """

    def __init__(self, source: str, workdir: Path) -> None:
        self._source = source
        self._workdir = workdir
        self.module = types.ModuleType("llm_sr_fake_candidate")
        exec(compile(source, "candidate.py", "exec"), self.module.__dict__)  # noqa: S102 - test programs
        self.calls: list[tuple[Any, ...]] = []
        self.runs: list[list[str]] = []
        self.run_results: list[ExecResult] = []
        self.ended_calls_before_run = False
        """Whether ``end_calls`` came before any ``run`` (the fit process gone before predicting)."""

    @property
    def source(self) -> str:
        return self._source

    @property
    def workdir(self) -> Path:
        return self._workdir

    def remaining(self) -> float:
        return 120.0

    def transport_seconds(self, *args: Any, repeats: int = 5) -> float:
        return 0.0

    def end_calls(self) -> None:
        self.ended_calls_before_run = not self.runs

    def call(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        copies = tuple(np.array(a) if isinstance(a, np.ndarray) else a for a in args)
        self.calls.append(copies)
        fn = getattr(self.module, function)
        t0 = _clock()
        try:
            value = fn(*(np.array(a) if isinstance(a, np.ndarray) else a for a in args))
        except Exception as e:  # noqa: BLE001 - mirror the runtime: any candidate exception
            raise CandidateError(f"{function} raised {type(e).__name__}: {e}") from None
        return CallResult(value=value, seconds=_clock() - t0)

    def call_driver(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        # The real driver's rule (positional, or a keyword-only params) on the in-process module.
        assert function == "equation"
        copies = tuple(np.array(a) if isinstance(a, np.ndarray) else a for a in args)
        self.calls.append(copies)
        t0 = _clock()
        try:
            value = _DRIVER.equation(
                self.module, *(np.array(a) if isinstance(a, np.ndarray) else a for a in args)
            )
        except Exception as e:  # noqa: BLE001 - mirror the runtime: any candidate exception
            raise CandidateError(f"{function} raised {type(e).__name__}: {e}") from None
        return CallResult(value=value, seconds=_clock() - t0)

    def run(
        self,
        argv: list[str],
        stdin: bytes = b"",
        *,
        timeout: float,
        cpu_seconds: float | None = None,
        memory_mb: int | None = None,
    ) -> ExecResult:
        self.runs.append(list(argv))
        cmd = fill(argv, sys.executable, str(project_root()))
        t0 = _clock()
        try:
            p = subprocess.run(cmd, input=stdin, cwd=self._workdir, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise CandidateTimeout(str(e)) from None
        res = ExecResult(p.returncode, p.stdout, p.stderr, _clock() - t0, 0.0)
        self.run_results.append(res)
        return res


@pytest.fixture
def fake_runtime(tmp_path: Path) -> Iterator[Any]:
    """A factory ``fake_runtime(source) -> FakeRuntime`` with a fresh work directory per runtime."""
    made = 0

    def make(source: str) -> FakeRuntime:
        nonlocal made
        made += 1
        workdir = tmp_path / f"work{made}"
        workdir.mkdir(mode=0o777)
        return FakeRuntime(source, workdir)

    yield make
