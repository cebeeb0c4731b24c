"""The typed, documented schema of ``candidates.parquet`` (results schema version 2).

The journal (``candidates.jsonl``, one :class:`~harness.results.records.CandidateRow` per line) is
the record; the Parquet snapshot is built from it and the run header, so that every row stands on
its own: the run's id, identity, agent, variant and seed ride on each row, times are Arrow UTC
timestamps, metrics a struct of float columns and per-case verdicts a list of structs. Each column
carries its description in the field metadata (key ``description``), and the file metadata carries
:data:`SCHEMA_VERSION_KEY`. Snapshots written before version 2 (string times, ``metrics_json`` and
``cases_json`` strings, no run columns) are upgraded in memory by :func:`read_candidates_table`
and rewritten by ``bench repair``. ``docs/results.md`` documents every column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from .records import SCHEMA_VERSION, CandidateRow, RunInfo, arrow_schema

CANDIDATES_SCHEMA_VERSION = SCHEMA_VERSION
"""Version of the ``candidates.parquet`` schema written by :func:`candidates_table`: the results
schema version (1: before typed columns; files of version 1 carry no version key)."""
SCHEMA_VERSION_KEY = b"evobench.schema_version"
"""File (schema) metadata key holding the schema version as decimal text."""
DESCRIPTION_KEY = b"description"
"""Field metadata key holding a column's description."""
TIMESTAMP = pa.timestamp("us", tz="UTC")
"""Arrow type of the time columns."""
CASE_TYPE = pa.struct(
    [
        pa.field("name", pa.string()),
        pa.field("status", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("cpu_seconds", pa.float64()),
        pa.field("wall_seconds", pa.float64()),
        pa.field("reason", pa.string()),
    ]
)
"""Arrow type of one per-case verdict (:class:`~harness.evaluation.result.CaseRecord`)."""

# Columns that come from the run header, not the journal row (placed first, after run_id).
_RUN_COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "identity": (
        pa.string(),
        "Run identity ``<agent>@<cfg>``: cfg is a short hash of the agent's resolved configuration, "
        "its models per role and its budget (what ``bench leaderboard`` and ``bench compare`` group by).",
    ),
    "agent": (pa.string(), "Agent id (the search method)."),
    "variant": (pa.string(), "Variant id of the run, e.g. ``eplb-tiny`` (``env_id`` is per evaluation)."),
    "seed": (pa.int64(), "Master random seed of the run."),
}
# Journal fields stored under another name or type, with the description of the typed column.
_TYPED: dict[str, tuple[str, pa.DataType | None, str]] = {
    "metrics_json": (
        "metrics",
        None,  # a struct of the metric names this run's rows reported
        "The scorer's named metrics: a struct with one float64 field per metric name any row of the run "
        "reported (null where a row lacks it; the whole struct is null for a row without metrics). Null "
        "type when no row of the run reported a metric.",
    ),
    "cases_json": (
        "cases",
        pa.list_(CASE_TYPE),
        "Per-unit verdicts (test cases, benchmark shapes, splits): list of structs name, status, score, "
        "cpu_seconds, wall_seconds, reason; empty for families without units.",
    ),
    "started_at": ("started_at", TIMESTAMP, "Time the evaluation was submitted (UTC, microseconds)."),
    "finished_at": ("finished_at", TIMESTAMP, "Time the result arrived (UTC, microseconds)."),
}
# Journal fields whose description here says more than the journal model's docstring.
_DOCS: dict[str, str] = {
    "program_sha256": "Content address (sha256 hex of the UTF-8 text) of the candidate program.",
    "parent_id": "Parent program (a program sha256 or a ``seq`` id as a string); null for a root.",
    "status": "Outcome class: ``ok`` (scored), ``invalid`` (broke a rule of the task), ``error`` (crashed, "
    "raised, failed to compile, hit a memory or output limit), ``timeout`` (killed at its time limit) or "
    "``infra_error`` (the harness failed, not the candidate; never counts against it).",
    "score": "Combined score (direction: the variant's, see the leaderboard's ``direction``); null unless "
    "``status`` is ``ok``.",
    "reason": "Why a non-ok evaluation failed (empty for ``ok``).",
    "env_id": "Variant id evaluated on: ``variant``, or a derived id ``<variant>~...`` (a validation subset "
    "or quick mode an agent asked for), whose score is not comparable with full scores.",
}
_PROGRAM_PATH = (
    "program_path",
    pa.string(),
    "Path of the stored program text relative to the run directory, ``programs/<sha[:2]>/<sha>.<ext>``; "
    "null when the program is not stored there.",
)


def _field(name: str, typ: pa.DataType, doc: str) -> pa.Field:
    return pa.field(name, typ, metadata={DESCRIPTION_KEY: doc.encode("utf-8")})


