"""How a sandboxed candidate process is started on this machine: bubblewrap, rlimits, clean env.

Preferred: bubblewrap (``bwrap``) with fresh network, PID, IPC and UTS namespaces, an empty root
holding read-only binds of the system and Python directories only (no repository, no data cache,
no results, no home), tmpfs scratch, and, when the harness runs as root, a switch to an
unprivileged uid with every capability dropped. Without bwrap the candidate still runs in its own
session with rlimits and a scrubbed environment, in network/PID namespaces when ``unshare`` works,
and a warning says that file-system isolation is missing.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from harness.envs.manifest import Hardware

from .gpus import GpuAccess, gpu_access, gpu_binds, unshared_gpu_env
from .launch import (
    FILTER_MODULE,
    INSIDE_ROOT_IN_SANDBOX,
    fill,
    inside_dir,
    is_shim,
    module_argv,
    project_root,
)
from .limits import data_rlimit
from .toolchain import SANDBOX_USER, cuda_home, interpreter_bin

log = logging.getLogger(__name__)

SANDBOX_WORKDIR = "/sandbox"
UNPRIVILEGED_UID_BASE = 61000
UIDS_PER_BACKEND = 16
"""Sandbox uids (worker slots) of one local backend: uid = base + 16 * block + worker index."""
_PASS_THROUGH = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TZ")


@dataclass(frozen=True)
class IsolationInfo:
    """What isolation is available here."""

    level: str
    """``bwrap`` (full), ``unshare`` (namespaces, no file-system isolation) or ``none``."""
    drops_uid: bool
    """Whether candidates run under an unprivileged uid."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """Human-readable gaps, logged once per process."""


def _works(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@cache
def detect_isolation() -> IsolationInfo:
    """Probe bwrap / unshare once per process and log what is missing.

    Inside an evobench container image (``EVOBENCH_ISOLATION=container``) the container is the
    outer sandbox (no network, read-only root, capability-dropped) and candidates run under a
    separate unprivileged uid that cannot read the root-only scorer and data directories.
    """
    root = os.geteuid() == 0
    if os.environ.get("EVOBENCH_ISOLATION") == "container" and root:
        return IsolationInfo("container", drops_uid=True)
    if os.environ.get("EVOBENCH_NO_BWRAP") != "1" and shutil.which("bwrap"):
        probe = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "true",
        ]
        if _works(probe):
            return IsolationInfo("bwrap", drops_uid=True)
    warnings = [
        "bubblewrap (bwrap) is unavailable: candidates can read any file this user can read; "
        "install it (Debian: apt-get install bubblewrap) for file-system isolation"
    ]
    unshare = (
        ["unshare", "--net", "--pid", "--fork", "--kill-child"]
        if root
        else ["unshare", "--map-root-user", "--net", "--pid", "--fork", "--kill-child"]
    )
    if shutil.which("unshare") and _works([*unshare, "true"]):
        info = IsolationInfo(
            "unshare", drops_uid=False, warnings=(*warnings, "candidates keep this user's uid")
        )
    else:
        info = IsolationInfo(
            "none",
            drops_uid=False,
            warnings=(*warnings, "no network namespace: candidates can reach the network"),
        )
    for w in info.warnings:
        log.warning("sandbox: %s", w)
    return info


def candidate_env(cpus: float, extra: dict[str, str] | None = None) -> dict[str, str]:
    """An allow-listed environment for candidates: no keys, tokens or credentials can pass.

    ``PATH`` holds the system's directories and this interpreter's (where pip puts ``ninja``, which
    ``torch.utils.cpp_extension.load_inline`` needs); GPU variants add the CUDA toolkit's
    (:func:`sandbox_env`).
    """
    threads = str(max(1, int(cpus)))
    env = {
        "PATH": f"/usr/local/bin:/usr/bin:/bin:{interpreter_bin()}",
        "HOME": SANDBOX_WORKDIR,
        "USER": SANDBOX_USER,
        "LOGNAME": SANDBOX_USER,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
    }
    env.update({k: os.environ[k] for k in _PASS_THROUGH if k in os.environ})
    env.update(extra or {})
    return env


def worker_slot(uid: int) -> int:
    """The worker index a sandbox uid belongs to (GPUs are handed out by it)."""
    return max(0, uid - UNPRIVILEGED_UID_BASE) % UIDS_PER_BACKEND


def sandbox_gpus(hw: Hardware, uid: int) -> GpuAccess | None:
    """The GPUs of the sandbox of ``uid`` for a variant with ``hw`` (None: no GPU access).

    Raises:
        InfraError: If the machine has GPUs but fewer than the variant requests.
    """
    if hw.gpu_count <= 0:
        return None
    # Hidden paths matter only for bwrap's binds; computing them imports the environments
    # package, which a container's forked candidate zygote must not hold.
    hidden = hidden_paths() if detect_isolation().level == "bwrap" else []
    return gpu_access(hw, worker_slot(uid), hidden=hidden)


def sandbox_env(hw: Hardware, uid: int) -> dict[str, str]:
    """``candidate_env`` plus, for GPU variants, the sandbox's GPU variables (see ``gpus``).

    Raises:
        InfraError: If the machine has GPUs but fewer than the variant requests.
    """
    access = sandbox_gpus(hw, uid)
    if access is None:
        # Without a GPU, Triton can only run in its interpreter (on CPU tensors): tiny variants
        # then run Triton submissions too (slowly; their times are labelled CPU times).
        return candidate_env(hw.cpus, {"TRITON_INTERPRET": "1"})
    level = detect_isolation().level
    # bwrap binds only the assigned nodes and a container holds only its own GPUs: the candidate
    # sees them as 0..k-1. Elsewhere every GPU is visible and host numbers select them.
    extra = access.env if level in ("bwrap", "container") else unshared_gpu_env(access)
    env = candidate_env(hw.cpus, extra)
    home = cuda_home()
    if home is not None:  # nvcc for load_inline / cpp_extension builds (bound by bwrap_prefix)
        env["CUDA_HOME"] = home
        env["PATH"] += f":{home}/bin"
    return env


def rlimits(hw: Hardware, cpu_seconds: float | None = None, memory_mb: int | None = None) -> dict[str, int]:
    """Resource limits (``resource`` names -> value) for one candidate process tree.

    Memory is never limited by address space (``RLIMIT_AS`` breaks CUDA builds of torch, which
    reserve many GiB they never touch): a per-candidate cgroup limits it, else ``RLIMIT_DATA``
    appears here (see :mod:`harness.sandbox.limits`).
    """
    lim = {
        "RLIMIT_FSIZE": hw.file_mb * 1024 * 1024,
        "RLIMIT_CORE": 0,
        **data_rlimit(memory_mb or hw.memory_mb),
    }
    if os.geteuid() == 0 and detect_isolation().drops_uid:
        # Counted per real uid: only meaningful once the candidate has its own uid.
        lim["RLIMIT_NPROC"] = hw.pids
    if cpu_seconds is not None:
        lim["RLIMIT_CPU"] = max(1, int(cpu_seconds + 0.999))
    return lim


def preexec(limits: dict[str, int]) -> Callable[[], None]:
    """A ``preexec_fn`` applying rlimits in the child before exec (bwrap inherits them)."""

    def _apply() -> None:
        for name, value in limits.items():
            if name == "RLIMIT_NPROC":
                continue  # applied after the uid switch, by setpriv's caller below
            # CPU: SIGXCPU at the soft limit tells a CPU-limit death apart from other kills.
            hard = value + 1 if name == "RLIMIT_CPU" else value
            resource.setrlimit(getattr(resource, name), (value, hard))

    return _apply


def _python_roots() -> list[Path]:
    roots = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.exec_prefix)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(Path(p))
    return [r.resolve() for r in roots if r.exists()]


def hidden_paths() -> list[Path]:
    """Paths a candidate must never see, masked with tmpfs when a bind would expose them."""
    from harness.envs.data import data_root
    from harness.envs.external import external_roots
    from harness.envs.registry import environments_root

    builtin = environments_root()
    paths = [
        builtin,
        *external_roots(builtin),  # families outside the repository: their scorers are as secret
        Path(__file__).resolve().parents[1],
        data_root(),
        Path.home(),
        Path.cwd() / "results",
    ]
    for var in ("EVOBENCH_RESULTS", "EVOBENCH_LEADERBOARDS"):
        if os.environ.get(var):
            paths.append(Path(os.environ[var]))
    return [p.resolve() for p in paths]


class _Layout:
    """Builds bind arguments, creating parent directories 0755 (bwrap would make them 0700)."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self._made: set[str] = {"/", "/tmp", "/dev", "/proc", "/dev/shm"}
        self._bound: list[str] = []

    def _parents(self, dest: str) -> None:
        parts = Path(dest).parts
        for i in range(2, len(parts)):
            d = str(Path(*parts[:i]))
            if d in self._made or any(Path(d).is_relative_to(b) for b in self._bound):
                continue
            self.args += ["--perms", "0755", "--dir", d]
            self._made.add(d)

    def bind(self, flag: str, src: str, dest: str) -> None:
        self._parents(dest)
        self.args += [flag, src, dest]
        self._bound.append(dest)
        self._made.add(dest)

    def symlink(self, target: str, dest: str) -> None:
        self.args += ["--symlink", target, dest]
        self._made.add(dest)


