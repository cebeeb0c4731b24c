"""What AHC039 and AHC058 share, checked once for both: mutation operators, the fetched input set,
compile errors in the sandbox and ``bench eval`` of the initial program (real g++, real sandbox).

What is specific to one contest (its generator, judge, hostile per-case programs) stays in
``tests/environments/ahc039`` and ``tests/environments/ahc058``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.envs.data import family_data_dir, fetch_source
from harness.envs.data_import import import_data
from harness.envs.registry import default_registry
from harness.evaluation.result import Status
from harness.program.blocks import parse_program
from harness.program.mutate import mutate

from ..family_support import evaluate

REPO = Path(__file__).resolve().parents[3]
BENCH = [sys.executable, "-m", "evobench.cli.main"]
FAMILIES = ["ahc039", "ahc058"]
# A program that does not compile, and a word of the compiler's message the reason must show.
COMPILE_ERRORS = {
    "ahc039": ("int main() { return undeclared_thing; }\n", "undeclared_thing"),
    "ahc058": ("#include <cstdio>\nint main() { std::puts(42) }\n", "main.cpp"),
}
# The initial program's AtCoder total on the tiny variant's 4 cases and on the full variant's 150
# public inputs.
TINY_TOTALS = {"ahc039": 1709, "ahc058": 10884174}
FULL_TOTALS = {"ahc039": 283816, "ahc058": 417257918}

needs_gpp = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def shared_inputs(family: str) -> Path:
    return REPO.parent / "shared" / "data" / "ahc" / family / "inputs"


@pytest.mark.parametrize("family", FAMILIES)
def test_mutation_operators_apply_inside_the_block(family: str) -> None:
    variant = default_registry().get(family)
    program = variant.initial_program
    parse_program(program, "cpp")  # the markers are well formed
    operators = variant.load_attr(variant.mutations_ref)
    rng = random.Random(0)
    for op in operators():
        mutated = op.apply(program, rng, "cpp")
        assert mutated is not None and mutated != program, op.name
    assert mutate(program, rng, "cpp", operators()) is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_fetched_file_set_is_what_the_scorer_reads(
    family: str, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variant = default_registry().get(family)
    ((_, source),) = variant.data
    folder = shared_data / "ahc" / family / "inputs"
    fetched: list[str] = []

    def download(url: str, dest: Path) -> None:  # stands in for the network
        assert url.startswith(source.url + "/")
        name = url.rsplit("/", 1)[1]
        fetched.append(name)
        dest.write_bytes((folder / name).read_bytes())

    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path))
    fetch_source(family, source, download=download)
    assert sorted(fetched) == sorted(source.files)
    scorer = variant.load_attr(variant.scorer_ref)(variant, family_data_dir(family))
    scorer.prepare()
    assert [c.name for c in scorer.cases] == sorted(source.files)


@needs_gpp
@pytest.mark.parametrize("family", FAMILIES)
def test_compile_error_shows_the_compiler_message(local_backend: object, family: str) -> None:
    source, word = COMPILE_ERRORS[family]
    result = evaluate(local_backend, default_registry().get(f"{family}-tiny"), source)
    assert result.status is Status.ERROR
    assert "compile error" in result.reason and word in result.reason


def bench_eval(family: str, env_id: str, cwd: Path, data_root: Path) -> dict:
    prog = REPO / "environments" / family / "initial_program.cpp"
    r = subprocess.run(
        [*BENCH, "eval", "--env", env_id, str(prog), "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "EVOBENCH_DATA": str(data_root)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


@needs_gpp
@pytest.mark.parametrize("family", FAMILIES)
def test_initial_program_via_bench_eval_tiny(family: str, tmp_path: Path) -> None:
    tiny = default_registry().get(f"{family}-tiny")
    res = bench_eval(family, tiny.id, tmp_path, tmp_path / "data")
    assert res["status"] == "ok"
    assert res["metrics"]["cases_ok"] == 4
    assert res["score"] == pytest.approx(tiny.progress.y_init)  # deterministic program, pinned bound
    cases = res["cases"]  # per-case records in --json
    assert [c["status"] for c in cases] == ["ok"] * 4
    assert sum(c["score"] for c in cases) == res["metrics"]["total_score"] == TINY_TOTALS[family]
    assert all(0 < c["cpu_seconds"] < 2.0 and c["wall_seconds"] > 0 for c in cases)


@needs_gpp
@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_initial_program_via_bench_eval_full(family: str, tmp_path: Path) -> None:
    if not shared_inputs(family).is_dir():
        pytest.skip(f"{shared_inputs(family)} not present")
    root = tmp_path / "data"
    with pytest.MonkeyPatch.context() as mp:  # installed as users do offline: sha256-checked
        mp.setenv("EVOBENCH_DATA", str(root))
        import_data(family, shared_inputs(family))
    full = default_registry().get(family)
    res = bench_eval(family, family, tmp_path, root)
    assert res["status"] == "ok"
    assert res["metrics"]["cases_ok"] == 150
    assert res["score"] == pytest.approx(full.progress.y_init, abs=1e-3)
    assert res["metrics"]["total_score"] == FULL_TOTALS[family]
