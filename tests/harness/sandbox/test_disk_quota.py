"""``CandidateRuntime.run``: the disk quota of every writable location, and fresh working directories.

Real sandboxed processes (bubblewrap, the local backend's isolation): a command writes past the
quota in each location and the result names the ``disk`` limit; commands run with ``fresh_cwd``
plant files in every place they can write, and a later command finds none of them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.manifest import Hardware, Language
from harness.sandbox.isolation import UNPRIVILEGED_UID_BASE, detect_isolation
from harness.sandbox.runtime import SandboxedCandidate

HW = Hardware(cpus=1.0, memory_mb=1024, pids=32, file_mb=64, disk_mb=16)
UID = UNPRIVILEGED_UID_BASE + 16 * 10 + 5
PLANTS = ("planted", "/tmp/planted", "/dev/shm/planted")

pytestmark = pytest.mark.skipif(
    detect_isolation().level != "bwrap", reason="needs bubblewrap (the local sandbox's isolation)"
)


@pytest.fixture
def cand() -> Iterator[SandboxedCandidate]:
    c = SandboxedCandidate(
        "",
        language=Language.CPP,
        filename="main.cpp",
        hw=HW,
        deadline=time.monotonic() + 120,
        uid=UID,
        zygote=None,
    )
    yield c
    c.close()


def sh(c: SandboxedCandidate, script: str, **kw: object) -> tuple[int | None, str, str]:
    res = c.run(["sh", "-c", script], timeout=30, **kw)  # type: ignore[arg-type]
    return res.returncode, res.stdout.decode(), res.limit


@pytest.mark.parametrize("where", [".", "/tmp", "/dev/shm"])
def test_writing_past_the_quota_fails_and_is_named(cand: SandboxedCandidate, where: str) -> None:
    # 64 MiB in 4 MiB files (under file_mb) against a 16 MiB quota.
    script = f"for i in $(seq 16); do head -c 4194304 /dev/zero > {where}/f$i || exit 3; done"
    rc, _, limit = sh(cand, script)
    assert rc == 3 and limit == "disk", (rc, limit)
    # Positive control: under the quota, the same writes succeed.
    rc, _, limit = sh(cand, f"rm -f {where}/f*; head -c 4194304 /dev/zero > {where}/ok && echo fine")
    assert (rc, limit) == (0, ""), (rc, limit)


def test_workdir_quota_holds_on_the_host(cand: SandboxedCandidate) -> None:
    rc, _, limit = sh(cand, "head -c 67108864 /dev/zero > big; exit 0")
    assert limit == "disk"
    assert (cand.workdir / "big").stat().st_size <= HW.disk_mb << 20


def test_fresh_cwd_sees_nothing_of_earlier_commands(cand: SandboxedCandidate) -> None:
    (cand.workdir / "main").write_text("#!/bin/sh\necho original\n")
    os.chmod(cand.workdir / "main", 0o755)
    plant = "; ".join(f"echo x > {p} && echo wrote {p}" for p in PLANTS)
    tamper = "echo 'echo tampered' >> main && echo wrote main; rm -f main && echo removed main"
    rc, out, _ = sh(cand, f"{plant}; {tamper}; ls -A; true", fresh_cwd=("main",))
    # Positive control: every place was writable, the binary was not.
    assert all(f"wrote {p}" in out for p in PLANTS), out
    assert "wrote main" not in out and "removed main" not in out, out
    rc, out, _ = sh(cand, "ls -A; ls -A /tmp /dev/shm; ./main", fresh_cwd=("main",))
    assert rc == 0 and "planted" not in out, out
    assert out.split() == ["main", "/dev/shm:", "/tmp:", "original"], out
    assert sorted(p.name for p in cand.workdir.iterdir()) == ["main"], "the workdir changed"
    # Control: without fresh_cwd the work directory does carry files from one command to the next.
    sh(cand, "echo x > planted")
    _, out, _ = sh(cand, "ls -A")
    assert "planted" in out


def test_fresh_cwd_refuses_links_and_paths(cand: SandboxedCandidate, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host file")
    os.symlink(secret, cand.workdir / "link")
    for name in ("link", "../x", "missing"):
        with pytest.raises(ValueError):
            cand.run(["true"], timeout=10, fresh_cwd=(name,))
