"""Shared fixtures: CI strictness for docker tests, isolated results / leaderboard dirs, shared backends."""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.sandbox.local import LocalBackend

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# One held-out key for the whole suite (and the `bench` processes it starts): secret-keyed tiny
# draws, and so their scores, are then the same on every machine and CI runner. Tests of the key
# itself unset it. A developer's own key, where set, is kept.
TEST_HELDOUT_KEY = "7e57" * 16
os.environ.setdefault("EVOBENCH_HELDOUT_KEY", TEST_HELDOUT_KEY)

# A suite started in the background (`pytest ... &` in a script) inherits SIGINT ignored, and so
# would every `bench run` a test interrupts with Ctrl-C (Python keeps an ignored SIGINT ignored).
# Tests act as a user at a terminal: the handler is Python's own, which a child resets to default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# --- Tiers: automatic `sandbox` / `run` markers, and a guard in the fast tier ----------------------
# A test needs `sandbox` when it (or a fixture or module helper it uses) names one of these; `run`
# when it drives an agent run (in-process or `bench run`). Marked `run` implies `sandbox`.
_SANDBOX_NAMES = re.compile(
    r"\b(LocalBackend|DockerBackend|ModalBackend|FakeModalClient|make_backend|launch_cold|Zygote"
    r"|PreforkedZygote|SandboxedCandidate|WorkerState|run_job|init_worker|sandbox_command"
    r"|local_warm_backend|local_cold_backend|local_backend)\b"
    r"|[\[(,]\s*[\"']eval[\"']"  # `bench eval ...` through main([...]) or a subprocess
)
_RUN_NAMES = re.compile(r"\b(drive|run_agent|bench_run)\b|[\[(,]\s*[\"'](run|sweep)[\"']\s*,")
TIER_ENV = "EVOBENCH_TEST_TIER"


@functools.cache
def _module_defs(module: ModuleType) -> dict[str, str]:
    """Top-level function / class name -> source, for following a test into its module's helpers."""
    try:
        src = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    lines = src.splitlines()
    defs: dict[str, str] = {}
    for n in ast.parse(src).body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [n.name]
            first = min([n.lineno, *(d.lineno for d in n.decorator_list)])  # parametrize args count
        elif isinstance(n, ast.Assign | ast.AnnAssign):  # e.g. RUN = [*BENCH, "run", ...]
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names, first = [t.id for t in targets if isinstance(t, ast.Name)], n.lineno
        else:
            continue
        for name in names:
            defs[name] = "\n".join(lines[first - 1 : n.end_lineno])
    return defs


@functools.cache
def _func_markers(func: Callable[..., Any]) -> frozenset[str]:
    """The tier markers that ``func`` and the module-level helpers it reaches by name call for."""
    module = sys.modules.get(getattr(func, "__module__", "") or "")
    defs = _module_defs(module) if module is not None else {}
    top_level = getattr(func, "__qualname__", "") == func.__name__
    src = defs.get(func.__name__) if top_level else None
    if src is None:
        try:
            src = inspect.getsource(func)
        except (OSError, TypeError):
            return frozenset()
    seen: set[str] = set()
    todo, parts = [src], [src]
    while todo:
        for name in set(re.findall(r"\w+", todo.pop())) & defs.keys() - seen:
            seen.add(name)
            todo.append(defs[name])
            parts.append(defs[name])
    text = "\n".join(parts)
    if _RUN_NAMES.search(text):
        return frozenset({"run", "sandbox"})
    return frozenset({"sandbox"}) if _SANDBOX_NAMES.search(text) else frozenset()


def _tier_markers(item: pytest.Item) -> set[str]:
    """``sandbox`` / ``run`` for what the test, its fixtures and their helpers start."""
    found: set[str] = set()
    if isinstance(item, pytest.Function):
        found |= _func_markers(item.function)
        for defs in item._fixtureinfo.name2fixturedefs.values():
            for d in defs:
                found |= _func_markers(d.func)
    names = set(getattr(item, "fixturenames", ()))
    if "run_agent" in names:
        found |= {"run", "sandbox"}
    if names & {"local_warm_backend", "local_cold_backend", "local_backend"}:
        found.add("sandbox")
    return found


def _measured_slow() -> set[str]:
    """Node ids (without parameters) listed in ``tests/slow_tests.txt``."""
    path = Path(__file__).with_name("slow_tests.txt")
    lines = path.read_text().splitlines() if path.is_file() else []
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def _scheduling() -> ModuleType:
    """``tests/scheduling.py``, whether this conftest is the package's or a plain ``-p conftest``."""
    try:
        from . import scheduling
    except ImportError:  # loaded as a top-level plugin module, with tests/ on sys.path
        import scheduling  # type: ignore[no-redef]
    return scheduling


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the tier markers; skip docker / gpu tests where they cannot run (docker fails under CI=true).

    Also orders the modules longest first (``tests/scheduling.py``) for parallel runs.
    """
    _scheduling().order_longest_first(config, items)
    if os.environ.get(DOCKER_READY_ENV):  # the Docker setup runs beside the suite: its modules last
        _scheduling().modules_last(items, lambda it: it.get_closest_marker("docker") is not None)
    in_ci = os.environ.get("CI", "").lower() == "true"
    have_docker = shutil.which("docker") is not None and os.path.exists("/var/run/docker.sock")
    slow = _measured_slow()
    for item in items:
        found = _tier_markers(item) | ({"slow"} if item.nodeid.split("[")[0] in slow else set())
        for name in sorted(found - {m.name for m in item.iter_markers()}):
            item.add_marker(name)
        # Markers, not keywords: keywords hold every parent folder's name (a checkout in .../gpu).
        if item.get_closest_marker("docker") and not have_docker and not in_ci:
            item.add_marker(pytest.mark.skip(reason="no Docker daemon (set CI=true to make this a failure)"))
        if item.get_closest_marker("gpu"):
            try:
                import torch

                has_gpu = torch.cuda.is_available()
            except ImportError:
                has_gpu = False
            if not has_gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch cwd so runs write results/ and leaderboards/ there, not into the repo."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (real public data for tests); skipped when absent outside CI."""
    d = SHARED / "data"
    if not d.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{d} is missing in CI")
        pytest.skip(f"{d} not present")
    return d


