"""Parallel runs start the longest modules first; only the order changes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from .conftest import DOCKER_READY_ENV, pytest_runtest_setup
from .scheduling import MEASURED, checked_in, modules_last, order_longest_first


class FakeCache:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def get(self, key: str, default: Any) -> Any:
        return self.data.get(key, default)


def test_longest_modules_first_tests_within_a_module_keep_their_order() -> None:
    ids = ["a.py::t1", "a.py::t2", "b.py::t1", "c.py::t1", "c.py::t2", "d.py::t1"]
    items: list[Any] = [SimpleNamespace(nodeid=i) for i in ids]
    config: Any = SimpleNamespace(cache=FakeCache({"evobench/module_seconds": {"c.py": 50.0, "b.py": 9.0}}))
    order_longest_first(config, items)
    # c and b measured (longest first); a and d never measured keep their collection order after them.
    want = ["c.py::t1", "c.py::t2", "b.py::t1", "a.py::t1", "a.py::t2", "d.py::t1"]
    assert [i.nodeid for i in items] == want


def test_the_checked_in_figures_name_modules_that_exist() -> None:
    seconds = checked_in()
    assert seconds, MEASURED
    root = MEASURED.parent.parent
    missing = [m for m in seconds if not (root / m).is_file()]
    assert not missing, f"{MEASURED.name} names modules that are gone: {missing}"


def test_modules_with_a_late_test_go_last_whole_and_in_order() -> None:
    ids = ["c.py::t1", "c.py::d", "b.py::t1", "a.py::d", "a.py::t2", "e.py::t1"]
    items: list[Any] = [SimpleNamespace(nodeid=i) for i in ids]
    modules_last(items, lambda it: it.nodeid.endswith("::d"))
    assert [i.nodeid for i in items] == ["b.py::t1", "e.py::t1", "c.py::t1", "c.py::d", "a.py::d", "a.py::t2"]


class _Item:
    def __init__(self, docker: bool) -> None:
        self.docker = docker

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "docker" and self.docker else None


def test_a_docker_test_waits_for_the_setup_beside_the_suite_and_fails_with_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready = tmp_path / "ready"
    monkeypatch.setenv(DOCKER_READY_ENV, str(ready))
    pytest_runtest_setup(_Item(docker=False))  # not a Docker test: no wait (the file does not exist)
    ready.write_text("0\n")
    pytest_runtest_setup(_Item(docker=True))  # the setup succeeded: the test goes on
    ready.write_text("1\n")
    with pytest.raises(pytest.fail.Exception, match=r"docker-setup.sh failed \(exit 1\)"):
        pytest_runtest_setup(_Item(docker=True))
