"""``bench doctor``: real probes of this machine, JSON and text output, and its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evobench.cli.commands_doctor import doctor
from harness.sandbox.limits import detect_memory_mechanism

BENCH = [sys.executable, "-m", "evobench.cli.main", "doctor"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BENCH, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


@pytest.mark.slow
def test_json_reports_every_check_and_a_working_sandbox(tmp_path: Path) -> None:
    r = run("--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    checks = {c["name"]: c for c in out["checks"]}
    assert set(checks) == {"isolation", "memory", "torch", "docker", "modal", "data", "smoke"}
    assert out["ok"] is True
    assert checks["smoke"]["level"] == "ok" and checks["smoke"]["data"]["status"] == "ok"
    # The same findings the harness acts on, never an address-space limit.
    assert checks["memory"]["data"]["mechanism"] == detect_memory_mechanism().kind
    assert checks["memory"]["data"]["address_space_limited"] is False
    import torch

    assert checks["torch"]["data"]["version"] == torch.__version__
    assert checks["torch"]["data"]["cuda_build"] == torch.version.cuda
    assert checks["data"]["data"]["families"]["selftest"].startswith("generated")
    assert isinstance(checks["docker"]["data"]["reachable"], bool)


def test_text_names_the_memory_fallback_and_why() -> None:
    r = run("--skip", "smoke", "--skip", "torch", "--skip", "docker", env={"EVOBENCH_MEMORY_LIMIT": "rlimit"})
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if " memory " in ln)
    assert "rlimit-data" in line and line.strip().startswith("warn")
    assert "EVOBENCH_MEMORY_LIMIT=rlimit" in r.stdout


def test_exit_nonzero_when_evaluations_cannot_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    code = doctor(json_out=True, skip=("isolation", "memory", "docker", "modal", "data", "smoke"))
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["ok"] is False
    (torch_check,) = out["checks"]
    assert torch_check["level"] == "fail" and "cannot be imported" in torch_check["summary"]


def test_unknown_check_is_a_usage_error() -> None:
    with pytest.raises(SystemExit, match="unknown check"):
        doctor(skip=("gpu-magic",))


def test_modal_credentials_reported_never_printed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("modal")
    skip = ["--skip", "smoke", "--skip", "torch", "--skip", "docker", "--skip", "data"]
    empty = {"MODAL_CONFIG_PATH": str(tmp_path / "none.toml"), "MODAL_TOKEN_ID": "", "MODAL_TOKEN_SECRET": ""}
    none = run(*skip, env=empty)
    line = next(ln for ln in none.stdout.splitlines() if " modal " in ln)
    assert "no credentials" in line and "modal token new" in none.stdout
    secret = "as-" + "7f3a9c1e5b" * 3
    have = run(*skip, env={"MODAL_TOKEN_ID": "ak-visible-id", "MODAL_TOKEN_SECRET": secret})
    assert "credentials configured" in have.stdout
    assert secret not in have.stdout + have.stderr
