"""Helpers of the kill / resume tests: a run's process tree, and what it left on the host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.sandbox.lifetime import LEFTOVER_PREFIXES
from harness.sandbox.lifetime.owner import Owner, owner_alive, start_time
from harness.sandbox.lifetime.sweep import SHM_DIR, dead_semaphores
from harness.sandbox.limits.cgroups import PREFIX, detect_hierarchy

BENCH = [sys.executable, "-m", "evobench.cli.main"]


def run_cmd(env: str, n: int, workers: int = 2, agent: str = "random-search", seed: int = 3) -> list[str]:
    """``bench run`` of ``agent`` on ``env`` with an evaluation budget of ``n``."""
    return [
        *BENCH, "run", "--agent", agent, "--env", env, "--seed", str(seed), "--workers", str(workers),
        "--max-evaluations", str(n), "--no-progress",
    ]  # fmt: skip


def _ppids() -> dict[int, int]:
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
                out[int(name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return out


def descendants(root: int) -> list[Owner]:
    """Every live process below ``root`` (workers, resource tracker, sandboxes, candidates)."""
    ppids = _ppids()
    kids: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        kids.setdefault(ppid, []).append(pid)
    out: list[Owner] = []
    todo = list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        st = start_time(pid)
        if st is not None:
            out.append(Owner(pid, st))
        todo.extend(kids.get(pid, []))
    return out


def _running(o: Owner) -> bool:
    """Alive and not a zombie (a zombie holds no memory; its parent reaps it)."""
    if not owner_alive(o):
        return False
    try:
        return Path(f"/proc/{o.pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def rss_kib(procs: list[Owner]) -> int:
    """Resident memory of those processes still running, in KiB."""
    total = 0
    for o in procs:
        if not _running(o):
            continue
        try:
            for line in Path(f"/proc/{o.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


def survivors(procs: list[Owner], wait: float = 15.0) -> list[Owner]:
    """Those of ``procs`` still running after up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    left = [o for o in procs if _running(o)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [o for o in left if _running(o)]
    return left


@dataclass(frozen=True)
class Left:
    """What killed processes of one run left on the host."""

    processes: int
    """Processes of the run still running."""
    directories: int
    """Scratch / candidate directories owned by them."""
    cgroups: int
    """Candidate cgroups owned by them."""
    semaphores: int
    """``multiprocessing`` semaphores no process maps (new since ``sems_before``)."""

    @property
    def total(self) -> int:
        """Everything together."""
        return self.processes + self.directories + self.cgroups + self.semaphores


def semaphores_now() -> set[str]:
    """Names of the ``multiprocessing`` semaphores that exist now."""
    return {p.name for p in SHM_DIR.glob("sem.mp-*")}


def leftovers(procs: list[Owner], sems_before: set[str]) -> Left:
    """Count what ``procs`` (a run's processes, all meant to be dead) left behind."""
    pids = {o.pid for o in procs}
    dirs = 0
    for d in Path(tempfile.gettempdir()).iterdir():
        prefix = next((p for p in LEFTOVER_PREFIXES if d.name.startswith(p)), None)
        owner = Owner.parse(d.name[len(prefix) :]) if prefix else None
        dirs += owner is not None and owner.pid in pids
    groups = 0
    hier = detect_hierarchy([])
    for parent in [p for p in (hier.memory_parent, hier.pids_parent) if p] if hier else []:
        for d in parent.iterdir():
            if d.name.startswith(f"{PREFIX}.") and d.name.split(".")[1].isdigit():
                groups += int(d.name.split(".")[1]) in pids
    sems = sum(1 for p in dead_semaphores() if p.name not in sems_before)
    return Left(len([o for o in procs if _running(o)]), dirs, groups, sems)


def journal_rows(run_dir: Path) -> list[dict[str, object]]:
    """The journal's readable rows (a torn last line is skipped)."""
    out = []
    p = run_dir / "candidates.jsonl"
    for line in p.read_text().splitlines() if p.exists() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def wait_for_run(results: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 300) -> Path:
    """The (single) run directory under ``results`` once its journal has at least ``n`` rows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be killed"
        dirs = [d for d in results.iterdir() if d.is_dir()] if results.exists() else []
        if dirs and len(journal_rows(dirs[0])) >= n:
            return dirs[0]
        time.sleep(0.05)
    raise AssertionError("the run made no progress")


@dataclass(frozen=True)
class KillReport:
    """One kill of a soak run and what it left."""

    kind: str
    """``process`` (``kill -9`` of bench) or ``group`` (``kill -9`` of its process group)."""
    rows: int
    """Journal rows when it was killed."""
    left: Left
    """What was left once the kill had settled (before the resume's sweep)."""
    orphan_rss_kib: int
    """Resident memory of the run's processes still running then."""


@dataclass(frozen=True)
class SoakReport:
    """A run killed again and again, each time resumed, until it finished."""

    run_dir: Path
    """The run."""
    kills: list[KillReport]
    """Each kill, in order."""
    rows: int
    """Journal rows at the end."""
    distinct_seqs: int
    """Distinct evaluation numbers at the end (== rows: nothing evaluated twice)."""
    parquet_rows: int
    """Rows of the final Parquet snapshot."""
    leaderboard_rows: int
    """Rows of the run on its leaderboard."""
    final: Left
    """What all the run's processes together left at the end."""
    seconds: float
    """Wall time of the whole soak."""


def soak(
    root: Path, env: str, n: int, kinds: list[str], *, workers: int = 2, timeout: float = 600
) -> SoakReport:
    """Run ``n`` evaluations, killing the run once per entry of ``kinds`` and resuming each time.

    Kills are spread evenly over the journal (kill ``i`` once it holds ``(i+1) n / (k+1)`` rows).

    Raises:
        AssertionError: If a run fails, makes no progress, or ends before a kill.
    """
    import pandas as pd

    t0 = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    sems = semaphores_now()
    all_procs: list[Owner] = []
    kills: list[KillReport] = []
    run_dir: Path | None = None
    for i, kind in enumerate([*kinds, ""]):
        resume = [*BENCH, "run", "--resume", str(run_dir), "--no-progress"]
        cmd = run_cmd(env, n, workers) if run_dir is None else resume
        proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        if not kind:  # the last resume runs to the end
            _, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err.decode(errors="replace")
            break
        target = (i + 1) * n // (len(kinds) + 1)
        try:
            run_dir = wait_for_run(root / "results", target, proc, timeout)
            procs = descendants(proc.pid)
        finally:
            (os.kill if kind == "process" else os.killpg)(proc.pid, signal.SIGKILL)
            proc.wait()
        all_procs += procs
        running = survivors(procs)
        kills.append(KillReport(kind, len(journal_rows(run_dir)), leftovers(procs, sems), rss_kib(running)))
    assert run_dir is not None
    rows = journal_rows(run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    lb = pd.read_parquet(Path(info["leaderboard_dir"]) / f"{info['family']}.parquet")
    return SoakReport(
        run_dir,
        kills,
        len(rows),
        len({r["seq"] for r in rows}),
        len(pd.read_parquet(run_dir / "candidates.parquet")),
        int((lb["run_id"] == info["run_id"]).sum()),
        leftovers(all_procs, sems),
        time.monotonic() - t0,
    )
