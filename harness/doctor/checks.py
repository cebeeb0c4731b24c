"""What isolation and resources evaluations get on this machine, and why not more.

Each check is a typed :class:`Check`; ``fail`` means evaluations cannot work at all here (the
command exits non-zero), ``warn`` means they work with weaker isolation or fewer features.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Level = Literal["ok", "warn", "fail", "info"]
SMOKE_ENV = "selftest-tiny"


@dataclass(frozen=True)
class Check:
    """One finding."""

    name: str
    """Short key, e.g. ``memory``."""
    level: Level
    """``ok``, ``info`` (nothing to fix), ``warn`` (works, with less), ``fail`` (cannot work)."""
    summary: str
    """One line: what is in force."""
    details: list[str] = field(default_factory=list)
    """Why not more, and how to get it."""
    data: dict[str, Any] = field(default_factory=dict)
    """Machine-readable facts (for ``--json``)."""

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


def check_isolation() -> Check:
    """bubblewrap, namespaces and the uid switch (see ``harness.sandbox.isolation``)."""
    from harness.sandbox.isolation import detect_isolation

    info = detect_isolation()
    root = os.geteuid() == 0
    facts = {
        "level": info.level,
        "bwrap": shutil.which("bwrap"),
        "drops_uid": info.drops_uid,
        "root": root,
    }
    what = {
        "bwrap": "bubblewrap: private network, PID, IPC, UTS namespaces; only system and Python dirs visible",
        "container": "inside an evobench container: the container is the outer sandbox",
        "unshare": "network and PID namespaces only (no file-system isolation)",
        "none": "no namespaces: candidates run as plain processes",
    }[info.level]
    uid = (
        "candidates run under their own unprivileged uid, all capabilities dropped"
        if info.drops_uid and root
        else "candidates keep the harness's uid (capabilities dropped)"
        if info.level == "bwrap"
        else "candidates keep the harness's uid"
    )
    details = list(info.warnings)
    if info.level == "bwrap" and not root:
        details.append("run as root to give each worker's candidates a uid of their own")
    level: Level = "ok" if info.level in ("bwrap", "container") else "warn"
    return Check("isolation", level, f"{what}; {uid}", details, facts)


def check_memory() -> Check:
    """The memory-limit mechanism in force (cgroup v2 / v1, else RLIMIT_DATA) and why."""
    from harness.sandbox.limits import detect_memory_mechanism

    mech = detect_memory_mechanism()
    details = list(mech.reasons)
    if mech.hierarchy is None:
        details.append(
            "RLIMIT_DATA counts private writable memory per process (not page cache, tmpfs or a "
            "whole process tree); for per-candidate cgroups run as root with a writable cgroup "
            "hierarchy, or set EVOBENCH_CGROUP_PARENT to a delegated cgroup v2 directory"
        )
    from harness.sandbox.limits.cpu import cpuacct_parent

    cpu_parent = cpuacct_parent() if mech.kind != "cgroup-v2" else mech.hierarchy.memory_parent  # type: ignore[union-attr]
    cpu_clock = f"cgroup counter under {cpu_parent}" if cpu_parent else None
    details.append(
        f"CPU time of a case (AHC time limits): {cpu_clock}"
        if cpu_clock
        else "CPU time of a case is not measurable here: AHC cases are TLE only at the RLIMIT_CPU kill (4 s)"
    )
    facts = {
        "mechanism": mech.kind,
        "cgroup_parent": str(mech.hierarchy.memory_parent) if mech.hierarchy else None,
        "pids_controller": bool(mech.hierarchy and mech.hierarchy.pids),
        "address_space_limited": False,
        "case_cpu_clock": cpu_clock,
    }
    return Check("memory", "ok" if mech.hierarchy else "warn", mech.describe(), details, facts)


# Run in a child interpreter: importing torch costs ~5 s of CPU, which the doctor's own process
# (and its other checks, running meanwhile) should not pay. One JSON line on stdout.
_TORCH_PROBE = """
import json
try:
    import torch
