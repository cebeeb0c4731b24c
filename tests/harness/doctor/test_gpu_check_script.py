"""``scripts/gpu-check.sh``: the one bounded run on a lent GPU machine, checked here without a GPU.

What must hold for that run to be worth its device time: the script parses, its no-GPU mode runs
the selected steps and writes the summary table and the log tarball (few files, as the device
tool returns at most 8), a step that hangs is killed at its cap while the run goes on and ends
within its budget, and the carried wheels install offline on a fresh Python 3.12.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "gpu-check.sh"
STEPS = [
    "setup",
    "facts",
    "imports",
    "sandbox-cold",
    "sandbox-warm",
    "trimul",
    "triton",
    "torch-compile",
    "load-inline",
    "doctor",
    "doctor-gpu",
    "pytest-gpu",
]


def _rows(summary: Path) -> dict[str, list[str]]:
    """Step name -> [status, seconds, key] from summary.md's table."""
    rows = {}
    for line in summary.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 5 and cells[0].isdigit():
            rows[cells[1]] = cells[2:]
    return rows


def _run(
    args: list[str], timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_script_parses() -> None:
    out = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_refuses_to_run_without_an_output_folder() -> None:
    out = _run([], timeout=30)
    assert out.returncode == 2 and "--out" in out.stderr


@pytest.mark.slow
def test_dry_run_writes_the_table_and_the_log_tarball(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    done = _run(
        ["--out", str(out_dir), "--dry-run", "--steps", "setup,facts", "--budget", "120"], timeout=150
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = _rows(out_dir / "summary.md")
    assert list(rows) == STEPS  # every step has a row, selected or not
    assert rows["setup"][0] == "ok", rows["setup"]
    assert rows["facts"][0] in ("no-gpu", "ok"), rows["facts"]  # ok only where a GPU is visible
    assert "isolation=" in rows["facts"][2]
    assert all(rows[s][0] == "skipped" for s in STEPS[2:])
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["gpu-check.log", "logs.tar.gz", "summary.md"]  # well under the tool's 8 files
    with tarfile.open(out_dir / "logs.tar.gz") as tar:
        names = tar.getnames()
    assert "logs/01-setup.log" in names and "logs/02-facts.log" in names
    assert "| facts |" in done.stdout  # the table is the output's last part


@pytest.mark.slow
def test_a_hanging_step_is_killed_at_its_cap_and_the_run_goes_on(tmp_path: Path) -> None:
    # An interpreter that never answers: every Python step hangs until its cap kills it.
    pidfile = tmp_path / "pid"
    hang = tmp_path / "python-that-hangs"
    hang.write_text(f"#!/bin/sh\necho $$ >>{pidfile}\nexec sleep 300\n")
    hang.chmod(0o755)
    out_dir = tmp_path / "out"
    t0 = time.monotonic()
    done = _run(
        [
            "--out",
            str(out_dir),
            "--dry-run",
            "--steps",
            "facts,imports",
            "--budget",
            "25",
            "--python",
            str(hang),
        ],
        timeout=120,
    )
    wall = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-2000:]
    assert wall < 25 + 15  # the budget, plus timeout's kill grace and the last tarball
    rows = _rows(out_dir / "summary.md")
    assert rows["facts"][0] == "TIMEOUT", rows["facts"]
    # The facts step used what the 25 s budget left; nothing was left for the next step.
    assert rows["imports"][0] in ("skipped", "TIMEOUT"), rows["imports"]
    pids = pidfile.read_text().split()
    assert pids  # the hanging interpreter did run
    for pid in pids:
        assert _gone(int(pid)), f"the hanging interpreter {pid} outlived its step"


def _gone(pid: int, wait: float = 10.0) -> bool:
    """Whether ``pid`` has exited (a zombie not yet reaped by init counts as exited)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.2)
    return False


def _python312() -> str | None:
    for cand in ("python3.12", str(Path.home() / ".pyenv" / "versions" / "3.12.1" / "bin" / "python3.12")):
        path = shutil.which(cand)
        if path and subprocess.run([path, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return path
    return None


@pytest.mark.slow
@pytest.mark.skipif(
    not (REPO / ".gpucheck" / "whl").is_dir(), reason="no .gpucheck/ (run the script's --fetch)"
)
@pytest.mark.skipif(_python312() is None, reason="no Python 3.12 with pip (the GPU machine's Python)")
def test_carried_wheels_install_offline_on_a_fresh_python312(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    py = _python312()
    assert py is not None
    done = _run(
        ["--out", str(out_dir), "--dry-run", "--steps", "setup", "--python", py],
        timeout=180,
        env={"PIP_NO_INDEX": "1"},
    )
    assert done.returncode == 0
    rows = _rows(out_dir / "summary.md")
    assert rows["setup"][0] == "ok", (out_dir / "gpu-check.log").read_text()[-2000:]
    assert "carried" in rows["setup"][2]
