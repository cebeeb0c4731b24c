"""Hierarchical Context Management (HCM): the idea pool, its caps, and the permanent failure memory.

These are the bookkeeping halves of Algorithm 1; the LLM halves (generate, classify, select,
summarise, prune) live behind the role protocols. Everything here is deterministic.
"""

from __future__ import annotations

import re

from harness.runner.context import TaskSpec

from .momentum import progress_of
from .roles import Classification, Summary
from .state import Idea, IslandState, LogEntry, PrunedIdea

MAX_DESCRIPTION_CHARS = 600
"""Longer idea descriptions are cut (the prompts ask for two sentences)."""
MAX_RECORD_CHARS = 400
"""Longer experiment records are cut."""


def fmt_score(score: float | None) -> str:
    """A score for prompts and records (``none`` when missing)."""
    return "none" if score is None else f"{score:.6g}"


def normalize(text: str) -> str:
    """Lower-cased words only: the key for exact-repeat checks against the global log."""
    return " ".join(re.findall(r"[a-z0-9_]+", text.lower()))


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def find_idea(island: IslandState, idea_id: int) -> Idea | None:
    """The active idea with this id, if any."""
    return next((i for i in island.ideas if i.id == idea_id), None)


def add_idea(island: IslandState, description: str, step: int) -> Idea:
    """Append a new idea with the next id."""
    idea = Idea(
        id=island.next_idea_id, description=_cut(description, MAX_DESCRIPTION_CHARS), created_step=step
    )
    island.next_idea_id += 1
    island.ideas.append(idea)
    return idea


def apply_classification(island: IslandState, c: Classification, step: int) -> str:
    """Apply the advisor's verdict on a proposed idea (Alg. 1 lines 4-9).

    Args:
        island: The island whose pool changes.
        c: The verdict.
        step: Current step.

    Returns:
        What happened: ``refined:<id>``, ``new:<id>`` or ``rejected:<pruned id>``.
    """
    if c.kind == "refine" and c.idea_id is not None and (idea := find_idea(island, c.idea_id)):
        idea.description = _cut(c.description, MAX_DESCRIPTION_CHARS) or idea.description
        return f"refined:{idea.id}"
    if c.kind == "known_failure":
        return f"rejected:{c.idea_id}"
    return f"new:{add_idea(island, c.description, step).id}"


def already_tried(island: IslandState, hypothesis: str) -> bool:
    """Whether the same hypothesis (up to case, spacing and punctuation) is in the global log."""
    key = normalize(hypothesis)
    return any(normalize(e.hypothesis) == key for e in island.log)


def record_experiment(
    island: IslandState, idea_id: int, record: str, score: float | None, task: TaskSpec
) -> None:
    """Append an experiment record to an idea and update its counters (Alg. 1 line 14).

    Args:
        island: The island.
        idea_id: The idea the experiment belonged to (ignored if it was pruned meanwhile).
        record: One-line record of hypothesis and result.
        score: The score when evaluated ok.
        task: The task (for the direction).
    """
    idea = find_idea(island, idea_id)
    if idea is None:
        return
    idea.history.append(_cut(record, MAX_RECORD_CHARS))
    idea.experiments += 1
    if score is not None and (idea.best is None or task.better(score, idea.best)):
        idea.best = score


def log_attempt(island: IslandState, entry: LogEntry) -> None:
    """Add an attempted hypothesis to the permanent global log (Alg. 1 line 15)."""
    island.log.append(entry.model_copy(update={"hypothesis": _cut(entry.hypothesis, MAX_RECORD_CHARS)}))


def needs_summary(idea: Idea, cap: int) -> bool:
    """The hypothesis cap of Alg. 1 line 17: more than ``cap`` records."""
    return len(idea.history) > cap


