"""Hierarchical Context Management (HCM): the idea pool, its caps, and the permanent failure memory.

These are the bookkeeping halves of Algorithm 1; the LLM halves (generate, classify, select,
summarise, prune) live behind the role protocols. Everything here is deterministic.

Two memories of past attempts are kept apart:

* the **global log** L (``IslandState.log``) holds every attempted hypothesis for the whole run;
  the repeat filter of Alg. 1 line 12 reads all of it;
* the **context log** is what the prompts show: the chain of attempts from
  ``IslandState.context_head`` back along ``LogEntry.prev``. A backtrack moves the head back to
  the restored state's, so the attempts after the backtrack point are unlearned from the
  context (PACEvolve §3.2) while staying in L.

The failure memory of pruned ideas is bounded (``max_abandoned_ideas``): over the cap the least
recently relevant entry (pruned longest ago and not matched by a proposal since) is evicted.
"""

from __future__ import annotations

import math

from harness.llm.offline.vocabulary import edit_key
from harness.runner.context import TaskSpec

from .roles import Classification, Summary
from .state import Idea, IslandState, LogEntry, PrunedIdea

MAX_DESCRIPTION_CHARS = 600
"""Longer idea descriptions are cut (the prompts ask for two sentences)."""
MAX_RECORD_CHARS = 400
"""Longer experiment records are cut."""
CONTEXT_LOG_SHOWN = 30
"""Prompts show at most this many of the newest context-log attempts."""


def fmt_score(score: float | None) -> str:
    """A score for prompts and records (``none`` when missing)."""
    return "none" if score is None else f"{score:.6g}"


def normalize(text: str) -> str:
    """The key for repeat checks against the global log: the named edit, else the words.

    See :func:`harness.llm.offline.vocabulary.edit_key`: ``edit add-term 4`` and ``edit
    add-term 4`` followed by any free text are the same experiment.
    """
    return edit_key(text)


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
        for p in island.pruned:
            if p.id == c.idea_id:  # a proposal hit it: it is still relevant
                p.last_relevant, p.rejections = step, p.rejections + 1
        return f"rejected:{c.idea_id}"
    return f"new:{add_idea(island, c.description, step).id}"


def already_tried(island: IslandState, hypothesis: str) -> bool:
    """Whether the global log holds the same experiment: the same named edit, or the same words."""
    key = normalize(hypothesis)
    if not key:  # no words to compare: every such hypothesis would collide
        return False
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
    """Add an attempted hypothesis to the global log (Alg. 1 line 15) and to the context log."""
    head = island.context_head
    depth = island.log[head].depth + 1 if 0 <= head < len(island.log) else 1
    island.log.append(
        entry.model_copy(
            update={"hypothesis": _cut(entry.hypothesis, MAX_RECORD_CHARS), "prev": head, "depth": depth}
        )
    )
    island.context_head = len(island.log) - 1


def context_log(island: IslandState, limit: int | None = None) -> tuple[list[LogEntry], int]:
    """The attempts the island's prompts show, oldest first, and how many there are in all.

    Args:
        island: The island.
        limit: Return only the newest this many (None: all).

    Returns:
        The entries on the chain ending at ``context_head`` (at most ``limit``) and the chain length.
    """
    head = island.context_head
    if not 0 <= head < len(island.log):
        return [], 0
    total = island.log[head].depth
    out: list[LogEntry] = []
    i = head
    while 0 <= i < len(island.log) and (limit is None or len(out) < limit):
        out.append(island.log[i])
        i = island.log[i].prev
    out.reverse()
    return out, total


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
    """Move ideas from the pool to the failure memory (bound it with :func:`evict_abandoned`).

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
                last_relevant=step,
            )
        )
        dropped.append(idea_id)
    return dropped


def evict_abandoned(island: IslandState, cap: int) -> list[int]:
    """Shrink the failure memory to ``cap`` entries, least recently relevant first.

    An entry is relevant when it was pruned or when a new proposal matched it (the classifier
    rejected the proposal as a known failure); among equally recent entries the one with fewer
    experiments behind it (weaker evidence) and then the older id goes first.

    Returns:
        Ids of the evicted entries.
    """
    excess = len(island.pruned) - cap
    if excess <= 0:
        return []
    order = sorted(island.pruned, key=lambda p: (p.last_relevant, p.experiments, p.step, p.id))
    gone = {id(p) for p in order[:excess]}
    evicted = [p.id for p in order[:excess]]
    island.pruned = [p for p in island.pruned if id(p) not in gone]
    island.pruned_evicted += excess
    return evicted


def fallback_prune(ideas: list[Idea], n_drop: int, task: TaskSpec) -> list[int]:
    """Deterministic pruning when the advisor gives no usable answer.

    Drops the ideas with the worst best score first (untested ideas first of all), then the
    most tested, then the oldest.
    """
    sign = 1.0 if task.maximize else -1.0
    ranked = sorted(
        ideas, key=lambda i: (-math.inf if i.best is None else sign * i.best, -i.experiments, i.id)
    )
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


def render_pruned(pruned: tuple[PrunedIdea, ...] | list[PrunedIdea], evicted: int = 0) -> str:
    """The failure memory as prompt text: ``Abandoned idea <id> [...]: description (findings)``."""
    lines = [
        f"Abandoned idea {p.id} [experiments: {p.experiments}, best: {fmt_score(p.best)}]: "
        f"{p.description} (findings: {_cut(p.findings, 200)})"
        for p in pruned
    ]
    if evicted:
        lines.insert(0, f"({evicted} older abandoned ideas no longer listed)")
    return "\n".join(lines) if lines else "(none)"


def render_log(log: tuple[LogEntry, ...] | list[LogEntry], total: int | None = None) -> str:
    """Attempted hypotheses as prompt text (``total``: the length of the whole context log)."""
    if not log:
        return "(none)"
    lines = [f"- [idea {e.idea_id}] {e.hypothesis} -> {e.outcome}" for e in log]
    hidden = (total if total is not None else len(log)) - len(log)
    if hidden > 0:
        lines.insert(0, f"({hidden} earlier attempts not shown)")
    return "\n".join(lines)
