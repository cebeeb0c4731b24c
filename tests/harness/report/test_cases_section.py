"""The run report's per-case section (harness/report/cases.py)."""

from __future__ import annotations

import pandas as pd

from harness.report.cases import cases_section


def _row(seq: int, status: str, score: float | None, cases: list[dict[str, object]]) -> dict[str, object]:
    return {"seq": seq, "status": status, "score": score, "cases": cases}


def test_best_evaluation_cases_and_verdict_counts() -> None:
    cands = pd.DataFrame(
        [
            _row(0, "ok", 1.0, [{"name": "a", "status": "ok", "score": 2.0, "cpu_seconds": 1.961}]),
            _row(
                1,
                "ok",
                3.0,
                [
                    {"name": "a", "status": "ok", "score": 6.0, "cpu_seconds": 1.5, "wall_seconds": 9.0},
                    {"name": "b", "status": "runtime_error", "score": 0.0, "reason": "killed by SIGFPE"},
                ],
            ),
            _row(2, "timeout", None, [{"name": "a", "status": "tle", "score": 0.0}]),
        ]
    )
    html = cases_section(cands, maximize=True)
    assert "Best evaluation (seq 1)" in html and "killed by SIGFPE" in html
    assert "1.500" in html and "9.000" in html and "wall-clock s" in html and "CPU s" in html
    num = "<td class='num'>{}</td>"
    assert "<td>a</td>" + "".join(num.format(n) for n in (2, 0, 1)) in html  # ok, runtime_error, tle
    assert "Best evaluation (seq 2)" not in cases_section(cands, maximize=False)  # seq 0 is best then


def test_families_without_cases_say_so() -> None:
    assert "no per-case" in cases_section(pd.DataFrame([_row(0, "ok", 1.0, [])]), maximize=True)
    assert "No per-case" in cases_section(pd.DataFrame(), maximize=True)
