"""AHC039 end to end: real compiler and real local sandbox, hostile programs, and ``bench eval``.

The hostile programs pick a behaviour per test case by looking at the case's first point, so one
evaluation shows that a failure (time limit, crash, bad output) stays confined to its own case.
They include only C headers so that they compile in well under a second.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.ahc039.scorer import Ahc039Scorer
from harness.envs.data_import import import_data
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status

from ..family_support import evaluate

REPO = Path(__file__).resolve().parents[3]
SHARED_INPUTS = REPO.parent / "shared" / "data" / "ahc" / "ahc039" / "inputs"
SECRET = "ahc039-cache-secret-41f7"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

WHOLE_SQUARE = r'"4\n0 0\n100000 0\n100000 100000\n0 100000\n"'  # a - b + 1 = N - N + 1 = 1
TEMPLATE = r"""
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

int main() {
    int n = 0, x0 = -1, y0 = -1;
    if (std::scanf("%d %d %d", &n, &x0, &y0) != 3) return 7;
BRANCHES
    std::fputs(WHOLE_SQUARE, stdout);
    return 0;
}
""".replace("WHOLE_SQUARE", WHOLE_SQUARE)

SPIN = "volatile unsigned long long z = 0; for (;;) ++z;"
SLEEP = "sleep(100);"
SEGFAULT = "volatile int* volatile p = nullptr; *p = 1;"
HOG = (  # 1.5 GiB written (limits count use, not reservation); volatile: not elided
    "static char* volatile keep; keep = (char*)std::malloc(1536u << 20);"
    " if (!keep) std::abort(); for (unsigned i = 0; i < (1536u << 20); i += 4096) keep[i] = 1;"
)
GARBAGE = 'std::puts("the net is somewhere over there"); return 0;'
HUGE = f"for (int k = 0; k < 100000; ++k) std::fputs({WHOLE_SQUARE}, stdout); return 0;"
TRUNCATED = r'std::puts("4\n0 0\n100000 0\n100000 100000"); return 0;'
TWO_POLYGONS = (
    f'std::fputs({WHOLE_SQUARE}, stdout); std::puts("4\\n0 0\\n50000 0\\n50000 100000\\n0 100000"); return 0;'
)
NONZERO_EXIT = f"std::fputs({WHOLE_SQUARE}, stdout); return 1;"


@pytest.fixture(scope="module")
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data cache set as EVOBENCH_DATA before the backend starts, holding the public inputs if present."""
    root = tmp_path_factory.mktemp("evobench-data")
    (root / "ahc039" / "public_inputs_150").mkdir(parents=True)
    (root / "ahc039" / "secret.txt").write_text(SECRET)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVOBENCH_DATA", str(root))
        if SHARED_INPUTS.is_dir():  # installed as users do offline: `bench data import`, sha256-checked
            import_data("ahc039", SHARED_INPUTS)
        yield root


@pytest.fixture(scope="module")
def backend(data_cache: Path) -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1) as b:
        yield b


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("ahc039-tiny")


@pytest.fixture(scope="module")
def cases(tiny: Variant, tmp_path_factory: pytest.TempPathFactory) -> Ahc039Scorer:
    scorer = Ahc039Scorer(tiny, tmp_path_factory.mktemp("unused"))
    scorer.prepare()
    assert len(scorer.cases) == 4
    return scorer


def program(scorer: Ahc039Scorer, bodies: dict[int, str]) -> str:
    """The template with ``bodies[k]`` run on case k (matched by its first point)."""
    branches = []
    for k, body in bodies.items():
        x0, y0 = scorer.cases[k].input.split()[1:3]
        branches.append(f"    if (x0 == {int(x0)} && y0 == {int(y0)}) {{ {body} }}")
    return TEMPLATE.replace("BRANCHES", "\n".join(branches))


def counts(result: EvalResult) -> tuple[int, int, int, int]:
    m = result.metrics
    return (
        int(m["cases_ok"]),
        int(m["cases_tle"]),
        int(m["cases_runtime_error"]),
        int(m["cases_invalid_output"]),
    )