except Exception as e:
    print(json.dumps({"import_error": str(e)}))
    raise SystemExit(0)
out = {"version": torch.__version__, "cuda_build": torch.version.cuda, "gpus": []}
try:
    if torch.cuda.is_available():
        out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
except Exception as e:
    out["cuda_error"] = str(e)
print(json.dumps(out))
"""
TORCH_PROBE_TIMEOUT_S = 120.0
"""How long the torch probe may take (a cold import on a loaded machine takes ~10 s)."""


def check_torch() -> Check:
    """The torch build (CPU / CUDA) and whether a GPU is usable, probed in a child interpreter."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=TORCH_PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check("torch", "fail", f"torch cannot be imported: no answer in {TORCH_PROBE_TIMEOUT_S:g} s")
    try:
        probe = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):  # the interpreter died before printing (a crash in torch's init)
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Check("torch", "fail", f"torch cannot be imported: the probe failed ({why})")
    if "import_error" in probe:
        msg = f"torch cannot be imported: {probe['import_error']}"
        return Check("torch", "fail", msg, ["pip install torch"])
    cuda_build, version = probe["cuda_build"], probe["version"]
    facts: dict[str, Any] = {"version": version, "cuda_build": cuda_build, "gpus": probe["gpus"]}
    if "cuda_error" in probe:
        facts["cuda_error"] = probe["cuda_error"]
    build = f"CUDA {cuda_build} build" if cuda_build else "CPU build"
    gpus: list[str] = probe["gpus"]
    gpu = f"{len(gpus)} GPU(s): {', '.join(gpus)}" if gpus else "no GPU usable (GPU variants cannot run)"
    return Check("torch", "ok" if gpus else "info", f"torch {version} ({build}); {gpu}", [], facts)


def _docker_client() -> Any:
    import docker

    client = docker.from_env(timeout=5)
    client.ping()
    return client


def check_docker() -> Check:
    """Whether the Docker daemon answers and which evobench images are built for this harness."""
    try:
        client = _docker_client()
    except Exception as e:  # noqa: BLE001 - docker-py raises many kinds; all mean "unreachable"
        msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        return Check(
            "docker",
            "info",
            "Docker daemon not reachable: the docker backend is unavailable (local backend unaffected)",
            [msg, "start dockerd, then `bench images build --env <id>` or scripts/docker-setup.sh"],
            {"reachable": False},
        )
    from harness.envs.registry import default_registry
    from harness.images.naming import REPO_PREFIX, env_image_tag

    tags = {t for img in client.images.list() for t in img.tags if t.startswith(f"{REPO_PREFIX}/")}
    built, stale = [], []
    for v in default_registry().variants():
        want = env_image_tag(v)
        if want in tags:
            built.append(v.id)
        elif any(t.startswith(want.split(":")[0] + ":") for t in tags):
            stale.append(v.id)
    facts = {"reachable": True, "built": built, "stale": stale, "images": sorted(tags)}
    summary = f"Docker daemon reachable; current images for {len(built)} variant(s)" + (
        f": {', '.join(built)}" if built else ""
    )
    details = (
        [f"outdated images (older harness or environment) for: {', '.join(stale)}; rebuild them"]
        if stale
        else []
    )
    return Check("docker", "ok", summary, details, facts)


def check_modal() -> Check:
    """Whether the Modal backend could start here: the package and credentials (never printed)."""
    from harness.sandbox.modal_backend.sdk import INSTALL_HINT, TOKEN_HINT, credentials_present

    try:
        import modal
    except ImportError:
        return Check("modal", "info", "modal not installed: --backend modal unavailable", [INSTALL_HINT])
    present = credentials_present()
    facts = {"modal_version": modal.__version__, "credentials": present}
    if present:
        return Check("modal", "ok", f"modal {modal.__version__}; credentials configured", [], facts)
    return Check("modal", "info", f"modal {modal.__version__}; no credentials", [TOKEN_HINT], facts)


