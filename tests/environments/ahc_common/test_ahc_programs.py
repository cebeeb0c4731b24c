"""Checks shared by the AHC families: every mutation operator keeps the C++ program compilable."""

from __future__ import annotations

import importlib
import random
import subprocess
from pathlib import Path

import pytest

from harness.envs.registry import default_registry


@pytest.mark.parametrize("family", ["ahc039", "ahc058"])
def test_mutated_initial_program_compiles(family: str, tmp_path: Path) -> None:
    operators = importlib.import_module(f"environments.{family}.mutations").operators
    source = default_registry().get(family).initial_program
    rng = random.Random(1)
    for op in operators():  # every operator at once, each with a random replacement
        mutated = op.apply(source, rng, "cpp")
        assert mutated is not None, op.name
        source = mutated
    (tmp_path / "main.cpp").write_text(source)
    r = subprocess.run(
        ["g++", "-std=c++20", "-fsyntax-only", "main.cpp"], cwd=tmp_path, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
