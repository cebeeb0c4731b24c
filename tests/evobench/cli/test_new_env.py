"""``bench new-env`` as a user runs it: a skeleton written outside the repository is listed, scores
``ok`` and runs random-search once ``EVOBENCH_ENV_PATH`` names its directory; bad input is refused
with one line and exit 2; a wrong scorer reference is reported by ``bench envs``.

The commands run in this process (``main``): a fresh ``bench`` process per command would cost a
CLI import each; the evaluations still run in the real sandbox's worker processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evobench.cli.main import main
from harness.envs.external import PATH_VAR
from harness.envs.registry import default_registry
from harness.envs.skeleton import Y_INIT_TINY


@pytest.fixture
def bench(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A scratch cwd with no ``EVOBENCH_ENV_PATH``; the registry is reloaded around the test."""
    monkeypatch.delenv(PATH_VAR, raising=False)
    default_registry.cache_clear()
    yield workdir
    default_registry.cache_clear()


def _use_path(monkeypatch: pytest.MonkeyPatch, envs: Path) -> None:
    monkeypatch.setenv(PATH_VAR, str(envs))  # inherited by the backend's worker processes
    default_registry.cache_clear()


def _edited_family(bench: Path, file: str, old: str, new: str) -> tuple[Path, Path]:
    """``bench new-env toy_fit`` in ``bench/envs`` with one edit of one file: (envs, that file)."""
    envs = bench / "envs"
    assert main(["new-env", "toy_fit", "--dir", str(envs)]) == 0
    path = envs / "toy_fit" / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return envs, path


def test_a_new_environment_outside_the_repository_evaluates_and_runs(
    bench: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    envs = bench / "my-envs"
    assert main(["new-env", "toy_fit", "--dir", str(envs)]) == 0
    assert f"export {PATH_VAR}={envs}" in capsys.readouterr().out  # the setting the guide names too
    program = envs / "toy_fit" / "initial_program.py"
    assert main(["eval", str(program), "--env", "toy-fit-tiny"]) == 2  # not found by accident
    assert "unknown environment 'toy-fit-tiny'" in capsys.readouterr().err
    _use_path(monkeypatch, envs)
    assert main(["envs", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["toy-fit-tiny"]["tiny"] and rows["toy-fit"]["family"] == "toy_fit" and "eplb-tiny" in rows
    assert main(["eval", str(program), "--env", "toy-fit-tiny", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["status"] == "ok" and res["score"] == pytest.approx(Y_INIT_TINY, rel=1e-12)
    argv = ["run", "--agent", "random-search", "--env", "toy-fit-tiny", "--max-evaluations", "3"]
    assert main([*argv, "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "finished: 3 evaluations" in out and "failed 0" in out, out


@pytest.mark.parametrize(
    ("name", "needle"),
    [("Toy", "invalid environment name 'Toy'"), ("selftest", "clash"), ("toy_fit", "already exists")],
)
def test_bad_names_and_existing_folders_are_refused_with_one_line(
    bench: Path, capsys: pytest.CaptureFixture[str], name: str, needle: str
) -> None:
    (bench / "toy_fit").mkdir()
    assert main(["new-env", name, "--dir", str(bench)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in bench.iterdir()) == ["toy_fit"]


def test_bench_envs_names_the_file_and_key_of_a_wrong_scorer_reference(
    bench: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    envs, toml = _edited_family(
        bench, "env.toml", 'scorer = "scorer:ToyFitScorer"', 'scorer = "scorer:ToyFit"'
    )
    _use_path(monkeypatch, envs)
    capsys.readouterr()
    assert main(["envs"]) == 1
    err = capsys.readouterr().err.replace("\n", "")
    assert f"{toml}: key 'family.scorer': 'scorer:ToyFit': {envs / 'toy_fit' / 'scorer.py'} defines no" in err
    assert main(["eval", str(envs / "toy_fit" / "initial_program.py"), "--env", "toy-fit-tiny"]) == 2
    assert "its family's manifest is broken" in capsys.readouterr().err


def test_mutations_that_do_not_import_stop_a_run_before_anything_is_created(
    bench: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    envs, mutations = _edited_family(
        bench, "mutations.py", "\n\ndef operators", "\nimport no_such_dep_evobench\n\n\ndef operators"
    )
    _use_path(monkeypatch, envs)
    capsys.readouterr()
    argv = ["run", "--agent", "random-search", "--env", "toy-fit-tiny", "--max-evaluations", "3"]
    assert main([*argv, "--no-progress"]) == 3  # an environment error: exit 3, not the candidate's 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("bench: error: environment error: family toy_fit: 'mutations:operators'")
    assert str(mutations) in err and "no_such_dep_evobench" in err and len(err.splitlines()) == 1
    assert not (bench / "results").exists()


@pytest.mark.slow
def test_the_skeletons_own_test_passes_where_it_was_written(bench: Path) -> None:
    """What the guide's step 6 runs: the generated test, with a plain pytest (no repository config)."""
    assert main(["new-env", "toy_fit", "--dir", str(bench / "envs")]) == 0
    test = bench / "envs" / "toy_fit" / "test_toy_fit.py"
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        cwd=bench, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