def check_data() -> Check:
    """Which families have their data in the cache (generated-data families need none)."""
    from harness.envs.data import family_data_dir, missing_files
    from harness.envs.registry import default_registry

    families: dict[str, dict[str, Any]] = {}
    for v in default_registry().variants():
        fam = families.setdefault(v.family, {"sources": {}, "missing": set()})
        for key, src in v.data:
            fam["sources"][key] = src
    rows: dict[str, str] = {}
    for name, fam in sorted(families.items()):
        if not fam["sources"]:
            rows[name] = "generated (nothing to fetch)"
            continue
        d = family_data_dir(name)
        missing = [m for s in fam["sources"].values() for m in missing_files(d, s)]
        rows[name] = "present" if not missing else f"missing {len(missing)} file(s): bench data fetch {name}"
    absent = [n for n, r in rows.items() if r.startswith("missing")]
    summary = "data: " + ", ".join(f"{n} {'missing' if n in absent else 'ok'}" for n in rows)
    details = [f"{n}: {r}" for n, r in rows.items()]
    return Check("data", "info" if absent else "ok", summary, details, {"families": rows})


def check_smoke() -> Check:
    """Evaluate the self-test's initial program in the local sandbox (cold), end to end."""
    from harness.envs.registry import default_registry
    from harness.evaluation.result import Status
    from harness.sandbox.local import LocalBackend

    variant = default_registry().get(SMOKE_ENV)
    backend = LocalBackend(workers=1, mode="cold")
    try:
        res = backend.submit(variant, variant.initial_program).result(timeout=180)
    except Exception as e:  # noqa: BLE001 - whatever broke, evaluations do not work
        return Check("smoke", "fail", f"a local evaluation could not run: {e!r}")
    finally:
        backend.close()
    facts = {"status": res.status.value, "seconds": round(res.durations.total, 3)}
    if res.status is Status.OK:
        return Check(
            "smoke",
            "ok",
            f"local sandbox evaluates ({SMOKE_ENV}: ok in {res.durations.total:.2f} s)",
            [],
            facts,
        )
    return Check(
        "smoke",
        "fail",
        f"local sandbox cannot evaluate: {SMOKE_ENV} initial program gave {res.status.value}",
        [res.reason[-1500:]],
        facts,
    )


CHECKS: dict[str, Callable[[], Check]] = {
    "isolation": check_isolation,
    "memory": check_memory,
    "torch": check_torch,
    "docker": check_docker,
    "modal": check_modal,
    "data": check_data,
    "smoke": check_smoke,
}


def _guarded(name: str, fn: Callable[[], Check]) -> Check:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - doctor must report, not crash
        return Check(name, "fail", f"check crashed: {e!r}")


def run_checks(skip: tuple[str, ...] = ()) -> list[Check]:
    """Run every check not in ``skip`` at once; a check that crashes is itself reported as ``fail``.

    The checks are independent and mostly wait on child processes (the sandbox smoke test, the
    torch probe, bwrap probes, the Docker socket), so threads overlap them; the findings come back
    in :data:`CHECKS` order whatever order they finish in.
    """
    todo = [(name, fn) for name, fn in CHECKS.items() if name not in skip]
    if not todo:
        return []
    # the longest first, so that they start before the pool is busy with the quick ones
    order = sorted(todo, key=lambda t: t[0] not in ("smoke", "torch"))
    with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="doctor") as pool:
        futures = {name: pool.submit(_guarded, name, fn) for name, fn in order}
        return [futures[name].result() for name, _ in todo]


def python_facts() -> dict[str, str]:
    """Interpreter facts printed in the header."""
    return {"python": sys.version.split()[0], "executable": sys.executable}
