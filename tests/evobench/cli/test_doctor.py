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
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # torch is probed in a child interpreter: a broken install there is a `torch` package found
    # first on its path whose import raises (the child inherits PYTHONPATH)
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('libtorch_cpu.so: cannot open')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    code = doctor(json_out=True, skip=("isolation", "memory", "docker", "modal", "data", "smoke"))
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["ok"] is False
    (torch_check,) = out["checks"]
    assert torch_check["level"] == "fail" and "cannot be imported" in torch_check["summary"]
    assert "libtorch_cpu.so" in torch_check["summary"]


def test_the_doctor_process_never_imports_torch() -> None:
    """torch (5 s of CPU) is probed in a child; the doctor's own process, running the other checks
    meanwhile, never loads it. The smoke test's sandbox is left out here (it has a slow test above)."""
    probe = (
        "import json, sys\n"
        "from evobench.cli.main import main\n"
        "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
        "print('\\nPROBE ' + json.dumps({'code': code, 'torch': 'torch' in sys.modules}))\n"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            "doctor",
            "--json",
            *(f"--skip={s}" for s in ("smoke", "docker", "modal")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next(x for x in reversed(r.stdout.splitlines()) if x.startswith("PROBE "))
    got = json.loads(line[len("PROBE ") :])
    assert got == {"code": 0, "torch": False}, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(r.stdout[: r.stdout.rindex("PROBE ")])
    torch_check = next(c for c in report["checks"] if c["name"] == "torch")
    import torch

    # the child's findings are the real ones
    assert torch_check["data"]["version"] == torch.__version__
    assert torch_check["data"]["cuda_build"] == torch.version.cuda


def test_unknown_check_is_a_usage_error() -> None:
    with pytest.raises(SystemExit, match="unknown check"):
        doctor(skip=("gpu-magic",))
    with pytest.raises(SystemExit, match="--env takes GPU variants"):
        doctor(gpu=True, env=("eplb-tiny",))
    with pytest.raises(SystemExit, match="go with --gpu"):
        doctor(prepare=True)


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


def test_gpu_without_a_gpu_lists_what_it_would_check_and_exits_0() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the full doctor takes minutes")
    r = run("--gpu", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["go"] is False and out["gpu"] is False and out["prepare"] == []
    assert [row["verdict"] for row in out["rows"]] == ["not checked"] * 7
    assert all(row["details"][0].startswith("would check:") for row in out["rows"])


class _Docker:
    """A Docker daemon with no evobench image built."""

    def __init__(self) -> None:
        self.images = self

    def get(self, tag: str) -> None:
        from docker.errors import ImageNotFound

        raise ImageNotFound(tag)


def _h100_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This process believes it has one H100, no data, no image; every capped command passes."""
    pytest.importorskip("docker")
    from harness.doctor import gpu
    from harness.doctor.capped import CappedResult
    from harness.images import build

    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))
    facts = gpu.GpuFacts("580.65.06", "13.0", ["NVIDIA H100 80GB HBM3"], [79.1])
    monkeypatch.setattr(gpu, "gather_facts", lambda: facts)
    real = gpu.run_gpu_doctor
    ok = 'RESULT {"status": "ok", "reason": ""}\n5 passed in 1s'
    runner = lambda argv, cap, cwd, env: CappedResult(0, ok, 1.0)  # noqa: E731
    monkeypatch.setattr(
        gpu,
        "run_gpu_doctor",
        lambda facts, skip, only: real(facts, skip, runner, docker=_Docker(), only=only),
    )
    monkeypatch.setattr(build, "docker_client", _Docker)


def test_gpu_with_nothing_prepared_exits_1_and_prints_the_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _h100_here(monkeypatch, tmp_path)
    assert doctor(gpu=True) == 1
    out = capsys.readouterr().out
    assert "bench doctor --gpu --prepare" in out
    for cmd in (
        "bench images build --env trimul-h100",
        "bench data fetch kuairec",
        "bench images build --env kuairec",
    ):
        assert cmd in out


def test_gpu_prepare_runs_those_commands_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from evobench.cli import commands_doctor

    _h100_here(monkeypatch, tmp_path)
    ran: list[list[str]] = []

    def fake_run(argv: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 1 if "kuairec" in argv else 0)

    monkeypatch.setattr(commands_doctor.subprocess, "run", fake_run)
    assert doctor(gpu=True, prepare=True) == 1  # the data fetch failed: the checks do not run
    bench = [sys.executable, "-m", "evobench.cli.main"]
    assert ran == [[*bench, "images", "build", "--env", "trimul-h100"], [*bench, "data", "fetch", "kuairec"]]
    assert "`bench data fetch kuairec` failed" in capsys.readouterr().err
