"""What ``bench doctor --gpu`` knows about this machine: driver, torch's CUDA, the GPUs, what fits them.

Torch is probed in a child process under a cap, so a hung driver cannot hang the doctor and the
doctor itself never holds a CUDA context while the rows evaluate on the GPU.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .capped import Runner, run_capped

Verdict = Literal["go", "no-go", "not checked", "skipped"]
"""A row's verdict; ``skipped``: left out with ``--skip`` (never counted as go, never fails)."""
PROBE_CAP_S = 60.0
"""Cap of the torch probe (import and CUDA start) and of ``nvidia-smi``."""
HEADLINE_ORDER = ("trimul-h100", "mla-decode-h200", "trimul-a100", "kuairec")
"""Evaluated first where they fit, in this order: the README's GPU run (``trimul-h100``), then the
variant each other GPU model is headlined with; the others follow by id."""

_TORCH_PROBE = """
import json
out = {"cuda": None, "gpus": [], "error": None}
try:
    import torch
    out["cuda"] = torch.version.cuda
    try:
        torch.cuda.init()  # raises why CUDA cannot start, where is_available() only says False
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out["gpus"].append([p.name, p.total_memory / 2**30])
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
except Exception as e:
    out["error"] = f"torch cannot be imported: {e!r}"
print("PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class GpuRow:
    """One row of the go / no-go table."""

    name: str
    """Row key (``driver``, ``gpus``, ``images``, ...)."""
    verdict: Verdict
    """``go``, ``no-go``, ``not checked`` or ``skipped``."""
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
    """Device names torch sees (empty: none, or CUDA could not start)."""
    memory_gib: list[float] = field(default_factory=list)
    """Total memory of each of ``gpus``, GiB (0 where unknown)."""
    cuda_error: str | None = None
    """Why torch could not start CUDA (None: it did, or was not asked)."""

    @property
    def present(self) -> bool:
        """Whether this machine has an NVIDIA GPU (a working driver, or GPUs torch sees)."""
        return self.driver is not None or bool(self.gpus)

    def memory(self, i: int) -> float:
        """Total memory of GPU ``i`` in GiB (0 where unknown)."""
        return self.memory_gib[i] if i < len(self.memory_gib) else 0.0


def gather_facts(nvidia_smi: Any = None, runner: Runner = run_capped, devices: Any = None) -> GpuFacts:
    """Driver version, torch's CUDA build and the visible GPUs (never raises).

    Args:
        nvidia_smi: Returns the driver version or None (tests inject one; default: ``nvidia-smi``).
        runner: Runs the torch probe under :data:`PROBE_CAP_S`.
        devices: Whether NVIDIA device nodes exist (default: ``/dev/nvidia*``). With neither a
            driver nor a device node torch cannot see a GPU, and the probe (seconds) is not run.
    """
    driver = (nvidia_smi or (lambda: _nvidia_smi(runner)))()
    if driver is None and not (devices or _device_nodes)():
        return GpuFacts(None, None, [])
    res = runner([sys.executable, "-c", _TORCH_PROBE], PROBE_CAP_S, None, None)
    line = next((ln for ln in res.output.splitlines() if ln.startswith("PROBE ")), None)
    if line is None:
        why = "killed at its cap" if res.timed_out else f"exit {res.returncode}"
        tail = res.output.strip()[-300:]
        return GpuFacts(driver, None, [], [], f"the torch probe failed ({why}): {tail}")
    probe = json.loads(line[len("PROBE ") :])
    gpus = [(str(n), float(m)) for n, m in probe["gpus"]]
    return GpuFacts(driver, probe["cuda"], [n for n, _ in gpus], [m for _, m in gpus], probe["error"])


def _device_nodes() -> bool:
    return any(Path("/dev").glob("nvidia*"))


def _nvidia_smi(runner: Runner) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    out = runner([exe, "--query-gpu=driver_version", "--format=csv,noheader"], 30.0, None, None)
    lines = out.output.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def worst(verdicts: list[Verdict]) -> Verdict:
    """A row's verdict from its items': any no-go, else any not checked, else go."""
    return "no-go" if "no-go" in verdicts else "not checked" if "not checked" in verdicts else "go"


def no_gpu(facts: GpuFacts) -> str:
    """Why no GPU row can run here."""
    if facts.driver is None:
        return "no NVIDIA driver here (nvidia-smi not found or failing)"
    return "torch cannot start CUDA" + (f" ({facts.cuda_error})" if facts.cuda_error else "")


def fits(variant: Any, name: str, memory_gib: float) -> bool:
    """Whether one GPU (its torch name and total memory) is the variant's model with its memory."""
    from harness.scoring.device import gpu_matches

    return gpu_matches(variant.hardware.gpu, name) and memory_gib >= (variant.hardware.gpu_memory_gib or 0.0)


def variants_here(variants: list[Any], facts: GpuFacts) -> list[Any]:
    """The GPU variants this machine's GPUs fit (enough GPUs of the model and memory), in run order."""
    here = [
        v
        for v in variants
        if sum(fits(v, g, facts.memory(i)) for i, g in enumerate(facts.gpus)) >= max(v.hardware.gpu_count, 1)
    ]
    return sorted(here, key=run_order)


def run_order(variant: Any) -> tuple[int, str]:
    """Sort key: :data:`HEADLINE_ORDER` first, then by id."""
    vid = variant.id
    return (HEADLINE_ORDER.index(vid) if vid in HEADLINE_ORDER else len(HEADLINE_ORDER), vid)


def plan_by_model(variants: list[Any]) -> list[str]:
    """Per GPU model, the variants that would be checked on it, in run order (the no-GPU listing)."""
    models: dict[str, list[Any]] = {}
    for v in sorted(variants, key=run_order):
        models.setdefault(v.hardware.gpu, []).append(v)
    return [f"on an {m}: {', '.join(v.id for v in vs)}" for m, vs in sorted(models.items())]
