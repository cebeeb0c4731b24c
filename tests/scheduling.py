"""Longest modules first: how a parallel run (pytest-xdist, whole modules per process) ends together.

xdist hands modules to its processes in collection order (``--no-loadscope-reorder``; its default
puts the modules with the most tests first, so a one-test module of ten minutes started last and
ran alone at the end). Here the collection is ordered by each module's measured duration, longest
first: the durations of the last full run (pytest's cache, ``evobench/module_seconds``), else
``tests/module_seconds.txt`` (checked in, from a CI run: a fresh clone has no cache). Modules
never measured keep their place after the measured ones. Only the order changes, never what runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

CACHE_KEY = "evobench/module_seconds"
MEASURED = Path(__file__).with_name("module_seconds.txt")


def checked_in() -> dict[str, float]:
    """``tests/module_seconds.txt``: ``<seconds> <module path>`` lines (``#`` comments)."""
    out: dict[str, float] = {}
    lines = MEASURED.read_text(encoding="utf-8").splitlines() if MEASURED.is_file() else []
    for ln in lines:
        parts = ln.split()
        if len(parts) == 2 and not ln.startswith("#"):
            out[parts[1]] = float(parts[0])
    return out


def module_seconds(config: pytest.Config) -> dict[str, float]:
    """The measured seconds per module: the cache's where it has them, else the checked-in file's."""
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    cached = cache.get(CACHE_KEY, {}) if cache is not None else {}
    return {**checked_in(), **(cached if isinstance(cached, dict) else {})}


def order_longest_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: modules by measured seconds (descending), tests within kept."""
    seconds = module_seconds(config)
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::")[0], i)
    items.sort(key=lambda it: (-seconds.get(m := it.nodeid.split("::")[0], 0.0), first_seen[m]))


def modules_last(items: list[pytest.Item], late: Callable[[pytest.Item], bool]) -> None:
    """Move the modules holding any ``late`` item after the others, in place (orders otherwise kept).

    Used while the Docker setup runs beside the suite: modules with Docker tests start last, when
    it has most likely finished, instead of holding a worker while they wait for it.
    """
    late_modules = {it.nodeid.split("::")[0] for it in items if late(it)}
    items.sort(key=lambda it: it.nodeid.split("::")[0] in late_modules)


class ModuleTimer:
    """Sums each module's test durations (setup, call, teardown) as reports arrive; saved at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is None or not self.seconds:
            return
        old = cache.get(CACHE_KEY, {})
        fresh = {k: round(v, 1) for k, v in self.seconds.items()}
        merged = {**(old if isinstance(old, dict) else {}), **fresh}
        cache.set(CACHE_KEY, merged)


def main() -> None:
    """Print the cache's module seconds in ``tests/module_seconds.txt``'s format (longest first)."""
    import json

    root = Path(__file__).resolve().parent.parent
    cache = root / ".pytest_cache" / "v" / CACHE_KEY
    seconds: dict[str, float] = json.loads(cache.read_text()) if cache.is_file() else checked_in()
    for ln in MEASURED.read_text(encoding="utf-8").splitlines():
        if ln.startswith("#"):
            print(ln)  # the file's header
    for module, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        if s >= 5:
            print(f"{s:.0f} {module}")


if __name__ == "__main__":
    main()