def candidates_schema(metric_names: Sequence[str] = ()) -> pa.Schema:
    """The version-2 schema, columns in order, each with its description.

    Args:
        metric_names: Field names of the ``metrics`` struct (none: the column has Arrow's null type).

    Returns:
        The schema, with the schema version in its metadata.
    """
    v1 = arrow_schema(CandidateRow)
    fields = [_field("run_id", pa.string(), CandidateRow.model_fields["run_id"].description or "")]
    fields += [_field(n, t, d) for n, (t, d) in _RUN_COLUMNS.items()]
    for f in v1:
        if f.name == "run_id":
            continue
        default = _DOCS.get(f.name) or CandidateRow.model_fields[f.name].description or ""
        name, typ, doc = _TYPED.get(f.name, (f.name, f.type, default))
        if name == "metrics":
            typ = pa.struct([pa.field(m, pa.float64()) for m in metric_names]) if metric_names else pa.null()
        fields.append(_field(name, typ, " ".join(doc.split())))
        if name == "program_sha256":
            fields.append(_field(*_PROGRAM_PATH))
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(CANDIDATES_SCHEMA_VERSION).encode()})


def run_identity(info: RunInfo) -> str:
    """The run's ``<agent>@<cfg>`` identity (equal to the one its leaderboard row is grouped under)."""
    from harness.compare.identity import cfg_hash

    return f"{info.agent}@{cfg_hash(info.agent_config, info.models, info.budget)}"


def candidates_table(
    info: RunInfo, rows: Sequence[CandidateRow], program_paths: Mapping[str, str]
) -> pa.Table:
    """Build the version-2 candidates table of a run.

    Args:
        info: The run header (run id, agent, configuration, variant, seed).
        rows: The run's evaluations (``RunStore.rows()``).
        program_paths: Program sha256 -> its path relative to the run directory.

    Returns:
        One row per evaluation, typed as :func:`candidates_schema`.

    Raises:
        ValueError: If a time is not ISO-8601.
    """
    metrics = [json.loads(r.metrics_json) for r in rows]  # parsed once (it dominates a flush)
    schema = candidates_schema(sorted({name for m in metrics for name in m}))
    identity = run_identity(info)
    records = []
    for r, m in zip(rows, metrics, strict=True):
        d = r.model_dump(mode="json", exclude={"metrics_json"})
        d["metrics"] = m or None  # absent names are null fields; no metric at all is a null struct
        d["cases"] = json.loads(d.pop("cases_json"))
        d["program_path"] = program_paths.get(r.program_sha256)
        d["started_at"], d["finished_at"] = _utc(r.started_at), _utc(r.finished_at)
        d.update(identity=identity, agent=info.agent, variant=info.variant, seed=info.seed)
        records.append(d)
    return pa.Table.from_pylist(records, schema=schema)


def _utc(iso: str) -> datetime:
    """An ISO-8601 time as an aware datetime (a naive one is taken as UTC, as the harness writes UTC)."""
    t = datetime.fromisoformat(iso)
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def schema_version(schema: pa.Schema) -> int:
    """The candidates schema version a file's schema declares (1 when it declares none)."""
    raw = (schema.metadata or {}).get(SCHEMA_VERSION_KEY)
    return int(raw) if raw else 1


def read_candidates_table(path: Path, info: RunInfo, program_paths: Mapping[str, str]) -> pa.Table:
    """Read a run's ``candidates.parquet`` in the current schema, upgrading an older file in memory.

    Args:
        path: The file.
        info: The run's header (supplies the run columns an old file lacks).
        program_paths: Program sha256 -> path relative to the run directory.

    Returns:
        The table in schema version :data:`CANDIDATES_SCHEMA_VERSION`.

    Raises:
        pyarrow.ArrowInvalid: If the file is unreadable.
        ValueError: If the file is of a newer schema version than this code reads, or an old
            file's row does not validate.
    """
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    version = schema_version(table.schema)
    if version == CANDIDATES_SCHEMA_VERSION:
        return table
    if version > CANDIDATES_SCHEMA_VERSION:
        raise ValueError(
            f"{path} has candidates schema version {version}; this evobench reads up to "
            f"{CANDIDATES_SCHEMA_VERSION}: update evobench"
        )
    return candidates_table(info, rows_from_table(table), program_paths)


def rows_from_table(table: pa.Table) -> list[CandidateRow]:
    """The journal rows a candidates table holds, either schema version (inverse of :func:`candidates_table`).

    Args:
        table: A candidates table as read from a file.

    Returns:
        One row per table row, in table order.

    Raises:
        pydantic.ValidationError: If a row does not validate.
    """
    if schema_version(table.schema) < 2:
        return [CandidateRow.model_validate(d) for d in table.to_pylist()]
    keep = set(CandidateRow.model_fields)
    rows = []
    for d in table.to_pylist():
        metrics = {k: v for k, v in (d.pop("metrics") or {}).items() if v is not None}
        d["metrics_json"] = json.dumps(metrics, sort_keys=True)
        d["cases_json"] = json.dumps(d.pop("cases") or [])
        d["started_at"], d["finished_at"] = d["started_at"].isoformat(), d["finished_at"].isoformat()
        rows.append(CandidateRow.model_validate({k: v for k, v in d.items() if k in keep}))
    return rows
