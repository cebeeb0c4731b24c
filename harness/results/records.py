"""On-disk record types of a run: its header (``run.json``), its evaluations and its leaderboard row."""

from __future__ import annotations

import enum
import json
import math
import types
from datetime import UTC, datetime
from typing import Any, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.envs.draw_bounds import DrawBounds
from harness.envs.manifest import Direction
from harness.evaluation.result import CaseRecord, EvalResult, Status

RunStatus = Literal["running", "finished", "interrupted", "failed"]
LeaderboardState = Literal["none", "pending", "added"]
"""Lifecycle state of a run."""

SCHEMA_VERSION = 2
"""Version of the run-directory layout and record schemas written by this package (1: the
``candidates.parquet`` of untyped strings; 2: typed, self-describing columns, see
:mod:`harness.results.candidates` and ``docs/results.md``)."""


def utc_now_iso() -> str:
    """Return the current UTC time as an ISO-8601 string with a ``+00:00`` offset."""
    return datetime.now(UTC).isoformat()


def _check_finite(v: float | None) -> float | None:
    if v is not None and not math.isfinite(v):
        raise ValueError("must be finite")
    return v


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class RunInfo(_Record):
    """Header of one run, stored as ``results/<run-id>/run.json`` and rewritten as the run progresses."""

    schema_version: int = SCHEMA_VERSION
    """Version of the results layout that wrote this file."""
    run_id: str = Field(min_length=1)
    """Unique id of the run; also the name of its directory."""
    status: RunStatus = "running"
    """Lifecycle state: running, finished, interrupted (signal / budget cut) or failed (harness error)."""
    env_id: str
    """Variant id the run evaluates on, e.g. ``eplb-tiny``."""
    family: str
    """Environment family, e.g. ``eplb``; names the leaderboard file."""
    variant: str
    """Variant id as shown on leaderboards (normally identical to ``env_id``)."""
    env_version: str
    """Semantic version of the environment family."""
    env_hash: str
    """Content hash of everything that can change this variant's scores."""
    agent: str
    """Agent id (the search method)."""
    agent_version: str = ""
    """Version string of the agent implementation."""
    agent_config: dict[str, Any] = Field(default_factory=dict)
    """The agent's resolved configuration (JSON values only)."""
    models: dict[str, str] = Field(default_factory=dict)
    """LLM role -> model string (e.g. ``mutator`` -> ``openai/gpt-4o``); empty for LLM-free agents."""
    seed: int
    """Master random seed of the run."""
    budget: dict[str, Any] = Field(default_factory=dict)
    """Budget limits (evaluations, wall seconds, tokens, USD) as configured."""
    label: str | None = None
    """The user's name for the run's identity (``bench run --label``), shown instead of the
    computed ``agent[setting=value]`` label (``harness.compare.labels``); None: computed. Not part
    of the identity."""
    backend: str = "local"
    """Evaluation backend (``local``, ``docker``, ``modal``)."""
    workers: int = Field(default=1, ge=1)
    """Number of concurrent evaluation workers."""
    mode: Literal["warm", "cold"] = "warm"
    """Sandbox mode of the local backend (``warm`` zygote forks or ``cold`` fresh interpreters);
    a resumed run keeps it."""
    leaderboard_dir: str | None = None
    """Leaderboards directory the finished run's row goes to (absolute; None: no leaderboard).
    A resumed run and ``bench leaderboard add`` use it, not the resuming shell's defaults."""
    leaderboard: LeaderboardState = "none"
    """Where the run's leaderboard row stands: ``none`` (not finished, or no leaderboard),
    ``pending`` (queued in ``leaderboard_row.json``, the append failed: ``bench leaderboard add``
    or ``--resume`` retries it) or ``added``."""
    error: str = ""
    """The first error that aborted the run (empty for finished or interrupted runs)."""
    package_versions: dict[str, str] = Field(default_factory=dict)
    """Installed versions of the packages that can affect results."""
    git_commit: str | None = None
    """Commit of the evobench checkout, or None when not run from a git checkout."""
    git_dirty: bool | None = None
    """Whether tracked files had uncommitted changes; None when unknown."""
    host: str = ""
    """Host name of the machine running the harness."""
    python: str = ""
    """Python version running the harness."""
    started_at: str = Field(default_factory=utc_now_iso)
    """ISO-8601 start time (UTC)."""
    ended_at: str | None = None
    """ISO-8601 end time (UTC), or None while running."""
    best_score: float | None = None
    """Best ``ok`` score so far (direction-aware), or None when nothing scored."""
    n_evaluations: int = Field(default=0, ge=0)
    """Evaluations journaled so far."""
    command: list[str] = Field(default_factory=list)
    """Command line that started the run."""
    agent_summary: dict[str, Any] = Field(default_factory=dict)
    """What the agent reports about itself at the end (a learning agent: adapter version,
    trainer steps, skipped updates); JSON values only."""
    progress_bounds: DrawBounds | None = None
    """The bounds u is measured against (a held-out key's own, measured once per key; None in runs
    made before bounds were recorded: the variant's manifest bounds)."""

    _finite_best = field_validator("best_score")(_check_finite)


