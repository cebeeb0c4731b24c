"""Read role answers: tolerant of model noise, strict about what is accepted.

Tolerated: prose around the answer, reasoning blocks (``<think>...</think>``), markdown emphasis
and bullets around field names (``**Idea ID:** 3``), answers wrapped in code fences, fenced or
bare programs. Rejected with a :class:`ParseError` that says what is wrong (and is shown to the
model on a retry): missing fields, ids that are not in the pool, empty hypotheses, edits that do
not apply or change text outside the EVOLVE-BLOCKs, edits that change nothing.
"""

from __future__ import annotations

import re

from harness.llm.offline import code_blocks
from harness.program import (
    MARKER_START,
    FullRewrite,
    PatchError,
    ProgramFormatError,
    apply_edit,
    parse_diff,
)

from .roles import Classification, Selection, Summary

MIN_HYPOTHESIS_CHARS = 8
"""Shorter hypotheses are rejected as empty."""
MAX_FIELD_CHARS = 2000
"""Longer field values are cut."""
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_ANY_FIELD = re.compile(r"^\s*(?:[-*>#]+\s*)?(?:\*\*|__)?\s*[A-Za-z][A-Za-z ]{1,30}?\s*(?:\*\*|__)?\s*:")
_IDEA_HEADER = re.compile(
    r"^\s*(?:[-*>#]+\s*)?(?:\*\*|__)?\s*idea\s*#?\s*\d+\b\s*(?:\*\*|__)?\s*:?\s*$", re.I
)
_YES = {"yes", "true", "y", "exists", "same"}
_NO = {"no", "false", "n", "new"}
_ABANDONED = {"abandoned", "pruned", "known failure", "known_failure", "failure"}


class ParseError(ValueError):
    """An answer does not follow the requested format (the message says how)."""


def clean(text: str) -> str:
    """Drop reasoning blocks and normalise line ends."""
    return _THINK.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def _field_regex(names: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(n).replace(r"\ ", r"\s*") for n in names)
    return re.compile(
        rf"^\s*(?:[-*>#]+\s*)?(?:\*\*|__)?\s*(?:{alt})\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(.*?)\s*(?:\*\*|__)?\s*$",
        re.IGNORECASE,
    )


def fields(text: str, *names: str) -> list[str]:
    """Every value of the fields ``names`` in order; a value continues until a blank line or next field.

    Args:
        text: The (cleaned) answer.
        names: Field names, matched case-insensitively.

    Returns:
        The values, whitespace-collapsed and cut to :data:`MAX_FIELD_CHARS`.
    """
    pattern = _field_regex(names)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = pattern.match(lines[i])
        if not m:
            i += 1
            continue
        parts = [m.group(1)]
        i += 1
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if (
                not stripped
                or stripped.startswith("```")
                or _ANY_FIELD.match(line)
                or _IDEA_HEADER.match(line)
            ):
                break
            parts.append(stripped)
            i += 1
        value = " ".join(" ".join(parts).split()).strip("*_ ")
        out.append(value[:MAX_FIELD_CHARS])
    return out


def field(text: str, *names: str) -> str | None:
    """The first value of the fields ``names``, or None."""
    found = fields(text, *names)
    return found[0] if found else None


def _int(value: str | None, what: str) -> int:
    m = re.search(r"-?\d+", value or "")
    if m is None:
        raise ParseError(f"'{what}:' must give a number")
    return int(m.group(0))


def parse_ideas(text: str, n: int) -> list[str]:
    """The hypotheses of an idea-generation answer (at most ``n``, duplicates removed).

    Raises:
        ParseError: If no non-empty ``Hypothesis:`` line is found.
    """
    seen: set[str] = set()
    ideas: list[str] = []
    for h in fields(clean(text), "hypothesis"):
        key = h.lower()
        if len(h) >= MIN_HYPOTHESIS_CHARS and key not in seen:
            seen.add(key)
            ideas.append(h)
    if not ideas:
        raise ParseError("no idea found: write each idea as 'Hypothesis: <text>' on its own line")
    return ideas[:n]