def _shared_local_backend(mode: str) -> Iterator[LocalBackend]:
    """One ``LocalBackend(workers=1)`` for the whole session; a test's ``close()`` leaves it open."""
    from harness.sandbox.local import LocalBackend

    class SharedLocalBackend(LocalBackend):
        # Modules write ``with local_warm_backend as b:``; their exit must not close it for the rest.
        def close(self) -> None:
            pass

        def terminate(self) -> None:
            pass

    backend = SharedLocalBackend(workers=1, mode=mode)  # type: ignore[arg-type]
    try:
        yield backend
    finally:
        LocalBackend.close(backend)


@pytest.fixture(scope="session")
def local_warm_backend() -> Iterator[LocalBackend]:
    """The suite's warm-mode local backend (one worker), for plain evaluations.

    Tests of a backend's own lifecycle, limits or settings (workers, ``env_root``, retries) start
    their own instead.
    """
    yield from _shared_local_backend("warm")


@pytest.fixture(scope="session")
def local_cold_backend() -> Iterator[LocalBackend]:
    """The suite's cold-mode local backend (one worker); see ``local_warm_backend``."""
    yield from _shared_local_backend("cold")


class TierViolation(RuntimeError):
    """A fast-tier test started what its tier excludes; the message names the marker to add."""


_violations: list[str] = []


def _violation(marker: str, what: str) -> TierViolation:
    msg = (
        f"mark the test @pytest.mark.{marker}: {what} in the fast tier ({TIER_ENV}=fast) "
        "(or teach the automatic rules in tests/conftest.py the name it used)"
    )
    _violations.append(msg)
    return TierViolation(msg)


def _guard(owner: Any, attr: str, marker: str, what: str) -> None:
    """Replace ``owner.attr`` (and every module binding of it) with a function that refuses."""
    original = getattr(owner, attr)

    @functools.wraps(original)
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise _violation(marker, what)

    setattr(owner, attr, refuse)
    if isinstance(owner, ModuleType):  # `from x import f` copies already made
        for mod in list(sys.modules.values()):
            if getattr(mod, attr, None) is original:
                setattr(mod, attr, refuse)


_real_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    argv = [str(a) for a in args] if isinstance(args, list | tuple) else str(args).split()
    prog = Path(argv[0]).name if argv else ""
    cli = prog == "bench" or any(a.startswith(("harness.cli", "evobench.cli")) for a in argv[1:3])
    words = [a for a in argv[1:] if not a.startswith("-")]
    if cli and ("run" in words[:2] or "sweep" in words[:2]):
        raise _violation("run", f"`{' '.join(argv[:3])} ...` started an agent run")
    if cli and "eval" in words[:2]:
        raise _violation("sandbox", f"`{' '.join(argv[:3])} ...` started a sandbox")
    if prog == "docker" and words[:1] == ["run"]:
        raise _violation("docker", "`docker run` started a container")
    _real_popen_init(self, args, *rest, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    """Time each module (for the next run's order); in the fast tier, make starting a sandbox, a
    container or an agent run fail loudly."""
    if not hasattr(config, "workerinput"):  # the controller sees every process's reports
        config.pluginmanager.register(_scheduling().ModuleTimer(config), "evobench-module-timer")
    if os.environ.get(TIER_ENV) != "fast":
        return
    from harness.runner import runner
    from harness.sandbox import isolation
    from harness.sandbox.local import LocalBackend
    from harness.sandbox.remote_pool import RemotePoolBackend

    # Pool workers are spawned interpreters (no conftest there): refuse before the pool exists.
    _guard(LocalBackend, "_get_pool", "sandbox", "a LocalBackend started its workers")
    _guard(RemotePoolBackend, "submit", "sandbox", "a remote backend started an evaluation")
    _guard(isolation, "sandbox_command", "sandbox", "a sandbox was started")
    _guard(runner, "drive", "run", "an agent run was driven")
    subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]


DOCKER_READY_ENV = "EVOBENCH_DOCKER_READY"
"""Set by scripts/test.sh under CI: the file where the Docker setup beside the suite writes its exit code."""
DOCKER_WAIT_S = 1800.0


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A Docker test waits for the setup that runs beside the suite, and fails if the setup failed."""
    ready = os.environ.get(DOCKER_READY_ENV)
    if not ready or item.get_closest_marker("docker") is None:
        return
    deadline = time.monotonic() + DOCKER_WAIT_S
    while not os.path.exists(ready):
        if time.monotonic() > deadline:
            pytest.fail(f"scripts/docker-setup.sh did not finish within {DOCKER_WAIT_S:.0f} s", pytrace=False)
        time.sleep(1.0)
    code = open(ready, encoding="utf-8").read().strip()
    if code != "0":
        pytest.fail(f"scripts/docker-setup.sh failed (exit {code}); its log ends the output", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail a fast-tier test that hit a guard even where product code swallowed the error."""
    _violations.clear()
    result = None
    try:
        result = yield
    except BaseException:
        if not _violations:
            raise
    if _violations:
        msg = f"{item.nodeid}: {_violations[0]}"
        _violations.clear()
        pytest.fail(msg, pytrace=False)
    return result
