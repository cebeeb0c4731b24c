"""Scorer base class of the AHC families: compile once, run every case, judge, aggregate.

Score of one evaluation:

* every case gets an integer score: the family's per-case score when the run ended normally and
  the output is valid, else 0;
* ``mean_score`` (the combined score) is the mean over all cases, ``total_score`` the sum (the
  AtCoder contest score on these cases);
* ``cases_ok``, ``cases_tle``, ``cases_runtime_error``, ``cases_invalid_output`` count the case
  statuses; ``compile_seconds`` and ``max_case_seconds`` are wall times on the trusted clock.

A validation subset (scorer parameter ``subset``, see :mod:`harness.envs.subset`) runs and
scores only the drawn cases, in their order; the metrics are the same, over those cases (no extra
metric: the four case-status counts sum to the number of cases scored).

A failure stays confined to its case. Only when *no* case is scored does the evaluation itself
fail, with the prevailing failure as its status (``invalid``, ``error`` or ``timeout``) and the
first failing cases in the reason, so that an agent sees why instead of a bare 0.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.envs.subset import unit_indices
from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.evaluation.result import CaseRecord
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer

from .inputs import read_file_set
from .native import INVALID_OUTPUT, OK, RUNTIME_ERROR, TLE, Limits, compile_program, run_cases
from .parsing import OutputRejected

METRIC_NAMES = (
    "mean_score",
    "total_score",
    "cases_ok",
    "cases_tle",
    "cases_runtime_error",
    "cases_invalid_output",
    "compile_seconds",
    "max_case_seconds",
)
_FAILURE_OUTCOME: dict[str, type[CandidateError | CandidateInvalid | CandidateTimeout]] = {
    INVALID_OUTPUT: CandidateInvalid,
    RUNTIME_ERROR: CandidateError,
    TLE: CandidateTimeout,
}


@dataclass(frozen=True)
class Case:
    """One test case: its name, the bytes fed to the program, and the judge's parsed view."""

    name: str
    """File name of a public input, or ``generated-<seed>``."""
    input: bytes
    """Exactly what the program reads on stdin."""
    instance: Any
    """The family's parsed instance (what the judge needs)."""


@dataclass(frozen=True)
class CaseResult:
    """Final verdict on one case."""

    name: str
    """Case name."""
    status: str
    """``ok``, ``tle``, ``runtime_error`` or ``invalid_output``."""
    score: int
    """Per-case score (0 unless ``ok``)."""
    seconds: float
    """Wall-clock seconds of the run (sandbox start-up and host load included)."""
    detail: str = ""
    """Reason of a failure."""
    cpu_seconds: float = float("nan")
    """CPU seconds of the case's process tree (NaN where not measured)."""
    wait_seconds: float = float("nan")
    """Seconds it waited for a CPU behind other work (NaN where not measured)."""


