"""``bench doctor --gpu``: the first command on a GPU machine, a go / no-go table in <= 15 minutes.

Rows (each ``go``, ``no-go``, ``not checked`` with the reason, or ``skipped`` by ``--skip``), with
their hard caps (:data:`TIME_BUDGET_S`, 900 s in all; a cap kills the process group or container):

=========== ===== ===========================================================================
row         cap s what it checks
=========== ===== ===========================================================================
driver      30    ``nvidia-smi``'s driver against the CUDA version torch was built for (PyPI's
                  torch 2.13 is a CUDA 13.0 build: driver >= 580)
gpus        60    torch starts CUDA (no-go when ``nvidia-smi`` works but torch cannot) and at
                  least one GPU variant fits these GPUs (model and ``gpu_memory_gib``)
images      90    each fitting variant's Docker image starts a container that sees GPU 0
                  (60 s per container); an image not built is ``not checked`` with its command
evals       360   one evaluation of each fitting variant's initial program (local sandbox), the
                  headline variant first (:data:`~harness.doctor.gpu_facts.HEADLINE_ORDER`),
                  reduced where the family has a reduced mode (:func:`_reduced`), each in its own
                  process killed at 240 s; data not fetched or time run out: ``not checked``
gpu-tests   150   every ``gpu``-marked test not run by the next two rows
red-team    90    the GPU red team (kernel attacks: side stream, IPC leak over many calls; GPU
                  variants' hostile candidates where ``tests/environments/hacks/<id>`` exists)
vllm        120   vLLM sampling with a LoRA adapter, alone and in the learning agent
=========== ===== ===========================================================================

Only variants whose GPU fits this machine are evaluated (no override runs of other GPUs'
variants). Exit status (:func:`exit_code`): 1 on any ``no-go``, and, where a GPU is present, on any
``not checked``; ``bench doctor --gpu --prepare`` runs the commands the ``not checked`` rows name
(:func:`~harness.doctor.gpu_rows.prepare_steps`); ``--env ID`` checks only the named variants
(those a run's caps left not checked: 17 variants fit an A100, 21 s each in 360 s);
``--skip images`` where the Docker backend will not be used (no daemon: ``not checked``). Without a
GPU every row lists what it would check and the exit status is 0.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from .capped import Runner, run_capped
from .gpu_facts import GpuFacts, GpuRow, Verdict, gather_facts, no_gpu, plan_by_model, variants_here, worst
from .gpu_rows import ROOT, pytest_row, row_images, selections, vllm_missing

__all__ = ["GPU_ROWS", "GpuFacts", "GpuRow", "exit_code", "gather_facts", "run_gpu_doctor"]

MIN_DRIVER = {13: 580, 12: 525, 11: 450}
"""Oldest Linux driver (major version) each CUDA major release runs on (NVIDIA's compatibility table)."""
TIME_BUDGET_S = {"driver": 30, "gpus": 60, "images": 90, "evals": 360, "gpu-tests": 150, "red-team": 90,
                 "vllm": 120}  # fmt: skip
"""Hard cap of each row in seconds: 900 (15 min) in all on one GPU (driver and gpus: the probes)."""
EVAL_CAP_S = 240.0
"""Hard cap of one variant's evaluation in the ``evals`` row (its process group is killed)."""
MIN_EVAL_S = 30.0
"""A variant that would get less of the row's time than this is not started (``not checked``)."""
GPU_ROWS = tuple(TIME_BUDGET_S)
"""Row names, in table order (``--skip`` accepts them)."""
WOULD_CHECK = {
    "driver": "the NVIDIA driver against torch's CUDA build",
    "gpus": "that torch starts CUDA and which GPU variants fit the GPUs",
    "images": "each fitting variant's Docker image starts with its GPU",
    "evals": "one (reduced where possible) evaluation of each fitting variant's initial program",
    "gpu-tests": "the gpu-marked tests",
    "red-team": "the GPU red team (kernel attacks)",
    "vllm": "vLLM sampling with a LoRA adapter (alone and in the learning agent)",
}
"""What each row checks on a GPU machine (listed where there is none)."""


def row_driver(facts: GpuFacts) -> GpuRow:
    """The driver against the CUDA version of the torch build."""
    if facts.driver is None:
        return GpuRow("driver", "not checked", no_gpu(facts))
    if not facts.torch_cuda:
        return GpuRow("driver", "no-go", f"driver {facts.driver}, but torch is a CPU build",
                      ["install the CUDA torch wheel (PyPI's default torch on Linux)"])  # fmt: skip
    major = int(facts.torch_cuda.split(".")[0])
    need = MIN_DRIVER.get(major)
    m = re.match(r"\d+", facts.driver)
    have = int(m.group()) if m else 0
    summary = f"driver {facts.driver}; torch built for CUDA {facts.torch_cuda}"
    if need is None or have >= need:
        return GpuRow("driver", "go", summary)
    return GpuRow("driver", "no-go", summary, [f"CUDA {major}.x needs driver >= {need}; update the driver"])


def row_gpus(facts: GpuFacts, variants: list[Any]) -> GpuRow:
    """Torch starts CUDA, and which GPU variants fit this machine (no-go when none does)."""
    if not facts.present:
        return GpuRow("gpus", "not checked", no_gpu(facts))
    if not facts.gpus:
        return GpuRow("gpus", "no-go", f"nvidia-smi works (driver {facts.driver}) but {no_gpu(facts)}",
                      ["check `python -c 'import torch; torch.cuda.init()'`: a CPU torch build, a driver "
                       "older than torch's CUDA, or no /dev/nvidia* device in this container"])  # fmt: skip
    here = variants_here(variants, facts)
    names = ", ".join(f"{g} ({facts.memory(i):.0f} GiB)" for i, g in enumerate(facts.gpus))
    order = {v.id: i + 1 for i, v in enumerate(here)}
    details = [
        f"{v.id}: needs {v.hardware.gpu}"
        + (f" with {v.hardware.gpu_memory_gib:g} GiB" if v.hardware.gpu_memory_gib else "")
        + (f" -> fits, evaluated {order[v.id]}." if v.id in order else " -> does not fit here (not checked)")
        for v in variants
    ]
    if not here:
        return GpuRow("gpus", "no-go", f"no GPU variant fits {names}", details)
    return GpuRow("gpus", "go", f"{len(here)} GPU variant(s) fit {names}", details)


def row_evals(facts: GpuFacts, here: list[Any], runner: Runner, cap_s: float, reg: Any = None) -> GpuRow:
    """One evaluation of each fitting variant's initial program, each killed at its cap."""
    if not facts.gpus:
        return GpuRow("evals", "not checked", no_gpu(facts))
    if not here:
        return GpuRow("evals", "not checked", "no GPU variant fits this machine (see the gpus row)")
    from harness.envs.data import DataMissingError, require_data
    from harness.envs.registry import default_registry
    from harness.scoring.device import OVERRIDE_ENV

    reg = reg or default_registry()
    env = {k: x for k, x in os.environ.items() if k != OVERRIDE_ENV}  # the real GPU check, never overridden
    deadline = time.monotonic() + cap_s
    verdicts: list[Verdict] = []
    details: list[str] = []
    for v in here:
        left = deadline - time.monotonic()
        try:
            require_data(v) if v.data else None
        except DataMissingError:
            verdicts.append("not checked")
            details.append(f"{v.id}: not checked: data not fetched; run `bench data fetch {v.family}`")
            continue
        if left < MIN_EVAL_S:
            verdicts.append("not checked")
            again = f"bench doctor --gpu --env {v.id}"
            details.append(f"{v.id}: not checked: the row's {cap_s:.0f} s cap ran out; run `{again}`")
            continue
        target = _reduced(reg, v)
        cap = min(EVAL_CAP_S, left)
        res = runner([sys.executable, "-m", "harness.doctor.eval_one", target.id], cap, ROOT, env)
        verdict, line = _eval_verdict(res, target, reduced=target is not v, cap=cap)
        verdicts.append(verdict)
        details.append(f"{target.id}: {line} ({res.seconds:.0f} s)")
    return GpuRow(
        "evals", worst(verdicts), f"{verdicts.count('go')}/{len(here)} initial programs ok", details
    )


def _eval_verdict(res: Any, target: Any, *, reduced: bool, cap: float) -> tuple[Verdict, str]:
    if res.timed_out:
        if reduced:
            return "no-go", f"no-go: the reduced evaluation was killed at its {cap:.0f} s cap"
        return "not checked", (
            f"not checked: killed at its {cap:.0f} s cap (a full evaluation: its family has no reduced "
            f"mode; timeout {target.timeout_s:.0f} s)"
        )
    line = next((ln for ln in res.output.splitlines() if ln.startswith("RESULT ")), None)
    if res.returncode != 0 or line is None:
        return "no-go", f"no-go: the evaluation crashed (exit {res.returncode}): {res.output.strip()[-300:]}"
    out = json.loads(line[len("RESULT ") :])
    if out["status"] == "ok":
        return "go", "ok"
    return "no-go", f"no-go: {out['status']}: {out['reason'][-300:]}"


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


def run_gpu_doctor(
    facts: GpuFacts | None = None,
    skip: tuple[str, ...] = (),
    runner: Runner = run_capped,
    variants: list[Any] | None = None,
    docker: Any = None,
    only: tuple[str, ...] = (),
) -> list[GpuRow]:
    """Every row of the table, in order (rows in ``skip`` are ``skipped``).

    Args:
        facts: The machine (default: :func:`gather_facts`).
        skip: Row names to leave out.
        runner: Runs every command under its cap (tests inject a fake).
        variants: The GPU variants (default: the registry's).
        docker: A Docker client for the images row (default: the local daemon's).
        only: Variant ids the images and evals rows check (empty: every fitting one); for the
            variants a full run's caps left unchecked.
    """
    from harness.envs.registry import default_registry

    facts = facts or gather_facts(runner=runner)
    if variants is None:
        variants = [v for v in default_registry().variants() if v.hardware.gpu_count > 0]
    if not facts.present:
        return [_would(name, facts, variants, skip) for name in GPU_ROWS]
    here = [v for v in variants_here(variants, facts) if not only or v.id in only]
    sels = selections(variants)
    cap = TIME_BUDGET_S
    rows: dict[str, Callable[[], GpuRow]] = {
        "driver": lambda: row_driver(facts),
        "gpus": lambda: row_gpus(facts, variants),
        "images": lambda: row_images(facts, here, cap["images"], docker),
        "evals": lambda: row_evals(facts, here, runner, cap["evals"]),
        "gpu-tests": lambda: pytest_row("gpu-tests", facts, sels["gpu-tests"], "gpu-marked tests",
                                        cap["gpu-tests"], runner),
        "red-team": lambda: pytest_row("red-team", facts, sels["red-team"], "GPU red team",
                                       cap["red-team"], runner),
        "vllm": lambda: _vllm_row(facts, sels, runner),
    }  # fmt: skip
    out = []
    for name, fn in rows.items():
        if name in skip:
            out.append(GpuRow(name, "skipped", "skipped (--skip)"))
            continue
        t0 = time.monotonic()
        try:
            row = fn()
        except Exception as e:  # noqa: BLE001 - doctor reports, never crashes
            row = GpuRow(name, "no-go", f"check crashed: {e!r}"[:400])
        out.append(GpuRow(row.name, row.verdict, row.summary, row.details, round(time.monotonic() - t0, 1)))
    return out


def _vllm_row(facts: GpuFacts, sels: dict[str, Any], runner: Runner) -> GpuRow:
    missing = vllm_missing() if facts.gpus else None
    if missing:
        return GpuRow("vllm", "not checked", missing)
    return pytest_row("vllm", facts, sels["vllm"], "vLLM with a LoRA adapter", TIME_BUDGET_S["vllm"], runner)


def _would(name: str, facts: GpuFacts, variants: list[Any], skip: tuple[str, ...]) -> GpuRow:
    """A row on a machine without a GPU: what it would check there."""
    if name in skip:
        return GpuRow(name, "skipped", "skipped (--skip)")
    details = [f"would check: {WOULD_CHECK[name]} (cap {TIME_BUDGET_S[name]} s)"]
    if name == "evals":
        details += plan_by_model(variants)
    return GpuRow(name, "not checked", no_gpu(facts), details)


def exit_code(rows: list[GpuRow], facts: GpuFacts) -> int:
    """1 on any ``no-go``, or any ``not checked`` where a GPU is present; else 0."""
    if any(r.verdict == "no-go" for r in rows):
        return 1
    return 1 if facts.present and any(r.verdict == "not checked" for r in rows) else 0
