"""The per-call LLM ledger of a run: ``llm_calls.jsonl`` (journal) and ``llm_calls.parquet`` (snapshot).

One row per attempt to call a model, successful or not, cached or not. Rows hold counts, money,
timing and a masked error message; never a prompt, a response or a credential. The journal is
the source of truth for the run's LLM spend: a resumed run reads it back, so the cost cap
covers calls made before a crash too.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .journal import RecordJournal

LEDGER_STEM = "llm_calls"
"""File stem of the ledger inside the run directory."""
KIND_LLM = "llm"
"""``kind`` of a row for a real language model."""
KIND_OFFLINE = "offline-proposer (not an LLM)"
"""``kind`` of a row for the deterministic offline proposer."""


def utc_now() -> str:
    """The current UTC time as ISO-8601."""
    return datetime.now(UTC).isoformat()


class LLMCallRow(BaseModel):
    """One attempt to call a model."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    call_id: str
    """Unique id of the attempt."""
    started_at: str
    """ISO-8601 UTC time the attempt started."""
    role: str
    """Agent role that made the call (``advisor``, ``implementer``, ``summariser``, ...)."""
    model: str
    """litellm model string the role maps to, e.g. ``gemini/gemini-2.5-pro`` or ``offline/pacevolve``."""
    kind: str = KIND_LLM
    """``llm`` for a language model; ``offline-proposer (not an LLM)`` for the offline proposer."""
    stage: str = ""
    """Agent-defined label of the prompt (e.g. ``idea_generation``)."""
    step: int = -1
    """Agent step the call belongs to (-1: none)."""
    thread: int = -1
    """Island / thread the call belongs to (-1: none)."""
    attempt: int = Field(default=0, ge=0)
    """0-based retry number of this request."""
    ok: bool = True
    """Whether a response came back."""
    cache_hit: bool = False
    """Whether the response came from the response cache (no provider call, no cost)."""
    tokens_in: int = Field(default=0, ge=0)
    """Prompt tokens reported by the provider (estimated for the offline proposer)."""
    tokens_out: int = Field(default=0, ge=0)
    """Completion tokens reported by the provider (estimated for the offline proposer)."""
    cost_usd: float = Field(default=0.0, ge=0.0)
    """Cost of the attempt from litellm's local model cost map (0 when unknown or cached)."""
    cost_known: bool = True
    """False when the model has no entry in the cost map (``cost_usd`` is then 0)."""
    latency_s: float = Field(default=0.0, ge=0.0)
    """Wall-clock seconds of the attempt."""
    error_type: str = ""
    """Exception class of a failed attempt."""
    error: str = ""
    """Masked error message of a failed attempt (secrets replaced, truncated)."""
    transient: bool = False
    """Whether the error was judged transient (and retried)."""
    request_sha256: str = ""
    """Hash of (model, messages, parameters, seed): the response-cache key."""
    response_chars: int = Field(default=0, ge=0)
    """Length of the response text."""


class Ledger:
    """Appends :class:`LLMCallRow` records and keeps running totals (thread-safe).

    Attributes:
        journal: The underlying journal (in memory when the run directory is None).
    """

    def __init__(self, run_dir: Path | None) -> None:
        """Open the ledger of a run directory, reading back earlier rows of a resumed run.

        Args:
            run_dir: The run directory, or None to keep rows in memory.

        Raises:
            OSError: If the journal cannot be opened.
        """
        self.journal: RecordJournal[LLMCallRow] = RecordJournal(run_dir, LEDGER_STEM, LLMCallRow)
        self._lock = threading.Lock()
        earlier = self.journal.rows()
        self._cost = math.fsum(r.cost_usd for r in earlier)
        self._calls = len(earlier)
        self._tokens_in = sum(r.tokens_in for r in earlier)
        self._tokens_out = sum(r.tokens_out for r in earlier)

    def record(self, row: LLMCallRow) -> None:
        """Append a row and add it to the totals.

        Raises:
            OSError: If the journal write fails.
        """
        self.journal.append(row)
        with self._lock:
            self._cost += row.cost_usd
            self._calls += 1
            self._tokens_in += row.tokens_in
            self._tokens_out += row.tokens_out

    @property
    def cost_usd(self) -> float:
        """Total cost of all recorded attempts, including earlier sessions of the run."""
        with self._lock:
            return self._cost

    @property
    def calls(self) -> int:
        """Number of recorded attempts, including earlier sessions."""
        with self._lock:
            return self._calls

    @property
    def tokens(self) -> tuple[int, int]:
        """Total (prompt, completion) tokens, including earlier sessions."""
        with self._lock:
            return self._tokens_in, self._tokens_out

    def rows(self) -> list[LLMCallRow]:
        """All rows written so far."""
        return self.journal.rows()

    def flush(self) -> int:
        """Rewrite ``llm_calls.parquet`` from the journal.

        Returns:
            Number of rows.

        Raises:
            OSError: If writing fails.
        """
        return self.journal.flush()