def parse_classification(text: str, pool_ids: set[int], pruned_ids: set[int]) -> Classification:
    """The verdict of a novelty classification.

    Raises:
        ParseError: If ``Idea exists:`` is missing or not yes / no / abandoned, the id is not in
            the pool (yes) or the failure memory (abandoned), or a needed description is empty.
    """
    t = clean(text)
    verdict = (field(t, "idea exists", "exists") or "").strip(" .").lower()
    description = field(t, "updated description", "idea description", "description") or ""
    if verdict in _YES:
        idea_id = _int(field(t, "idea id", "id"), "Idea ID")
        if idea_id not in pool_ids:
            raise ParseError(f"Idea ID {idea_id} is not in the pool (ids: {sorted(pool_ids)})")
        if not description:
            raise ParseError("'Description:' is missing")
        return Classification("refine", idea_id, description)
    if verdict in _ABANDONED:
        idea_id = _int(field(t, "idea id", "id"), "Idea ID")
        if idea_id not in pruned_ids:
            raise ParseError(f"Idea ID {idea_id} is not an abandoned idea (ids: {sorted(pruned_ids)})")
        return Classification("known_failure", idea_id, description)
    if verdict in _NO:
        if not description:
            raise ParseError("'Description:' is missing")
        return Classification("new", None, description)
    raise ParseError("'Idea exists:' must be yes, no or abandoned")


def parse_selection(text: str, pool_ids: set[int]) -> Selection:
    """The chosen idea and hypothesis.

    Raises:
        ParseError: If the id is missing or not in the pool, or the hypothesis is empty.
    """
    t = clean(text)
    idea_id = _int(field(t, "idea id", "chosen idea", "idea"), "Idea ID")
    if idea_id not in pool_ids:
        raise ParseError(f"Idea ID {idea_id} is not in the pool (ids: {sorted(pool_ids)})")
    hypothesis = field(t, "hypothesis", "experiment description", "experiment") or ""
    if len(hypothesis) < MIN_HYPOTHESIS_CHARS:
        raise ParseError("'Hypothesis:' is missing or empty")
    return Selection(idea_id, hypothesis)


def _full_programs(text: str) -> list[str]:
    blocks = [body for _, body in code_blocks(text) if MARKER_START in body]
    if blocks:
        return blocks
    if MARKER_START in text and "```" not in text:
        return [text.strip("\n") + "\n"]
    return []


def parse_edit(text: str, program: str, language: str) -> str:
    """Apply the edit an implementer answered with and return the new program.

    SEARCH/REPLACE hunks win; without them, the first fenced (or bare) complete program that
    contains the EVOLVE-BLOCK markers is taken as a full rewrite.

    Raises:
        ParseError: If no edit is found, a hunk is malformed or does not apply, the rewrite
            changes text outside the EVOLVE-BLOCKs, or the result equals ``program``.
    """
    t = clean(text)
    try:
        diff = parse_diff(t)
    except PatchError as e:
        raise ParseError(f"malformed SEARCH/REPLACE block: {e}") from None
    try:
        if diff.hunks:
            new = apply_edit(program, diff, language)
        else:
            candidates = _full_programs(t)
            if not candidates:
                raise ParseError("no SEARCH/REPLACE block and no complete program with EVOLVE-BLOCK markers")
            rewrite = candidates[0]
            if program.endswith("\n") and not rewrite.endswith("\n"):
                rewrite += "\n"
            new = apply_edit(program, FullRewrite(rewrite), language)
    except (PatchError, ProgramFormatError) as e:
        raise ParseError(f"the edit cannot be applied: {e}") from None
    if new == program:
        raise ParseError("the edit leaves the program unchanged")
    return new


def parse_summary(text: str) -> Summary:
    """Description and key findings of a summary.

    Raises:
        ParseError: If ``Findings:`` is missing or empty.
    """
    t = clean(text)
    findings = field(t, "findings", "key findings", "summary") or ""
    if len(findings) < MIN_HYPOTHESIS_CHARS:
        raise ParseError("'Findings:' is missing or empty")
    return Summary(field(t, "description") or "", findings)


def parse_drop(text: str, pool_ids: set[int], n_drop: int) -> tuple[list[int], str]:
    """Ids to prune (the first ``n_drop`` valid ones) and the reason.

    Raises:
        ParseError: If ``Drop:`` is missing, names an id not in the pool, or names none.
    """
    t = clean(text)
    value = field(t, "drop", "dropping ideas", "drop ideas", "ideas to drop")
    if value is None:
        raise ParseError("'Drop: [<id>, ...]' is missing")
    ids: list[int] = []
    for m in re.findall(r"-?\d+", value):
        idea_id = int(m)
        if idea_id not in pool_ids:
            raise ParseError(f"cannot drop idea {idea_id}: not in the pool (ids: {sorted(pool_ids)})")
        if idea_id not in ids:
            ids.append(idea_id)
    if not ids:
        raise ParseError("'Drop:' names no idea")
    return ids[:n_drop], field(t, "reason") or ""


def parse_repeat(text: str) -> bool:
    """Whether the repetition filter judged the experiment a repeat.

    Raises:
        ParseError: If ``Repeat:`` is missing or not yes / no.
    """
    value = (field(clean(text), "repeat", "repetition", "dropping ideas") or "").strip(" .").lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise ParseError("'Repeat:' must be yes or no")