def test_spinning_on_one_case_is_a_tle_there_only(
    backend: object, tiny: Variant, cases: Ahc039Scorer
) -> None:
    result = evaluate(backend, tiny, program(cases, {1: SPIN}))
    assert result.status is Status.OK, result.reason
    assert counts(result) == (3, 1, 0, 0)
    assert result.score == pytest.approx(3 / 4)  # three whole-square answers worth 1 each
    assert result.metrics["max_case_seconds"] >= 1.9  # the spinner used its 2 s of CPU
    spinner = result.cases[1]
    assert spinner.status == "tle" and "3.1 s CPU-time backstop" in spinner.reason
    assert spinner.cpu_seconds is not None and 3.1 <= spinner.cpu_seconds < 3.5  # killed at the backstop
    assert [c.status for c in result.cases] == ["ok", "tle", "ok", "ok"]


def test_sleep_crash_memory_and_garbage_stay_in_their_case(
    backend: object, tiny: Variant, cases: Ahc039Scorer
) -> None:
    result = evaluate(backend, tiny, program(cases, {0: SLEEP, 1: SEGFAULT, 2: HOG, 3: GARBAGE}))
    # Every case failed, so the evaluation reports the prevailing failure and its first cases.
    assert result.status is Status.ERROR, result.reason
    assert "no test case was scored (1 invalid_output, 2 runtime_error, 1 tle of 4)" in result.reason
    result = evaluate(backend, tiny, program(cases, {0: SLEEP, 1: SEGFAULT, 2: HOG}))
    assert result.status is Status.OK, result.reason
    assert counts(result) == (1, 1, 2, 0)
    assert result.score == pytest.approx(1 / 4)
    assert result.metrics["max_case_seconds"] >= 4.4  # the sleeper hit the 4.5 s elapsed backstop
    sleeper, crash, hog = result.cases[:3]
    assert sleeper.status == "tle" and "4.5 s elapsed-time backstop" in sleeper.reason
    assert crash.status == "runtime_error" and "killed by SIGSEGV" in crash.reason
    assert hog.status == "runtime_error" and "memory limit" in hog.reason


def test_output_rules_in_the_sandbox(backend: object, tiny: Variant, cases: Ahc039Scorer) -> None:
    result = evaluate(
        backend, tiny, program(cases, {0: HUGE, 1: TRUNCATED, 2: TWO_POLYGONS, 3: NONZERO_EXIT})
    )
    assert result.status is Status.OK, result.reason
    assert counts(result) == (1, 0, 1, 2)
    half = b"4\n0 0\n50000 0\n50000 100000\n0 100000\n"
    (expected,) = cases.judge([cases.cases[2].instance], [half])
    assert isinstance(expected, int) and expected != 1  # the second (last) polygon was scored
    assert result.metrics["total_score"] == expected


def test_all_invalid_names_the_rule(backend: object, tiny: Variant, cases: Ahc039Scorer) -> None:
    diagonal = r'std::puts("4\n0 0\n10 0\n10 10\n1 9"); return 0;'
    result = evaluate(backend, tiny, program(cases, dict.fromkeys(range(4), diagonal)))
    assert result.status is Status.INVALID
    assert "rule 'axis-parallel'" in result.reason and result.score is None


def test_candidate_cannot_read_the_data_cache_or_the_scorer(
    backend: object, tiny: Variant, data_cache: Path
) -> None:
    scorer_file = REPO / "environments" / "ahc039" / "scorer.py"
    secret = data_cache / "ahc039" / "secret.txt"
    assert SECRET in secret.read_text() and scorer_file.read_bytes()  # the targets exist out here
    probe = TEMPLATE.replace(
        "BRANCHES",
        f"""
    FILE* own = std::fopen("probe.txt", "w");
    if (!own || std::fputs("visible", own) < 0 || std::fclose(own) != 0) return 5;  // control
    const char* targets[] = {{"{secret}", "{scorer_file}", "{data_cache}/ahc039/public_inputs_150"}};
    for (const char* t : targets) {{
        if (FILE* f = std::fopen(t, "rb")) {{ std::puts("LEAK"); std::fclose(f); return 0; }}
    }}""",
    )
    result = evaluate(backend, tiny, probe)
    assert result.status is Status.OK, result.reason
    assert counts(result) == (4, 0, 0, 0)
