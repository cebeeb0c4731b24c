"""The synthetic run stores of tests/harness/compare (real parquet files in the real layout), shared."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "_compare_conftest", Path(__file__).parents[1] / "compare" / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compare)
Store = _compare.Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path)
