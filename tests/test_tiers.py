"""The fast tier's guard: a test that starts a sandbox, a run or a container there fails and names its marker.

A probe module (written to a scratch dir) hides what it starts from the automatic markers in
``tests/conftest.py``, so only the runtime guard can catch it; its tests run in a child pytest with
``EVOBENCH_TEST_TIER=fast`` and the suite's conftest loaded as a plugin.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAST = "not sandbox and not run and not docker and not slow and not gpu and not modal"

# Names are assembled at run time so that the static rules cannot see them (that is the point).
PROBE = """
import importlib
import subprocess
import sys

import pytest


def _attr(module, *parts):
    return getattr(importlib.import_module(module), "".join(parts))


def test_hidden_backend_start():
    from harness.envs.registry import default_registry

    backend = _attr("harness.sandbox.local", "Local", "Backend")(workers=1)
    # The product turns the refusal into an infra_error result; the guard still fails the test.
    backend.evaluate(default_registry().get("selftest-bandit-8"), "def solve(): return 0")
    backend.close()


def test_hidden_agent_run():
    go = _attr("harness.runner.runner", "dr", "ive")
    go(None, variant=None, agent=None, backend=None, leaderboard_dir=None)


def test_hidden_cli_run():
    subprocess.run([sys.executable, "-m", "harness.cli.main", "r" + "un", "--help"], check=False)


def test_hidden_container():
    subprocess.run(["docker", "r" + "un", "--rm", "hello-world"], check=False)


def test_plain_subprocess_is_allowed():
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).stdout == b"1\\n"


def test_marked_by_its_fixture({FIXTURE}):
    raise AssertionError("deselected in the fast tier: never runs")
"""


def test_fast_tier_refuses_unmarked_sandboxes_runs_and_containers(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE.replace("{FIXTURE}", "local_" + "warm_backend"))
    # The repo first: tests/harness (no __init__) must not shadow the real harness package.
    path = f"{REPO}{os.pathsep}{REPO / 'tests'}"
    env = {**os.environ, "EVOBENCH_TEST_TIER": "fast", "PYTHONPATH": path, "COLUMNS": "400"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
         "-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), "-m", FAST, "-rf", "test_probe.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    text = out.stdout + out.stderr
    assert re.search(r"4 failed, 1 passed, 1 deselected", text), text[-3000:]
    for test, marker in [
        ("test_hidden_backend_start", "sandbox"),
        ("test_hidden_agent_run", "run"),
        ("test_hidden_cli_run", "run"),
        ("test_hidden_container", "docker"),
    ]:
        line = next((ln for ln in text.splitlines() if ln.startswith("FAILED") and test in ln), "")
        assert f"@pytest.mark.{marker}" in line, text[-3000:]
