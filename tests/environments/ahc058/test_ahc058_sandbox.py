"""AHC058 end to end: real compiler and real local sandbox, hostile programs, and ``bench eval``.

The hostile programs pick a behaviour per test case by looking at one of its costs, so one
evaluation shows that a failure stays confined to its own case. They include only C headers so
that they compile in well under a second.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.ahc058.scorer import Ahc058Scorer
from harness.envs.data_import import import_data
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status

from ..family_support import evaluate

REPO = Path(__file__).resolve().parents[3]
SHARED_INPUTS = REPO.parent / "shared" / "data" / "ahc" / "ahc058" / "inputs"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

# Buy machine 0^0 (A_0 = 1, C_00 = 1 in every case) on turn 0, then wait: S = 500 apples.
BUY_ONCE_SCORE = math.floor(1e5 * math.log2(500) + 0.5)
TEMPLATE = r"""
#include <cstdio>
#include <unistd.h>

int main() {
    long long n, levels, turns, apples, x;
    if (std::scanf("%lld %lld %lld %lld", &n, &levels, &turns, &apples) != 4) return 7;
    for (int j = 0; j < n; ++j) std::scanf("%lld", &x);
    long long c01 = -1;
    for (int k = 0; k < levels * n; ++k) { std::scanf("%lld", &x); if (k == 1) c01 = x; }
BRANCHES
    std::puts("# buy the cheapest machine once, then wait");
    std::puts("0 0");
    for (int t = 1; t < turns; ++t) std::puts("-1");
    return 0;
}
"""
SPIN = "volatile unsigned long long z = 0; for (;;) ++z;"


@pytest.fixture(scope="module")
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data cache set as EVOBENCH_DATA before the backend starts, holding the public inputs if present."""
    root = tmp_path_factory.mktemp("evobench-data")
    (root / "ahc058" / "public_inputs_150").mkdir(parents=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVOBENCH_DATA", str(root))
        if SHARED_INPUTS.is_dir():  # installed as users do offline: `bench data import`, sha256-checked
            import_data("ahc058", SHARED_INPUTS)
        yield root


@pytest.fixture(scope="module")
def backend(data_cache: Path) -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1) as b:
        yield b


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("ahc058-tiny")


@pytest.fixture(scope="module")
def cases(tiny: Variant, tmp_path_factory: pytest.TempPathFactory) -> Ahc058Scorer:
    scorer = Ahc058Scorer(tiny, tmp_path_factory.mktemp("unused"))
    scorer.prepare()
    assert len(scorer.cases) == 4
    return scorer


def program(scorer: Ahc058Scorer, bodies: dict[int, str]) -> str:
    branches = [
        f"    if (c01 == {int(scorer.cases[k].instance.c[0, 1])}) {{ {b} }}" for k, b in bodies.items()
    ]
    return TEMPLATE.replace("BRANCHES", "\n".join(branches))


def test_cases_are_told_apart(cases: Ahc058Scorer) -> None:
    assert len({int(c.instance.c[0, 1]) for c in cases.cases}) == 4


def test_spinning_on_one_case_is_a_tle_there_only(
    backend: object, tiny: Variant, cases: Ahc058Scorer
) -> None:
    result = evaluate(backend, tiny, program(cases, {2: SPIN}))
    assert result.status is Status.OK, result.reason
    m = result.metrics
    assert (m["cases_ok"], m["cases_tle"], m["cases_runtime_error"], m["cases_invalid_output"]) == (
        3,
        1,
        0,
        0,
    )
    assert result.score == pytest.approx(3 * BUY_ONCE_SCORE / 4)
    assert m["total_score"] == 3 * BUY_ONCE_SCORE


def test_bad_plans_are_invalid_cases(backend: object, tiny: Variant, cases: Ahc058Scorer) -> None:
    bodies = {
        0: 'std::puts("1 0"); for (int t = 1; t < turns; ++t) std::puts("-1"); return 0;',  # costs > 1 apple
        1: 'for (int t = 0; t < turns - 1; ++t) std::puts("-1"); return 0;',  # one action short
        2: 'std::puts("0 10"); for (int t = 1; t < turns; ++t) std::puts("-1"); return 0;',  # no ID 10
    }
    result = evaluate(backend, tiny, program(cases, bodies))
    assert result.status is Status.OK, result.reason
    assert result.metrics["cases_invalid_output"] == 3 and result.metrics["cases_ok"] == 1
    assert result.metrics["total_score"] == BUY_ONCE_SCORE
    result = evaluate(backend, tiny, program(cases, dict.fromkeys(range(4), bodies[0])))
    assert result.status is Status.INVALID and "rule 'apples'" in result.reason
