"""The bandit test instrument through the real sandbox, ``bench eval`` and ``bench run``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend

BENCH = [sys.executable, "-m", "evobench.cli.main"]


@pytest.fixture(scope="module")
def variant() -> Variant:
    return default_registry().get("selftest-bandit")


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(workers=1, mode="warm") as b:
        yield b


def _program(variant: Variant, literal: str) -> str:
    src = variant.initial_program
    assert src.count('CHOICE = "a"') == 1
    return src.replace('CHOICE = "a"', f"CHOICE = {literal}")


def test_manifest_labels_it_a_test_instrument(variant: Variant) -> None:
    assert variant.tiny and variant.maximize and variant.preload == ()
    assert variant.description.startswith("TEST INSTRUMENT (not a benchmark)")
    assert "NOT a benchmark" in variant.prompt and "set `CHOICE`" in variant.prompt
    assert (variant.progress.y_init, variant.progress.y_target) == (0.0, 1.0)
    assert variant.timeout_s <= 10


def test_initial_program_scores_the_floor(backend: LocalBackend, variant: Variant) -> None:
    res = backend.evaluate(variant, variant.initial_program)
    assert res.status is Status.OK, res.reason
    assert res.score == 0.0 and res.metrics == {"score": 0.0, "arm": 1.0, "length": 1.0}


@pytest.mark.parametrize(
    ("literal", "status", "score"),
    [
        ("'good'", Status.OK, 1.0),
        ("'d'", Status.OK, 0.6),
        ("''", Status.OK, 0.0),
        ("'g' * 10_001", Status.INVALID, None),
        ("7", Status.INVALID, None),
        ("None", Status.INVALID, None),
    ],
)
def test_choices_through_the_sandbox(
    backend: LocalBackend, variant: Variant, literal: str, status: Status, score: float | None
) -> None:
    res = backend.evaluate(variant, _program(variant, literal))
    assert res.status is status, res.reason
    assert res.score == score


def test_bench_eval_cold(tmp_path: Path, variant: Variant) -> None:
    prog = tmp_path / "p.py"
    prog.write_text(_program(variant, "'orange'"))
    r = subprocess.run(
        [*BENCH, "eval", "--env", "selftest-bandit", str(prog), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "ok" and res["score"] == 1.0 and res["metrics"]["arm"] == 7.0


def test_random_search_run_completes(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            *BENCH,
            "run",
            "--agent",
            "random-search",
            "--env",
            "selftest-bandit",
            "--max-evaluations",
            "10",
            "--seed",
            "1",
            "--workers",
            "2",
            "--no-progress",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = [d for d in (tmp_path / "results").iterdir() if d.is_dir()]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    cands = pd.read_parquet(run_dir / "candidates.parquet")
    assert len(cands) == 10 and (cands["status"] == "ok").all()
    # random-choice changes CHOICE in every child, so the arms vary; every score is a table entry
    assert cands["score"].nunique() > 1
    assert set(cands["score"]) <= {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.0}
