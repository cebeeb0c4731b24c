"""Parallel runs start the longest modules first; only the order changes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from .scheduling import MEASURED, checked_in, order_longest_first


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
