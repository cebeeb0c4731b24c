"""Trusted scorer of AHC039 (purse seine fishing), as TTT-Discover / ALE-Bench evaluate it.

The candidate is a C++20 program; it is compiled in its sandbox (``g++ -std=c++20 -O2``) and run
once per test case (2 s CPU, 1 GiB, cases in parallel, one per core). Each case scores
``max(0, a - b + 1)`` for its last printed polygon (see :mod:`.judge`), or 0 if the run failed or
the output breaks a rule. Combined score: the mean over cases (TTT-Discover's "performance";
the AtCoder contest score is the sum, reported as ``total_score``). Aggregation and the per-case
status counts live in :mod:`environments.ahc_common.batch`.
"""

from __future__ import annotations

from typing import Any

from environments.ahc_common.batch import AhcScorer

from .data import format_input, generate, parse_input
from .judge import SortedPoints, case_score, points_of


class Ahc039Scorer(AhcScorer):
    """AHC039 on the pinned public inputs and / or generated cases.

    Extra parameter: ``generated_n`` [5000], N of generated cases.
    """

    def parse_input(self, data: bytes) -> Any:
        """Parse and check one input file; keep its fish pre-sorted for the judge."""
        return points_of(parse_input(data))

    def generate_input(self, seed: int) -> bytes:
        """One generated input file (statement distribution, N = ``generated_n``)."""
        return format_input(generate(seed, n=int(self.params.get("generated_n", 5000))))

    def judge_one(self, instance: SortedPoints, stdout: bytes) -> int:
        """``max(0, a - b + 1)`` of the last polygon, or ``OutputRejected``."""
        return case_score(instance, stdout)
