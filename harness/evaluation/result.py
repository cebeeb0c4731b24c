"""The typed record of one evaluation, shared by every backend, the runner and the results store."""

from __future__ import annotations

import hashlib
import math
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Status(StrEnum):
    """Outcome class of one evaluation.

    Only ``ok`` carries a score. ``infra_error`` means the harness, not the candidate, failed:
    it never counts against the candidate and may be retried.
    """

    OK = "ok"
    """The candidate ran, passed every validity check and was scored."""
    INVALID = "invalid"
    """The candidate ran but its output broke a rule of the task (shape, range, non-finite, ...)."""
    ERROR = "error"
    """The candidate crashed, raised, failed to compile or hit a memory / output limit."""
    TIMEOUT = "timeout"
    """The candidate exceeded its wall-clock or CPU-time limit and was killed."""
    INFRA_ERROR = "infra_error"
    """The harness failed (sandbox did not start, scorer bug, missing data, worker died)."""


class PhaseDurations(BaseModel):
    """Wall-clock seconds spent in each phase of one evaluation, measured by the trusted side."""

    model_config = ConfigDict(extra="forbid")

    setup: float = 0.0
    """Starting or forking the sandboxed candidate process and loading the program."""
    candidate: float = 0.0
    """Time inside candidate calls or candidate processes (round trip, trusted clock)."""
    score: float = 0.0
    """The trusted scorer's own computation (simulation, metrics)."""
    total: float = 0.0
    """Everything from job receipt to result, including harness overhead."""


class CaseRecord(BaseModel):
    """Verdict on one unit of an evaluation (a test case, a benchmark shape, a split, an assay).

    Times are labelled by what measured them: ``cpu_seconds`` is CPU time of the unit's process
    tree (user + system, a cgroup's counter), ``wall_seconds`` is elapsed wall-clock time on the
    trusted side. Either is None where the scorer does not measure it.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    """Unit name (case file name, ``generated-<seed>``, shape, split)."""
    status: str
    """The family's verdict on the unit (AHC: ``ok``, ``tle``, ``runtime_error``, ``invalid_output``)."""
    score: float | None = None
    """The unit's score, when it has one."""
    cpu_seconds: float | None = None
    """CPU seconds (user + system) of the unit's process tree; None where not measured."""
    wall_seconds: float | None = None
    """Wall-clock seconds of the unit on the trusted clock; None where not measured."""
    reason: str = ""
    """Why the unit failed (the limit, the signal by name, the broken rule)."""

    @field_validator("score", "cpu_seconds", "wall_seconds")
    @classmethod
    def _finite_or_none(cls, v: float | None) -> float | None:
        return v if v is None or math.isfinite(v) else None


def program_sha256(source: str) -> str:
    """Return the hex sha256 of a program's UTF-8 text (its content address)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


class EvalResult(BaseModel):
    """Result of evaluating one candidate program on one environment variant."""

    model_config = ConfigDict(extra="forbid")

    status: Status
    """Outcome class; only ``ok`` results have a score."""
    score: float | None = None
    """The variant's combined score (direction given by the manifest); None unless status is ok."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Named metrics reported by the scorer (all finite)."""
    reason: str = ""
    """Human-readable explanation for any non-ok status (which rule, which exception)."""
    stdout_tail: str = ""
    """Last bytes of the candidate's stdout (capped); never fed to agents unfiltered."""
    stderr_tail: str = ""
    """Last bytes of the candidate's stderr (capped)."""
    durations: PhaseDurations = Field(default_factory=PhaseDurations)
    """Per-phase wall-clock durations."""
    env_id: str
    """Variant id, e.g. ``eplb-tiny``."""
    env_version: str
    """Semantic version of the environment family."""
    env_hash: str
    """Content hash of everything that can change this variant's scores."""
    program_sha256: str
    """sha256 of the candidate program text."""
    backend: str = "local"
    """Backend that ran the evaluation (``local``, ``docker``, ``modal``)."""
    attempts: int = 1
    """How many tries it took (infra errors are retried; candidate failures never)."""
    retryable: bool = True
    """For ``infra_error``: whether another attempt could succeed. False for a deterministic
    environment error (the family's code does not import, its data are not fetched): backends
    return it at once instead of retrying it."""
    cases: list[CaseRecord] = Field(default_factory=list)
    """Per-unit verdicts (test cases, benchmarks, splits), for families that have units."""
    device: str = ""
    """Device the scorer timed on (``Scorer.device_label``: a GPU's name and SM count, or
    ``cpu``); empty for families that time nothing on a chosen device, and for results from
    before devices were recorded."""

    @field_validator("score")
    @classmethod
    def _finite_score(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("score must be finite")
        return v

    @field_validator("metrics")
    @classmethod
    def _finite_metrics(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, x in v.items() if not math.isfinite(x)]
        if bad:
            raise ValueError(f"non-finite metrics: {bad}")
        return v

    @property
    def counts_against_candidate(self) -> bool:
        """Whether a non-ok outcome is the candidate's fault (False for ok and infra errors)."""
        return self.status not in (Status.OK, Status.INFRA_ERROR)
