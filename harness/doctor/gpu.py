"""``bench doctor --gpu``: the first command on a GPU machine, a go / no-go table in <= 15 minutes.

Rows (each ``go``, ``no-go`` or ``not checked`` with the reason):

* ``driver``: the NVIDIA driver (``nvidia-smi``) against the CUDA version torch was built for
  (PyPI's torch 2.13 is a CUDA 13.0 build: driver >= 580);
* ``gpus``: the GPUs torch sees, and which GPU variants match them (exact model names);
* ``images``: every GPU variant's Docker image is built and a container starts with its GPU;
* ``evals``: one evaluation of each GPU variant's initial program on the local sandbox, on a
  one-unit validation subset where the family has subsets (a reduced budget); variants whose GPU
  is not here run with ``EVOBENCH_GPU_OVERRIDE=1`` (a plumbing check, timings not comparable);
* ``gpu-tests``: the ``gpu``-marked tests (kernel driver, sandbox GPU binds, vLLM agent);
* ``red-team``: the GPU twins of the red team (hostile candidates of GPU variants and the
  ``gpu``-marked kernel attacks: side stream, IPC leak over many calls);
* ``vllm``: vLLM sampling with a LoRA adapter (``tests/agents/rl/test_vllm_backend.py``).

On a machine without a GPU every row says what could not be checked and why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Verdict = Literal["go", "no-go", "not checked"]
MIN_DRIVER = {13: 580, 12: 525, 11: 450}
"""Oldest Linux driver (major version) each CUDA major release runs on (NVIDIA's compatibility table)."""
TIME_BUDGET_S = {"images": 120, "evals": 420, "gpu-tests": 180, "red-team": 120, "vllm": 180}
"""Seconds each slow row may take: at most 17 minutes in all, ~10 on a healthy H100."""


@dataclass(frozen=True)
class GpuRow:
    """One row of the go / no-go table."""

    name: str
    """Row key (``driver``, ``gpus``, ``images``, ...)."""
    verdict: Verdict
    """``go``, ``no-go`` or ``not checked``."""
    summary: str
    """One line: what was found."""
    details: list[str] = field(default_factory=list)
    """Per-item findings and fixes."""
    seconds: float = 0.0
    """Time the row took."""

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class GpuFacts:
    """What the machine offers, gathered once and shared by the rows."""

    driver: str | None
    """``nvidia-smi``'s driver version (None: no NVIDIA driver)."""
    torch_cuda: str | None
    """CUDA version torch was built for (None: a CPU build or no torch)."""
    gpus: list[str]
    """Device names torch sees."""


def gather_facts(nvidia_smi: Callable[[], str | None] | None = None) -> GpuFacts:
    """Driver version, torch's CUDA build and the visible GPUs (never raises)."""
    driver = (nvidia_smi or _nvidia_smi)()
    try:
        import torch

        cuda = torch.version.cuda
        gpus = (
            [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if (torch.cuda.is_available())
            else []
        )
    except Exception:  # noqa: BLE001 - a broken torch or driver is a finding, not a crash
        cuda, gpus = None, []
    return GpuFacts(driver, cuda, gpus)


def _nvidia_smi() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def _no_gpu(facts: GpuFacts) -> str:
    if facts.driver is None:
        return "no NVIDIA driver here (nvidia-smi not found or failing)"
    return "torch sees no CUDA GPU" + ("" if facts.torch_cuda else " (torch is a CPU build)")


def row_driver(facts: GpuFacts) -> GpuRow:
    """The driver against the CUDA version of the torch build."""
    if facts.driver is None:
        return GpuRow("driver", "not checked", _no_gpu(facts))
    if not facts.torch_cuda:
        return GpuRow("driver", "no-go", f"driver {facts.driver}, but torch is a CPU build",
                      ["install the CUDA torch wheel (PyPI's default torch on Linux)"])  # fmt: skip
    major = int(facts.torch_cuda.split(".")[0])
    need = MIN_DRIVER.get(major)
    have = int(re.match(r"\d+", facts.driver).group()) if re.match(r"\d+", facts.driver) else 0  # type: ignore[union-attr]
    summary = f"driver {facts.driver}; torch built for CUDA {facts.torch_cuda}"
    if need is None or have >= need:
        return GpuRow("driver", "go", summary)
    return GpuRow("driver", "no-go", summary, [f"CUDA {major}.x needs driver >= {need}; update the driver"])


def row_gpus(facts: GpuFacts, variants: list[Any]) -> GpuRow:
    """Which GPU variants match a GPU of this machine (exact model names)."""
    from harness.scoring.device import gpu_matches

    if not facts.gpus:
        return GpuRow("gpus", "not checked", _no_gpu(facts))
    details = []
    for v in variants:
        here = any(gpu_matches(v.hardware.gpu, g) for g in facts.gpus)
        details.append(
            f"{v.id}: needs {v.hardware.gpu} -> {'here' if here else 'not here (override run only)'}"
        )
    return GpuRow("gpus", "go", f"{len(facts.gpus)} GPU(s): {', '.join(facts.gpus)}", details)


def row_images(facts: GpuFacts, variants: list[Any]) -> GpuRow:
    """Each GPU variant's Docker image exists and a container of it starts with its GPU."""
    if not facts.gpus:
        return GpuRow("images", "not checked", _no_gpu(facts))
    try:
        from harness.images.build import docker_client, image_exists
        from harness.images.naming import env_image_tag

        client = docker_client()
    except Exception as e:  # noqa: BLE001 - no daemon is a finding
        return GpuRow("images", "not checked", f"Docker daemon not reachable: {e}"[:300])
    bad, details = 0, []
    for base in sorted({v.base_id for v in variants}):
        tag = env_image_tag(next(v for v in variants if v.base_id == base))
        if not image_exists(client, tag):
            bad += 1
            details.append(f"{base}: image {tag} not built (`bench images build --env {base}`)")
            continue
        ok, msg = _container_sees_gpu(client, tag)
        bad += not ok
        details.append(f"{base}: {msg}")
    summary = f"{len(details) - bad}/{len(details)} images start with a GPU"
    return GpuRow("images", "no-go" if bad else "go", summary, details)


def _container_sees_gpu(client: Any, tag: str) -> tuple[bool, str]:
    from docker.types import DeviceRequest

    from harness.sandbox.docker_backend import GPU_CAPABILITIES

    code = "import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0))"
    try:
        out = client.containers.run(
            tag, ["python", "-c", code], remove=True, network_mode="none", read_only=True,
            device_requests=[DeviceRequest(device_ids=["0"], capabilities=[GPU_CAPABILITIES])],
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - container or runtime failures are the finding
        return False, f"container failed: {str(e)[-300:]}"
    return True, f"container sees {out.decode(errors='replace').strip()}"


def row_evals(facts: GpuFacts, variants: list[Any]) -> GpuRow:
    """One reduced-budget evaluation of each GPU variant's initial program (local sandbox)."""
    if not facts.gpus:
        return GpuRow("evals", "not checked", _no_gpu(facts))
    from harness.envs.registry import default_registry
    from harness.evaluation.result import Status
    from harness.sandbox.local import LocalBackend
    from harness.scoring.device import OVERRIDE_ENV, gpu_matches

    reg, bad, details = default_registry(), 0, []
    deadline = time.monotonic() + TIME_BUDGET_S["evals"]
    for v in variants:
        if time.monotonic() > deadline:
            details.append(f"{v.id}: not checked (the row's {TIME_BUDGET_S['evals']} s budget ran out)")
            continue
        here = any(gpu_matches(v.hardware.gpu, g) for g in facts.gpus)
        os.environ[OVERRIDE_ENV] = "0" if here else "1"
        target = _reduced(reg, v)
        backend = LocalBackend(workers=1, mode="cold")
        try:
            res = backend.submit(target, v.initial_program).result(timeout=v.timeout_s + 120)
            ok = res.status is Status.OK
            note = "" if here else " (override: not this variant's GPU)"
            details.append(
                f"{target.id}: {res.status.value}{note}" + ("" if ok else f": {res.reason[-300:]}")
            )
        except Exception as e:  # noqa: BLE001 - any failure is a no-go for that variant
            ok = False
            details.append(f"{target.id}: {e!r}"[:400])
        finally:
            backend.close()
            os.environ.pop(OVERRIDE_ENV, None)
        bad += not ok
    summary = f"{len(variants) - bad}/{len(variants)} initial programs ok"
    return GpuRow("evals", "no-go" if bad else "go", summary, details)


def _reduced(reg: Any, v: Any) -> Any:
    """The variant's reduced evaluation: a kernel family's ``~quick`` mode, else a one-unit subset.

    ``~quick`` is the tests plus a few timed calls per benchmark; without either, the variant.
    """
    for suffix in ("~quick", "~subset-0-1"):
        try:
            return reg.get(f"{v.id}{suffix}")
        except Exception:  # noqa: BLE001 - no such reduced mode: try the next
            continue
    return v


def _pytest_row(name: str, facts: GpuFacts, args: list[str], what: str) -> GpuRow:
    """Run pytest on ``args`` (gpu-marked tests) in a subprocess within the row's time budget."""
    if not facts.gpus:
        return GpuRow(name, "not checked", _no_gpu(facts))
    root = Path(__file__).resolve().parents[2]
    if not (root / "tests").is_dir():
        return GpuRow(name, "not checked", "tests/ not found: run from a source checkout")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    try:
        out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=TIME_BUDGET_S[name])
    except subprocess.TimeoutExpired:
        return GpuRow(name, "no-go", f"{what}: over the {TIME_BUDGET_S[name]} s budget")
    tail = (out.stdout + out.stderr).strip().splitlines()[-1:] or [""]
    if out.returncode == 5:  # pytest: nothing collected
        return GpuRow(name, "not checked", f"{what}: no test found", tail)
    if "skipped" in tail[0] and "passed" not in tail[0]:
        return GpuRow(name, "not checked", f"{what}: every test skipped", tail)
    return GpuRow(name, "go" if out.returncode == 0 else "no-go", f"{what}: {tail[0]}",
                  (out.stdout.strip().splitlines()[-15:] if out.returncode else []))  # fmt: skip


def gpu_hack_dirs(variants: list[Any]) -> list[str]:
    """Hostile-candidate folders of GPU variants (``tests/environments/hacks/<id>``), as ``-k`` names."""
    hacks = Path(__file__).resolve().parents[2] / "tests" / "environments" / "hacks"
    return sorted(v.id for v in variants if (hacks / v.id).is_dir())


def run_gpu_doctor(facts: GpuFacts | None = None, skip: tuple[str, ...] = ()) -> list[GpuRow]:
    """Every row of the table, in order (rows in ``skip`` are reported as not checked)."""
    from harness.envs.registry import default_registry

    facts = facts or gather_facts()
    variants = [v for v in default_registry().variants() if v.hardware.gpu_count > 0]
    twins = gpu_hack_dirs(variants)
    red_team = ["-m", "gpu", "tests/harness/kernels", "tests/harness/inside/test_kernel_driver.py"]
    if twins:
        red_team = ["tests/environments/test_hacks.py", "-k", " or ".join(twins), *red_team[2:]]
    gpu_tests = ["-m", "gpu", "tests/harness", "tests/agents/learning"]
    rows: dict[str, Callable[[], GpuRow]] = {
        "driver": lambda: row_driver(facts),
        "gpus": lambda: row_gpus(facts, variants),
        "images": lambda: row_images(facts, variants),
        "evals": lambda: row_evals(facts, variants),
        "gpu-tests": lambda: _pytest_row("gpu-tests", facts, gpu_tests, "gpu-marked tests"),
        "red-team": lambda: _pytest_row("red-team", facts, red_team, "GPU red-team twins"),
        "vllm": lambda: _pytest_row("vllm", facts, ["-m", "gpu", "tests/agents/rl/test_vllm_backend.py"],
                                    "vLLM sampling with a LoRA adapter"),
    }  # fmt: skip
    out = []
    for name, fn in rows.items():
        if name in skip:
            out.append(GpuRow(name, "not checked", "skipped (--skip)"))
            continue
        t0 = time.monotonic()
        try:
            row = fn()
        except Exception as e:  # noqa: BLE001 - doctor reports, never crashes
            row = GpuRow(name, "no-go", f"check crashed: {e!r}"[:400])
        out.append(GpuRow(row.name, row.verdict, row.summary, row.details, round(time.monotonic() - t0, 1)))
    return out


GPU_ROWS = ("driver", "gpus", "images", "evals", "gpu-tests", "red-team", "vllm")
"""Row names, in table order (``--skip`` accepts them)."""