def apply_summary(idea: Idea, summary: Summary) -> None:
    """Replace an idea's records by its key findings (Alg. 1 line 19) and restate its description."""
    idea.history = [_cut(f"Key findings after {idea.experiments} experiments: {summary.findings}", 1200)]
    if summary.description.strip():
        idea.description = _cut(summary.description, MAX_DESCRIPTION_CHARS)
    idea.summaries += 1


def excess_ideas(island: IslandState, cap: int) -> int:
    """How many ideas must go to get back to the cap (Alg. 1 line 21)."""
    return max(0, len(island.ideas) - cap)


def drop_ideas(island: IslandState, ids: list[int], step: int, reason: str) -> list[int]:
    """Move ideas from the pool to the permanent failure memory.

    Returns:
        The ids actually dropped (unknown ids are ignored).
    """
    dropped: list[int] = []
    for idea_id in ids:
        idea = find_idea(island, idea_id)
        if idea is None:
            continue
        island.ideas.remove(idea)
        island.pruned.append(
            PrunedIdea(
                id=idea.id,
                description=idea.description,
                experiments=idea.experiments,
                best=idea.best,
                findings=idea.history[-1] if idea.history else "no experiments",
                step=step,
                reason=_cut(reason, 300),
            )
        )
        dropped.append(idea_id)
    return dropped


def fallback_prune(ideas: list[Idea], n_drop: int, task: TaskSpec) -> list[int]:
    """Deterministic pruning when the advisor gives no usable answer.

    Drops the ideas with the lowest best progress first (untested ideas count as 0), then the
    most tested, then the oldest.
    """
    ranked = sorted(ideas, key=lambda i: (progress_of(i.best, task), -i.experiments, i.id))
    return [i.id for i in ranked[:n_drop]]


def merge_ideas(island: IslandState, incoming: list[Idea], step: int) -> list[int]:
    """Add copies of ideas (from a partner or an earlier pool) that the pool does not hold yet.

    An idea is already held when an active idea has the same id and description, or the same
    normalised description.

    Returns:
        Ids of the added ideas (fresh ids of this island).
    """
    held = {(i.id, i.description) for i in island.ideas}
    texts = {normalize(i.description) for i in island.ideas}
    added: list[int] = []
    for idea in incoming:
        if (idea.id, idea.description) in held or normalize(idea.description) in texts:
            continue
        copy = idea.model_copy(deep=True, update={"id": island.next_idea_id, "created_step": step})
        island.next_idea_id += 1
        island.ideas.append(copy)
        texts.add(normalize(copy.description))
        added.append(copy.id)
    return added


def render_pool(ideas: tuple[Idea, ...] | list[Idea], records: bool = True) -> str:
    """The idea pool as prompt text: ``Idea <id> [experiments: n, best: s]: description`` plus records."""
    if not ideas:
        return "(empty: no ideas yet)"
    out: list[str] = []
    for i in ideas:
        out.append(f"Idea {i.id} [experiments: {i.experiments}, best: {fmt_score(i.best)}]: {i.description}")
        if records:
            out.extend(f"  - {r}" for r in i.history)
    return "\n".join(out)


def render_pruned(pruned: tuple[PrunedIdea, ...] | list[PrunedIdea]) -> str:
    """The failure memory as prompt text: ``Abandoned idea <id> [...]: description (findings)``."""
    if not pruned:
        return "(none)"
    return "\n".join(
        f"Abandoned idea {p.id} [experiments: {p.experiments}, best: {fmt_score(p.best)}]: "
        f"{p.description} (findings: {_cut(p.findings, 200)})"
        for p in pruned
    )


def render_log(log: tuple[LogEntry, ...] | list[LogEntry], limit: int = 30) -> str:
    """The most recent ``limit`` attempted hypotheses as prompt text."""
    if not log:
        return "(none)"
    recent = list(log)[-limit:]
    lines = [f"- [idea {e.idea_id}] {e.hypothesis} -> {e.outcome}" for e in recent]
    if len(log) > limit:
        lines.insert(0, f"({len(log) - limit} earlier attempts not shown)")
    return "\n".join(lines)