class AhcScorer(Scorer):
    """Compile a C++20 candidate, run it on every case in parallel, judge the outputs.

    Parameters (``variant.scorer_params``): ``cpu_seconds``, ``wall_seconds``, ``memory_mb``,
    ``workers``, ``compile_timeout_s``, ``compile_memory_mb`` (see :class:`.native.Limits`);
    ``public_cases`` (how many of the pinned public inputs to use, seeds 0 .. n-1; needs the
    variant's data source); ``generated_cases`` and ``generated_seed`` (extra cases from the
    family's generator, seeds ``generated_seed + k``); family-specific generator parameters;
    ``subset`` (a validation subset of the cases, applied in :meth:`scored_cases`).
    """

    limits: Limits
    cases: list[Case]

    # -- family hooks ------------------------------------------------------------------------
    @abstractmethod
    def parse_input(self, data: bytes) -> Any:
        """Parse one (trusted) input file into the instance the judge uses.

        Raises:
            ValueError: If the input breaks the statement's format or constraints.
        """

    @abstractmethod
    def generate_input(self, seed: int) -> bytes:
        """Generate one input file from a seed (trusted side)."""

    def judge_one(self, instance: Any, stdout: bytes) -> int:
        """Score one output; raise :class:`OutputRejected` naming the broken rule."""
        raise NotImplementedError

    def judge(self, instances: Sequence[Any], outputs: Sequence[bytes]) -> list[int | OutputRejected]:
        """Score many outputs (override to vectorise across cases).

        Returns:
            Per output, its score or the rejection.
        """
        verdicts: list[int | OutputRejected] = []
        for instance, stdout in zip(instances, outputs, strict=True):
            try:
                verdicts.append(self.judge_one(instance, stdout))
            except OutputRejected as e:
                verdicts.append(e)
        return verdicts

    # -- Scorer ------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Check the limits and load the public inputs and / or generate the private ones.

        Raises:
            DataMissingError: Public inputs are needed and have not been fetched.
            ValueError: The parameters or an input are inconsistent.
        """
        p = self.params
        self.limits = Limits.from_params(p, self.variant.hardware)
        public = int(p.get("public_cases", 0))
        generated = int(p.get("generated_cases", 0))
        cases: list[Case] = []
        if public > 0:
            sources = [s for _, s in self.variant.data if s.files]
            if not sources:
                raise ValueError(
                    f"{self.variant.id}: public_cases = {public} but the variant has no file set"
                )
            for name, data in read_file_set(self.data_dir, sources[0], public, self.variant.family):
                cases.append(Case(name, data, self._parse(name, data)))
        base = int(p.get("generated_seed", 0))
        for k in range(generated):
            name = f"generated-{base + k}"
            data = self.generate_input(base + k)
            cases.append(Case(name, data, self._parse(name, data)))
        if not cases:
            raise ValueError(f"{self.variant.id}: no test cases (set public_cases and / or generated_cases)")
        self.cases = cases

    def _parse(self, name: str, data: bytes) -> Any:
        try:
            return self.parse_input(data)
        except ValueError as e:
            raise ValueError(f"{self.variant.id}: input {name} is malformed: {e}") from e

    def scored_cases(self) -> list[Case]:
        """The cases an evaluation runs: every case, or the drawn validation subset (in order).

        Raises:
            ValueError: If the ``subset`` parameter is malformed.
        """
        return [self.cases[i] for i in unit_indices(len(self.cases), self.params)]

    def run_and_judge(self, candidate: CandidateRuntime) -> tuple[list[CaseResult], float, float]:
        """Compile, run every scored case (:meth:`scored_cases`), judge the outputs.

        Returns:
            Per-case results, compile seconds, wall seconds of all case runs.
        """
        cases = self.scored_cases()
        compile_seconds = compile_program(candidate, self.limits)
        t0 = time.perf_counter()
        runs = run_cases(candidate, [c.input for c in cases], self.limits)
        run_seconds = time.perf_counter() - t0
        ok = [r for r in runs if r.status == OK]
        verdicts = self.judge([cases[r.index].instance for r in ok], [r.stdout for r in ok])
        verdict_of = {r.index: v for r, v in zip(ok, verdicts, strict=True)}
        results = []
        for r in runs:
            name = cases[r.index].name
            v = verdict_of.get(r.index)
            times = {"cpu_seconds": r.cpu_seconds, "wait_seconds": r.wait_seconds}
            if v is None:
                results.append(CaseResult(name, r.status, 0, r.seconds, r.detail, **times))
            elif isinstance(v, OutputRejected):
                results.append(CaseResult(name, INVALID_OUTPUT, 0, r.seconds, str(v), **times))
            else:
                results.append(CaseResult(name, OK, int(v), r.seconds, **times))
        return results, compile_seconds, run_seconds

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Compile and run the candidate on every case; combined score = mean per-case score.

        Raises:
            CandidateError: Compile error, or every case crashed.
            CandidateInvalid: Every case failed, mostly with invalid output.
            CandidateTimeout: Every case failed, mostly on time, or the evaluation budget ran out.
        """
        results, compile_seconds, run_seconds = self.run_and_judge(candidate)
        counts = Counter(r.status for r in results)
        if counts[OK] == 0:
            raise self._all_failed(results, counts)
        total = sum(r.score for r in results)
        metrics = {
            "mean_score": total / len(results),
            "total_score": float(total),
            "cases_ok": float(counts[OK]),
            "cases_tle": float(counts[TLE]),
            "cases_runtime_error": float(counts[RUNTIME_ERROR]),
            "cases_invalid_output": float(counts[INVALID_OUTPUT]),
            "compile_seconds": compile_seconds,
            "max_case_seconds": max(r.seconds for r in results),
        }
        return ScoreOutcome(
            score=metrics["mean_score"],
            metrics=metrics,
            candidate_seconds=compile_seconds + run_seconds,
            cases=self.records(results),
        )

    @staticmethod
    def records(results: Sequence[CaseResult]) -> list[CaseRecord]:
        """Per-case records for the evaluation result (``bench eval --json``, results store)."""
        return [
            CaseRecord(
                name=r.name,
                status=r.status,
                score=float(r.score),
                cpu_seconds=r.cpu_seconds,
                wall_seconds=r.seconds,
                reason=r.detail,
            )
            for r in results
        ]

    @staticmethod
    def _all_failed(results: list[CaseResult], counts: Counter[str]) -> Exception:
        order = (INVALID_OUTPUT, RUNTIME_ERROR, TLE)
        worst = max(order, key=lambda s: (counts[s], -order.index(s)))
        summary = ", ".join(f"{counts[s]} {s}" for s in order if counts[s])
        examples = [r for r in results if r.status == worst][:3]
        lines = [f"no test case was scored ({summary} of {len(results)})"]
        lines += [f"case {r.name}: {r.status}: {r.detail}" for r in examples]
        return _FAILURE_OUTCOME[worst]("\n".join(lines), AhcScorer.records(results))
