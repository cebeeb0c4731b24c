"""Trusted scorer of AHC058 (apple machines), as TTT-Discover / ALE-Bench evaluate it.

The candidate is a C++20 program; it is compiled in its sandbox (``g++ -std=c++20 -O2``) and run
once per test case (2 s CPU, 1 GiB, cases in parallel, one per core). Each case scores
``round(1e5 * log2(S))`` for the apples S its plan ends with (see :mod:`.simulate`), or 0 if the
run failed or the plan breaks a rule. Combined score: the mean over cases (TTT-Discover's
"performance"; the contest score is the sum, reported as ``total_score``). All valid plans of an
evaluation are simulated together, vectorised over cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from environments.ahc_common.batch import AhcScorer
from environments.ahc_common.parsing import OutputRejected

from .data import Instance, format_input, generate, parse_input
from .simulate import case_score, parse_actions, simulate_batch


def judge_outputs(instances: Sequence[Instance], outputs: Sequence[bytes]) -> list[int | OutputRejected]:
    """Per output, its case score or the rule it broke."""
    verdicts: list[int | OutputRejected | None] = [None] * len(outputs)
    groups: dict[tuple[int, int, int], list[tuple[int, np.ndarray]]] = {}
    for k, (inst, stdout) in enumerate(zip(instances, outputs, strict=True)):
        try:
            actions = parse_actions(stdout, inst)
        except OutputRejected as e:
            verdicts[k] = e
            continue
        groups.setdefault((inst.n, inst.levels, inst.turns), []).append((k, actions))
    for members in groups.values():
        finals = simulate_batch([instances[k] for k, _ in members], [acts for _, acts in members])
        for (k, _), final in zip(members, finals, strict=True):
            verdicts[k] = final if isinstance(final, OutputRejected) else case_score(final)
    return [v for v in verdicts if v is not None]


class Ahc058Scorer(AhcScorer):
    """AHC058 on the pinned public inputs and / or generated cases."""

    def parse_input(self, data: bytes) -> Any:
        """Parse and check one input file."""
        return parse_input(data)

    def generate_input(self, seed: int) -> bytes:
        """One generated input file (statement sizes and distribution)."""
        return format_input(generate(seed))

    def judge(self, instances: Sequence[Any], outputs: Sequence[bytes]) -> list[int | OutputRejected]:
        """Parse every plan, then simulate the valid ones together."""
        return judge_outputs(instances, outputs)
