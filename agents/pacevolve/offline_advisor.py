"""Advisor stages of ``offline/exact``: ideas and experiments that name edits of the published vocabulary.

NOT an LLM. Every answer names one ``edit <name> <n>`` of the ``Edit vocabulary`` section the
prompt publishes, so the exact implementer turns it into exactly that program. Which edit is named
is decided by the prompt configuration a caller such as PACE applies to the request (so PACE's
fast and slow timescales change what is proposed, not just a random seed):

* **requirements** (PACE appends its structural directive as one): an option written as
  ``edit <name> <n>`` ranks first, an entry named by its name (``scale-literal``, an operator
  name) next; within a level, options the island's experiment log already shows come last, and a
  requirement to avoid what was already tried puts them after every untried option;
* **role** (the system message's first line): an explorer role ranks entries the idea pool does not
  name yet first; a role that exploits what worked ranks the entry of the pool's best idea first;
* **temperature** (the request's): the ``k``-th option of the ranking is drawn with weight
  ``exp(-k / T)``; ``T = 0`` always takes the first, so the answer is a function of the text.

The implementer's **reply format** is read by :mod:`agents.pacevolve.offline_exact`.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from harness.llm.offline import OfflinePrompt

LABEL = "Offline exact advisor (deterministic, not an LLM)."
"""First line of every advisor answer."""
_OPTION = re.compile(r"^- edit (\S+) (\d+): (.*)$")
_NAMED = re.compile(r"\bedit\s+`?([A-Za-z0-9_.\-]+)`?\s+(\d{1,3})\b", re.IGNORECASE)
_POOL_LINE = re.compile(r"^(?:Abandoned idea|Idea) (\d+) \[experiments: (\d+), best: ([^\]]+)\]: (.*)$")
_EXPLORE = ("explor", "bold", "not covered")
_EXPLOIT = ("exploit", "already worked")
_AVOID_TRIED = "already tried"


@dataclass(frozen=True)
class Option:
    """One published edit option as the prompt shows it."""

    name: str
    """Entry name (``scale-literal``, an operator name)."""
    n: int
    """Option number within the entry (from 1)."""
    shown: str
    """The prompt's description of the option."""

    @property
    def text(self) -> str:
        """How a hypothesis names it."""
        return f"edit {self.name} {self.n}"


@dataclass(frozen=True)
class PoolIdea:
    """One idea of the prompt's pool (or its abandoned list)."""

    id: int
    """Idea id."""
    experiments: int
    """Experiments run under it."""
    best: float | None
    """Best score recorded (None when untested)."""
    entry: str | None
    """The vocabulary entry its description names (None when it names none)."""


def options(p: OfflinePrompt) -> list[Option]:
    """The options of the prompt's ``Edit vocabulary`` section, in the published order."""
    out = []
    for line in p.section("edit vocabulary").split("\n"):
        m = _OPTION.match(line.strip())
        if m:
            out.append(Option(m.group(1), int(m.group(2)), m.group(3)))
    return out


