"""Python-side facts for gpu-check.sh: versions, the GPU as torch sees it, the sandbox's view.

Usage: ``python3 -u scripts/gpu_check/facts.py``. Never raises: every probe prints its finding or
its error. The last line is ``KEY: ...``. Exit 0 (77 when torch sees no CUDA GPU).
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _try(label: str, fn: Any) -> Any:
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001 - a failing probe is a finding
        value = f"ERROR {type(e).__name__}: {e}"
    print(f"{label}: {value}", flush=True)
    return value


def _version(dist: str) -> str:
    """Installed version and location, without importing (litellm's import reaches the network)."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = "not installed"
    spec = importlib.util.find_spec(dist.replace("-", "_"))
    return f"{version} ({spec.origin if spec is not None else 'no module'})"


def main() -> int:
    """Print the facts; return 77 without a CUDA GPU."""
    print(f"python: {sys.version.split()[0]} at {sys.executable} ({platform.machine()})", flush=True)
    for dist in (
        "torch",
        "triton",
        "numpy",
        "pandas",
        "pyarrow",
        "scipy",
        "h5py",
        "rich",
        "pydantic",
        "pydantic-core",
        "tyro",
        "typing-extensions",
        "typeguard",
        "docstring-parser",
        "pytest",
        "hypothesis",
        "pytest-timeout",
        "ninja",
        "litellm",
        "duckdb",
        "docker",
        "modal",
        "xgrammar",
        "vllm",
    ):
        _try(f"  {dist}", lambda d=dist: _version(d))
    gpu, name = False, ""
    try:
        import torch

        print(
            f"torch.version.cuda: {torch.version.cuda}; cudnn: {torch.backends.cudnn.version()}", flush=True
        )
        gpu = torch.cuda.is_available()
        print(
            f"torch.cuda.is_available: {gpu}; device_count: {torch.cuda.device_count() if gpu else 0}",
            flush=True,
        )
        if gpu:
            p = torch.cuda.get_device_properties(0)
            name = p.name
            print(
                f"device 0: {p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs, "
                f"capability {p.major}.{p.minor}",
                flush=True,
            )
            _try("  arch list", torch.cuda.get_arch_list)
    except Exception as e:  # noqa: BLE001
        print(f"torch: ERROR {e!r}", flush=True)
    _try(
        "torch.utils.cpp_extension.CUDA_HOME",
        lambda: importlib.import_module("torch.utils.cpp_extension").CUDA_HOME,
    )
    for var in ("PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "PYTHONPATH"):
        print(f"env {var}={os.environ.get(var, '<unset>')}", flush=True)

    level = _try(
        "harness detect_isolation",
        lambda: importlib.import_module("harness.sandbox.isolation").detect_isolation(),
    )
    _try(
        "harness host_gpus (/dev/nvidia<N>)",
        lambda: importlib.import_module("harness.hardware.gpus").host_gpus(),
    )
    _try(
        "harness candidate_env",
        lambda: importlib.import_module("harness.sandbox.isolation").candidate_env(8.0),
    )
    _try(
        "harness gather_facts (doctor --gpu)",
        lambda: importlib.import_module("harness.doctor.gpu").gather_facts(),
    )

    def _mem() -> Any:
        from harness.sandbox.limits import CandidateMemory

        m = CandidateMemory(2048, 64)
        try:
            return f"{m.label()}; cgroup={'yes' if m.cgroup is not None else 'no'}"
        finally:
            m.close()

    _try("harness CandidateMemory(2048 MiB)", _mem)
    iso = getattr(level, "level", str(level)[:40])
    torch_mod = sys.modules.get("torch")
    tv = (
        f"torch {torch_mod.__version__} cuda {torch_mod.version.cuda}"
        if torch_mod is not None
        else "no torch"
    )
    print(f"KEY: {name or 'no CUDA GPU'}; {tv}; isolation={iso}", flush=True)
    return 0 if gpu else 77


if __name__ == "__main__":
    sys.exit(main())
