"""A kill by the machine-wide OOM killer is told apart from the candidate's own memory limit (v2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sandbox.limits.cgroups import CandidateCgroup, Hierarchy


def _group(tmp_path: Path, version: int) -> CandidateCgroup:
    g = CandidateCgroup.__new__(CandidateCgroup)  # the counters only: no kernel cgroup needed
    g.hier = Hierarchy(version, tmp_path, None, memsw=False, pids=False)
    g.memory_dir = tmp_path
    return g


def _events(tmp_path: Path, oom: int, oom_kill: int) -> None:
    text = f"low 0\nhigh 0\nmax {oom}\noom {oom}\noom_kill {oom_kill}\noom_group_kill 0\n"
    (tmp_path / "memory.events").write_text(text)


@pytest.mark.parametrize(
    ("oom", "kills", "own", "host"),
    [(0, 0, 0, 0), (1, 1, 1, 0), (0, 1, 1, 1), (3, 2, 2, 0)],
)
def test_v2_kills_without_a_limit_hit_are_the_hosts(
    tmp_path: Path, oom: int, kills: int, own: int, host: int
) -> None:
    g = _group(tmp_path, 2)
    _events(tmp_path, 5, 7)  # a reused group: earlier candidates' counts are the baseline
    g.reset_oom_baseline()
    _events(tmp_path, 5 + oom, 7 + kills)
    assert (g.oom_kills(), g.host_oom_kills()) == (own, host)


def test_v1_cannot_tell_them_apart_so_charges_the_limit(tmp_path: Path) -> None:
    g = _group(tmp_path, 1)
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    g.reset_oom_baseline()
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert (g.oom_kills(), g.host_oom_kills()) == (1, 0)