def _bind_args(layout: _Layout, extra_ro: list[Path], size: list[str]) -> None:
    for d in ("/usr", "/etc", "/opt/wheels"):
        if os.path.isdir(d):
            layout.bind("--ro-bind", d, d)
    for d in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(d):
            layout.symlink(os.readlink(d), d)
        elif os.path.isdir(d):
            layout.bind("--ro-bind", d, d)
    layout.bind("--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu")
    bound = sorted({*_python_roots(), *extra_ro}, key=lambda p: len(str(p)))
    for r in bound:
        if not any(r.is_relative_to(b) and r != b for b in bound):
            layout.bind("--ro-bind", str(r), str(r))
    for h in hidden_paths():
        if h.exists() and any(h.is_relative_to(b) for b in bound):
            layout.args += [*size, "--tmpfs", str(h)]


def bwrap_prefix(
    *,
    workdir: Path | None,
    uid: int,
    extra_ro: list[Path] | None = None,
    gpus: GpuAccess | None = None,
    dev_root: Path = Path("/dev"),
    disk_mb: int | None = None,
    fresh: tuple[str, ...] | None = None,
) -> list[str]:
    """The ``bwrap ... --`` prefix for one sandboxed process.

    Every tmpfs it mounts (``/tmp``, ``/dev/shm``, an empty ``/sandbox``, the masks over hidden
    paths) holds at most ``disk_mb`` MiB: the candidate's disk quota (see :mod:`.limits.disk`).

    Args:
        workdir: Host directory bound read-write at ``/sandbox`` (None: an empty tmpfs there).
        uid: Unprivileged uid to switch to when running as root.
        extra_ro: More host paths to bind read-only at the same place.
        gpus: GPU device nodes and driver paths to expose (None: the sandbox's ``/dev`` has no GPU).
        dev_root: The host device directory ``gpus`` was read from (a fake tree in tests).
        disk_mb: Size of each tmpfs, MiB (None: unsized).
        fresh: Instead of binding ``workdir`` writable, make ``/sandbox`` a fresh empty tmpfs
            holding these files of ``workdir`` read-only (plain names, no path separators).

    Raises:
        ValueError: If a ``fresh`` name is not a plain file name.
    """
    args = [
        "bwrap",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    size = ["--size", str(disk_mb * 1024 * 1024)] if disk_mb is not None else []
    # Scratch mounts first: a later bind (e.g. a venv under /tmp) must stay visible on top of them.
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", *size, "--tmpfs", "/tmp", "--perms", "1777", *size, "--tmpfs", "/dev/shm"]
    layout = _Layout()
    _bind_args(layout, list(extra_ro or []), size)
    if gpus is not None:
        for flag, src, dest in gpu_binds(gpus, dev_root):
            layout.bind(flag, src, dest)
        home = cuda_home()
        if home is not None and not Path(home).resolve().is_relative_to("/usr"):
            layout.bind("--ro-bind", str(Path(home).resolve()), home)  # the toolkit, for nvcc
    if workdir is not None and fresh is None:
        layout.bind("--bind", str(workdir), SANDBOX_WORKDIR)
    else:
        layout.args += ["--perms", "0777", *size, "--tmpfs", SANDBOX_WORKDIR]
        for name in fresh or ():
            if workdir is None or not name or "/" in name or name in (".", ".."):
                raise ValueError(f"fresh working directory: {name!r} is not a file name of the workdir")
            layout.bind("--ro-bind", str(workdir / name), f"{SANDBOX_WORKDIR}/{name}")
    # The inside package alone (no trusted module): ``harness`` is a namespace package there.
    layout.bind("--ro-bind", str(inside_dir()), f"{INSIDE_ROOT_IN_SANDBOX}/harness/inside")
    args += layout.args
    args += ["--chdir", SANDBOX_WORKDIR]
    if os.geteuid() == 0:
        args += [
            "--",
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
    else:
        args += ["--cap-drop", "ALL", "--"]
    return args


def sandbox_command(
    argv: list[str],
    *,
    workdir: Path | None,
    uid: int,
    hw: Hardware,
    extra_ro: list[Path] | None = None,
    nproc: int | None = None,
    fresh: tuple[str, ...] | None = None,
) -> list[str]:
    """Wrap ``argv`` for the best isolation available (see module docstring).

    Under bubblewrap every tmpfs of the sandbox holds at most ``hw.disk_mb`` MiB, and ``fresh``
    (see :func:`bwrap_prefix`) runs the command in a fresh empty ``/sandbox`` holding those files
    of ``workdir`` read-only. Other levels cannot make a fresh directory: the caller does (see
    ``SandboxedCandidate.run``), and passes it as ``workdir``.

    ``argv[0]`` may be ``{python}`` (the current interpreter) and ``{inside}`` names the root of the
    inside package as the sandbox sees it (see :mod:`.launch`). Every
    command runs under :mod:`.syscall_filter` (no locks, inotify or keyrings shared between
    sandboxes): the shim installs it first thing, any other command is started through it. A
    GPU variant's bubblewrap sandbox gets its worker slot's GPUs (see :mod:`.gpus`); run it with
    ``env=sandbox_env(hw, uid)``.

    Raises:
        InfraError: If the machine has GPUs but fewer than the variant requests.
    """
    info = detect_isolation()
    py = sys.executable
    if not is_shim(argv):  # the shim installs the filter itself
        argv = module_argv(FILTER_MODULE, *argv)
    if info.level == "bwrap":
        argv = fill(argv, py, INSIDE_ROOT_IN_SANDBOX)
        prefix = bwrap_prefix(
            workdir=workdir,
            uid=uid,
            extra_ro=extra_ro,
            gpus=sandbox_gpus(hw, uid),
            disk_mb=hw.disk_mb,
            fresh=fresh,
        )
        if nproc is not None and os.geteuid() == 0:
            prefix += ["prlimit", f"--nproc={nproc}", "--"]
        return prefix + argv
    argv = fill(argv, py, str(project_root()))
    if info.level == "container":
        # No CAP_SETPCAP in the container, so the bounding set is left as docker dropped it.
        pre = [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--no-new-privs",
        ]
        if nproc is not None:
            pre += ["prlimit", f"--nproc={nproc}", "--"]
        return [*pre, *argv]
    if info.level == "unshare":
        root = os.geteuid() == 0
        pre = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if not root:
            pre.insert(1, "--map-root-user")
        return [*pre, "--", *argv]
    return argv


@dataclass(frozen=True)
class ZygotePolicy:
    """Where a warm zygote works and how it cleans up after each candidate."""

    cwd: Path | None
    """Working directory of the zygote (None: the sandbox's /sandbox)."""
    scratch: tuple[str, ...]
    """Directories wiped after each candidate (what the zygote's uid owns) and then checked against
    the zygote's baseline; anything left retires the zygote (``inside.scrub.Baseline``, ``Zygote.reap``)."""
    reap: str
    """``all`` (kill every visible process of the zygote's uid but pid 1 and the zygote, and remove
    the uid's SysV IPC objects) or ``group`` (the child's group; the uid is not the candidates' alone)."""


def zygote_policy(scratch_root: Path) -> ZygotePolicy:
    """The safe cleanup policy for this isolation level.

    ``all`` is used only where it cannot hit anything but candidates: in bwrap's private PID
    namespace, or in a container where the zygote's uid belongs to candidates alone.
    """
    level = detect_isolation().level
    if level == "bwrap":
        return ZygotePolicy(None, (SANDBOX_WORKDIR, "/tmp", "/dev/shm"), "all")
    if level == "container":
        return ZygotePolicy(Path(SANDBOX_WORKDIR), (SANDBOX_WORKDIR, "/tmp", "/dev/shm"), "all")
    return ZygotePolicy(scratch_root, (str(scratch_root),), "group")


def kill_uid(uid: int) -> int:
    """SIGKILL every process running under ``uid`` (a candidate-only uid); returns how many.

    Used where candidates share no PID namespace with nothing else (inside a container): a
    grandchild that called ``setsid`` escapes its process group but not its uid.
    """
    import signal

    if uid == 0 or uid == os.geteuid():
        raise ValueError("refusing to kill every process of the harness's own uid")
    killed = 0
    for _ in range(5):
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                os.kill(int(name), signal.SIGKILL)
                found += 1
            except OSError:
                continue
        killed += found
        if not found:
            break
    return killed