class CandidateRow(_Record):
    """One evaluation of one candidate: a line of ``candidates.jsonl`` and a row of ``candidates.parquet``."""

    run_id: str
    """Run the evaluation belongs to."""
    seq: int = Field(ge=0)
    """Global 0-based evaluation index within the run (unique; the journal's key)."""
    iteration: int = Field(ge=0)
    """Agent iteration (generation) that proposed the candidate."""
    thread: int = Field(default=0, ge=0)
    """Worker / island index that produced the candidate."""
    parent_id: str | None = None
    """Parent program (a program sha256 or a ``seq`` id as a string), or None for a root."""
    program_sha256: str
    """Content address of the candidate program (see ``RunStore.put_program``)."""
    status: Status
    """Outcome class of the evaluation."""
    score: float | None = None
    """Combined score; None unless ``status`` is ``ok``."""
    metrics_json: str = "{}"
    """JSON object of the scorer's named metrics."""
    reason: str = ""
    """Why a non-ok evaluation failed."""
    cases_json: str = "[]"
    """JSON list of per-unit verdicts (:class:`~harness.evaluation.result.CaseRecord`: name,
    status, score, cpu_seconds, wall_seconds, reason); ``[]`` for families without units."""
    duration_setup: float = 0.0
    """Seconds spent starting the sandbox and loading the program."""
    duration_candidate: float = 0.0
    """Seconds spent inside candidate calls or processes."""
    duration_score: float = 0.0
    """Seconds of trusted scorer computation."""
    duration_total: float = 0.0
    """Seconds from job receipt to result."""
    tokens_in: int = Field(default=0, ge=0)
    """LLM prompt tokens spent producing this candidate."""
    tokens_out: int = Field(default=0, ge=0)
    """LLM completion tokens spent producing this candidate."""
    cost_usd: float = Field(default=0.0, ge=0.0)
    """LLM cost in US dollars attributed to this candidate."""
    started_at: str
    """ISO-8601 time the evaluation was submitted."""
    finished_at: str
    """ISO-8601 time the result arrived."""
    env_id: str
    """Variant id evaluated on."""
    env_hash: str
    """Content hash of the variant at evaluation time."""
    attempts: int = Field(default=1, ge=1)
    """Tries needed (infra errors are retried)."""
    backend: str = "local"
    """Backend that ran the evaluation."""
    device: str = ""
    """Device the scorer timed on (``EvalResult.device``); empty when not recorded (CPU-only
    families, journals and Parquet files written before the column existed)."""

    _finite_score = field_validator("score")(_check_finite)

    @property
    def metrics(self) -> dict[str, float]:
        """The decoded metrics dictionary."""
        out: dict[str, float] = json.loads(self.metrics_json)
        return out

    @property
    def cases(self) -> list[CaseRecord]:
        """The decoded per-unit verdicts."""
        return [CaseRecord.model_validate(c) for c in json.loads(self.cases_json)]

    @classmethod
    def from_result(
        cls,
        result: EvalResult,
        *,
        run_id: str,
        seq: int,
        iteration: int,
        thread: int,
        parent_id: str | None,
        started_at: str,
        finished_at: str,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
    ) -> CandidateRow:
        """Build the journal row of one evaluation result.

        Args:
            result: The evaluation result.
            run_id: Run the evaluation belongs to.
            seq: Global 0-based evaluation index.
            iteration: Agent iteration that proposed the candidate.
            thread: Worker / island index.
            parent_id: Parent program id, or None.
            started_at: ISO-8601 submission time.
            finished_at: ISO-8601 completion time.
            tokens_in: Prompt tokens attributed to the candidate.
            tokens_out: Completion tokens attributed to the candidate.
            cost_usd: LLM cost attributed to the candidate.

        Returns:
            The row.

        Raises:
            pydantic.ValidationError: If a value is out of range (negative seq, tokens or cost).
        """
        d = result.durations
        return cls(
            run_id=run_id,
            seq=seq,
            iteration=iteration,
            thread=thread,
            parent_id=parent_id,
            program_sha256=result.program_sha256,
            status=result.status,
            score=result.score,
            metrics_json=json.dumps(result.metrics, sort_keys=True),
            reason=result.reason,
            cases_json=json.dumps([c.model_dump(mode="json") for c in result.cases]),
            duration_setup=d.setup,
            duration_candidate=d.candidate,
            duration_score=d.score,
            duration_total=d.total,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost_usd,
            started_at=started_at,
            finished_at=finished_at,
            env_id=result.env_id,
            env_hash=result.env_hash,
            attempts=result.attempts,
            backend=result.backend,
            device=result.device,
        )


