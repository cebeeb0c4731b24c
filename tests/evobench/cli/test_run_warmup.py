"""``bench run`` starts its first sandbox worker before its plan is built, and hands it to the run
only if the plan asks for exactly those workers (else it is stopped); nothing starts where the
command line cannot tell which workers the run will use."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from evobench.cli.run_plan import RunArgs, plan_run
from evobench.cli.run_warmup import adopt, start_early
from harness.sandbox.local import LocalBackend


def _children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


@pytest.mark.parametrize(
    "env, backend, resume",
    [
        ("selftest-tiny", "local", Path("results/some-run")),  # a resumed run keeps its recorded workers
        ("selftest-tiny", "docker", None),
        ("no-such-env", "local", None),
        ("kernelbench-gelu", "local", None),  # GPU workers follow the plan's GPU memory split
        ("selftest-tiny~subset-0-1", "local", None),  # refused by the plan
        (None, "local", None),
    ],
)
def test_nothing_starts_where_the_command_line_cannot_tell(
    env: str | None, backend: str, resume: Path | None
) -> None:
    before = _children()
    assert start_early(env, backend, 0, "warm", resume) is None  # type: ignore[arg-type]
    assert _children() == before


def test_one_worker_starts_at_once_and_goes_to_a_matching_run(tmp_path: Path) -> None:
    before = _children()
    early = start_early("selftest-tiny", "local", 2, "warm", None)
    try:
        assert isinstance(early, LocalBackend) and (early.workers, early.prewarm) == (2, ("selftest-tiny",))
        # spawned now, before any evaluation was asked for; one only (the second would compete
        # with the run's own start on two cores)
        assert len(_children() - before) == 1
        args = RunArgs(agent="random-search", env="selftest-tiny", workers=2, results_dir=tmp_path / "r")
        assert adopt(early, plan_run(args)) is early
        other = plan_run(RunArgs(agent="random-search", env="selftest-tiny", workers=1))
        assert adopt(early, other) is None  # another worker count: stopped, the run starts its own
        deadline = time.monotonic() + 30
        while _children() - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _children() - before
        with pytest.raises(RuntimeError, match="closed"):
            early.start()
    finally:
        if early is not None:
            early.terminate()