def _best(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def pool(p: OfflinePrompt, title: str = "idea pool") -> list[PoolIdea]:
    """The pool's ideas with the entry each one names."""
    out = []
    for line in p.section(title).split("\n"):
        m = _POOL_LINE.match(line.strip())
        if m:
            named = _NAMED.search(m.group(4))
            entry = named.group(1) if named else None
            out.append(PoolIdea(int(m.group(1)), int(m.group(2)), _best(m.group(3)), entry))
    return out


def _role(p: OfflinePrompt) -> str:
    for m in p.messages:
        if m.get("role") == "system":
            return str(m.get("content", "")).split("\n", 1)[0].lower()
    return ""


def ranking(p: OfflinePrompt, opts: list[Option]) -> list[Option]:
    """The options ordered by what the request's prompt configuration asks for (stable otherwise)."""
    reqs = p.section("additional requirements")
    low = reqs.lower()
    named = {(m.group(1).lower(), int(m.group(2))) for m in _NAMED.finditer(reqs)}
    entries = {
        o.name.lower() for o in opts if re.search(rf"(?<![\w-]){re.escape(o.name.lower())}(?![\w-])", low)
    }
    role = _role(p)
    ideas = pool(p)
    in_pool = {i.entry.lower() for i in ideas if i.entry}
    scored = [i for i in ideas if i.entry and i.best is not None]
    maximize = "higher is better" in p.section("objective") or "maximised" in p.section("objective")
    best_entry = None
    if scored:
        pick = max(scored, key=lambda i: (i.best or 0.0) if maximize else -(i.best or 0.0))
        best_entry = (pick.entry or "").lower()
    tried = p.section("experiments already run on this island")
    avoid = _AVOID_TRIED in low

    def key(o: Option) -> tuple[int, int]:
        name = o.name.lower()
        if (name, o.n) in named:
            level = 0
        elif name in entries:
            level = 1
        elif any(w in role for w in _EXPLORE) and name not in in_pool:
            level = 2
        elif any(w in role for w in _EXPLOIT) and name == best_entry:
            level = 2
        else:
            level = 3
        seen = int(f"{o.text} ({o.shown})" in tried)
        return (seen, level) if avoid else (level, seen)

    return sorted(opts, key=key)  # sorted() is stable: the published order breaks ties


def draw(ranked: list[Option], temperature: float | None, rng: random.Random) -> Option:
    """Option ``k`` of the ranking with weight ``exp(-k / T)`` (T <= 0: the first one).

    Raises:
        ValueError: If ``ranked`` is empty.
    """
    if not ranked:
        raise ValueError("no option to draw from")
    t = 1.0 if temperature is None else temperature
    if t <= 0.0:
        return ranked[0]
    weights = [math.exp(-k / t) for k in range(len(ranked))]
    return rng.choices(ranked, weights=weights)[0]


def _hypothesis(o: Option) -> str:
    return f"{o.text} ({o.shown}); keep it if the score improves."


def idea_generation(p: OfflinePrompt, rng: random.Random) -> str:
    """Up to ``Ideas requested`` ideas, each naming an option of a different entry."""
    n = max(1, p.number("ideas requested", 3))
    ranked = ranking(p, options(p))
    if not ranked:
        return f"{LABEL}\nNo edit of the published vocabulary applies; no idea."
    chosen: list[Option] = []
    while ranked and len(chosen) < n:
        o = draw(ranked, p.temperature, rng)
        chosen.append(o)
        ranked = [r for r in ranked if r.name != o.name]
    blocks = [
        f"Idea {k}\nHypothesis: {_hypothesis(o)}\nReasoning: named from the published edit vocabulary."
        for k, o in enumerate(chosen, start=1)
    ]
    return LABEL + "\n\n" + "\n\n".join(blocks) + "\n"


def idea_classification(p: OfflinePrompt, rng: random.Random) -> str:
    """An idea naming the same entry as a pool idea refines it (abandoned: abandoned); else new."""
    m = _NAMED.search(p.section("proposed idea"))
    entry = m.group(1).lower() if m else None
    for title, verdict in (("idea pool", "yes"), ("abandoned ideas", "abandoned")):
        for idea in pool(p, title):
            if entry is not None and idea.entry is not None and idea.entry.lower() == entry:
                return (
                    f"{LABEL}\nIdea exists: {verdict}\nIdea ID: {idea.id}\nDescription: edits of `{entry}`\n"
                )
    text = " ".join(p.section("proposed idea").split())[:300] or "No edit named."
    return f"{LABEL}\nIdea exists: no\nDescription: {text}\n"


def idea_selection(p: OfflinePrompt, rng: random.Random) -> str:
    """Draw an option from the ranking and file it under the pool idea naming its entry."""
    ideas = pool(p)
    if not ideas:
        return f"{LABEL}\nThe idea pool is empty; nothing to select."
    ranked = ranking(p, options(p))
    if not ranked:
        return f"{LABEL}\nIdea ID: {ideas[0].id}\nHypothesis: no edit of the published vocabulary applies.\n"
    o = draw(ranked, p.temperature, rng)
    idea = next((i for i in ideas if i.entry and i.entry.lower() == o.name.lower()), None)
    if idea is None:  # no pool idea names it: the least tested idea carries the experiment
        idea = min(ideas, key=lambda i: (i.experiments, i.id))
    return f"{LABEL}\nIdea ID: {idea.id}\nHypothesis: {_hypothesis(o)}\n"