class LeaderboardRow(_Record):
    """One finished run as a row of ``leaderboards/<family>.parquet``."""

    run_id: str
    """Run id (the leaderboard's key: appending the same run again replaces its row)."""
    family: str
    """Environment family."""
    variant: str
    """Variant id (env id), e.g. ``eplb-tiny``."""
    env_version: str
    """Family version the run was scored with."""
    env_hash: str
    """Variant content hash the run was scored with."""
    agent: str
    """Agent id."""
    agent_version: str = ""
    """Agent implementation version."""
    agent_config_json: str = "{}"
    """JSON of the agent's resolved configuration."""
    models_json: str = "{}"
    """JSON of the role -> model mapping."""
    budget_json: str = "{}"
    """JSON of the run's configured budget (``RunInfo.budget``); part of the run identity."""
    label: str | None = None
    """The run's ``--label`` (``RunInfo.label``): printers show it instead of the computed identity
    label; None where none was given (and in rows written before the column)."""
    seed: int
    """Master seed of the run."""
    best_score: float | None = None
    """Best ``ok`` score of the run (direction-aware); None when the run never scored."""
    n_evaluations: int = Field(default=0, ge=0)
    """Evaluations performed."""
    n_ok: int = Field(default=0, ge=0)
    """Evaluations with status ``ok``."""
    n_infra_error: int = Field(default=0, ge=0)
    """Evaluations lost to harness failures."""
    progress: float = Field(default=0.0, ge=0.0, le=1.0)
    """Normalised progress u in [0, 1] of ``best_score`` (0 when it is None)."""
    direction: Direction
    """Direction of the combined score (``maximize`` or ``minimize``)."""
    finished_at: str
    """ISO-8601 end time of the run."""
    git_commit: str | None = None
    """Commit of the evobench checkout, when known."""
    package_versions_json: str = "{}"
    """JSON of the installed package versions."""
    cost_usd: float = Field(default=0.0, ge=0.0)
    """Total LLM cost of the run in US dollars."""
    adapter_version: int | None = None
    """Final adapter version of a learning agent's trained policy (None: nothing trained)."""
    agent_summary_json: str | None = None
    """JSON of the agent's end-of-run summary (``RunInfo.agent_summary``); None for older rows."""
    y_floor: float | None = None
    """Score at u = 0 for this run's draw (None in older rows: the variant's manifest bounds)."""
    y_target: float | None = None
    """Score at u = 1 for this run's draw (None in older rows)."""
    heldout_key: str | None = None
    """Fingerprint of the held-out key the run was scored on, ``public`` (the public draw of a keyed
    variant), empty (a variant without a held-out draw); None in older rows."""
    device: str | None = None
    """Device(s) the run's evaluations were timed on (``CandidateRow.device``, several joined by
    ``" + "``); None when none was recorded (CPU-only families, rows written before the column).
    ``bench compare`` refuses to pool runs of different devices."""
    best_program_sha: str | None = None
    """sha256 of the program that scored ``best_score`` (the earliest evaluation among ties); None
    when the run never scored, and in rows written before the column."""
    best_program_path: str | None = None
    """Where that program's text is stored, relative to the run directory
    (``programs/<sha[:2]>/<sha>.<ext>``); None when it is not stored or unknown."""

    _finite_best = field_validator("best_score")(_check_finite)


