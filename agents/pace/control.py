"""The agent's control logic C and the bounded edits the slow timescale may make to it.

The control logic is the part of the PACEvolve scaffold that decides *how* the search proceeds:
parent selection by backtracking and crossover, the intervention schedule, idea-pool sizes and
the retry / repair policy. A control edit may set only the fields of :data:`EDITABLE` within
their bounds, plus a free-form structural directive for the task's evolvable block. Naming any
other field is an attempt to change an immutable harness function and raises
:class:`ImmutableFieldError` (PACE's gate 2); code written under a structural directive must pass
:func:`safety_violation` (gates 3 and 4: forbidden primitives, ``compile``) before it is evaluated.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

EDITABLE: dict[str, tuple[type, Any, Any]] = {
    "backtracking": (bool, None, None),
    "crossover": (bool, None, None),
    "momentum_decay": (float, 0.5, 0.99),
    "stagnation_threshold": (float, 0.0, 0.1),
    "freeze_period": (int, 0, 30),
    "power_law_alpha": (float, 0.1, 4.0),
    "backtrack_length": (int, 1, 20),
    "ideas_per_generation": (int, 1, 6),
    "max_ideas": (int, 1, 10),
    "max_attempts": (int, 1, 5),
    "max_fix_attempts": (int, 0, 4),
    "skip_repeats": (bool, None, None),
}
"""Control fields a slow-timescale edit may set: name -> (type, lower bound, upper bound)."""
IMMUTABLE = (
    "model", "advisor_model", "implementer_model", "summariser_model", "controller_model", "islands",
    "evaluate", "call_llm", "scorer", "budget", "max_cost_usd", "cache", "litellm_params", "epsilon",
    "delta", "token_budget", "timeout_s",
)  # fmt: skip
"""Fields and harness functions an edit may never touch (named so the rejection reason is exact)."""
MAX_DIRECTIVE_CHARS = 300
"""Longest structural directive."""
PY_FORBIDDEN = (
    (re.compile(r"\btime\s*\.\s*sleep\b|\bfrom\s+time\s+import\s+[^\n]*\bsleep\b"), "time.sleep"),
    (re.compile(r"^\s*(import\s+logging\b|from\s+logging\b)", re.MULTILINE), "import logging"),
)
CPP_FORBIDDEN = ((re.compile(r"\b(usleep|nanosleep|sleep_for|sleep_until)\s*\(|\bsleep\s*\("), "sleep"),)


class ImmutableFieldError(ValueError):
    """A control edit named a field or harness function outside the editable set."""


class ControlEdit(BaseModel):
    """One proposed change of the control logic."""

    model_config = ConfigDict(extra="forbid")

    set: dict[str, Any] = {}
    """Editable field -> new value (validated by :func:`validate_edit`)."""
    directive: str = Field(default="", max_length=MAX_DIRECTIVE_CHARS)
    """Free-form structural change of the evolvable block to try under the new control logic."""
    parse: str = "json"
    """How the answer was read: ``json`` or ``free-text`` (a directive only)."""


def validate_edit(raw: dict[str, Any]) -> dict[str, Any]:
    """Check and coerce the ``set`` part of an edit.

    Raises:
        ImmutableFieldError: If a key is not editable (the message names it).
        ValueError: If a value has the wrong type or is out of bounds.
    """
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in EDITABLE:
            kind = (
                "an immutable harness function/field"
                if name in IMMUTABLE
                else "not an editable control field"
            )
            raise ImmutableFieldError(f"{name!r} is {kind}; editable: {', '.join(EDITABLE)}")
        typ, lo, hi = EDITABLE[name]
        if typ is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
            out[name] = value
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number, got {value!r}")
        if typ is int and float(value) != int(value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        v = typ(value)
        if not lo <= v <= hi:
            raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
        out[name] = v
    return out


def parse_control_edit(text: str) -> ControlEdit:
    """Read the controller's answer.

    A JSON object ``{"set": {...}, "directive": "..."}`` anywhere in the text; without one, the
    first non-empty line becomes a directive alone.

    Raises:
        ImmutableFieldError: If the JSON names a non-editable field.
        ValueError: If the answer is empty or a value is invalid.
    """
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[m.start() :])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and ("set" in obj or "directive" in obj):
            fields = obj.get("set") or {}
            if not isinstance(fields, dict):
                raise ValueError("'set' must be an object")
            directive = _clean(str(obj.get("directive") or ""))[:MAX_DIRECTIVE_CHARS]
            return ControlEdit(set=validate_edit(fields), directive=directive, parse="json")
    lines = [_clean(ln) for ln in text.splitlines() if not ln.strip().startswith("```")]
    lines = [ln for ln in lines if re.search(r"[A-Za-z]{3}", ln) and not ln.startswith("[offline")]
    if not lines:
        raise ValueError("no control edit: neither a JSON object nor a line of text")
    return ControlEdit(directive=lines[0][:MAX_DIRECTIVE_CHARS], parse="free-text")


def _clean(text: str) -> str:
    """One line of plain text: backticks, list and heading marks and repeated spaces removed."""
    return " ".join(text.replace("`", " ").strip(" -*#>\t").split())


def safety_violation(program: str, language: str) -> str:
    """Why a program written under a control edit may not be evaluated ('' when it may).

    Python: no ``time.sleep``, no ``logging`` import, and ``compile()`` must succeed (the reason
    gives line, column and text of the syntax error). C++: no sleeping calls.
    """
    rules = CPP_FORBIDDEN if language == "cpp" else PY_FORBIDDEN
    for pattern, name in rules:
        if pattern.search(program):
            return f"forbidden primitive: {name}"
    if language != "cpp":
        try:
            compile(program, "<candidate>", "exec")
        except SyntaxError as e:
            return (
                f"SyntaxError at line {e.lineno}, column {e.offset}: {e.msg}: {(e.text or '').strip()[:120]}"
            )
        except ValueError as e:  # e.g. null bytes
            return f"does not compile: {e}"
    return ""