def parse_journal(data: bytes) -> tuple[list[CandidateRow], int]:
    """Parse ``candidates.jsonl`` bytes into rows and the byte length of the intact prefix.

    Only the final line may be unreadable: a line without its newline was torn by a crash (the
    newline is the last byte of every append) and is dropped, as is a garbled final line. An
    unreadable line followed by valid ones is corruption.

    Args:
        data: The journal's content.

    Returns:
        The rows in file order, and the offset where the unreadable tail (if any) begins.

    Raises:
        ValueError: If a line other than the last cannot be parsed.
    """
    rows: list[CandidateRow] = []
    pos = good = 0
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        end = pos + len(line) + (0 if last else 1)
        if line.strip():
            try:
                if last:  # no newline after it: the writer died mid-line
                    raise ValueError("torn line")
                rows.append(CandidateRow.model_validate_json(line))
            except ValueError as e:  # pydantic's ValidationError is a ValueError
                if last or not any(x.strip() for x in lines[i + 1 :]):
                    break
                raise ValueError(f"corrupt journal line {i + 1}: {e}") from e
        pos = good = end
    return rows, good


def _arrow_type(annotation: Any) -> pa.DataType:
    """Map a flat field annotation (scalars, optionals, enums, literals) to an Arrow type."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return _arrow_type(args[0])
    if origin is Literal:
        values = get_args(annotation)
        if all(isinstance(v, str) for v in values):
            return pa.string()
        raise TypeError(f"unsupported literal {annotation!r}")
    if isinstance(annotation, type):
        if issubclass(annotation, bool):
            return pa.bool_()
        if issubclass(annotation, enum.Enum) or issubclass(annotation, str):
            return pa.string()
        if issubclass(annotation, int):
            return pa.int64()
        if issubclass(annotation, float):
            return pa.float64()
    raise TypeError(f"no Arrow type for {annotation!r}")


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """Arrow schema of a flat record model, columns in field order (all nullable).

    Args:
        model: A pydantic model whose fields are scalars, optionals, enums or string literals.

    Returns:
        The schema.

    Raises:
        TypeError: If a field has a nested or otherwise unsupported type.
    """
    return pa.schema([pa.field(name, _arrow_type(f.annotation)) for name, f in model.model_fields.items()])


def records_to_table(rows: list[Any], model: type[BaseModel]) -> pa.Table:
    """Convert records of one model into an Arrow table with that model's schema.

    Args:
        rows: Instances of ``model`` (an empty list gives an empty, correctly typed table).
        model: The record model.

    Returns:
        The table, one row per record, enums stored as their string values.

    Raises:
        TypeError: If ``model`` has unsupported field types or a row is not a ``model``.
    """
    bad = [type(r).__name__ for r in rows if not isinstance(r, model)]
    if bad:
        raise TypeError(f"expected {model.__name__} rows, got {sorted(set(bad))}")
    schema = arrow_schema(model)
    return pa.Table.from_pylist([r.model_dump(mode="json") for r in rows], schema=schema)
