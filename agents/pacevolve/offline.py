"""``offline/pacevolve``: the deterministic offline proposer for PACEvolve's prompts. NOT an LLM.

It answers every stage of the agent in the requested format so that the whole pipeline (idea
pool, caps, backtracking, crossover, ledger, resume) runs without network or API key:

* ideas are the environment's mutation operators (``TaskSpec.mutations`` plus the generic
  numeric / comparison operators), each named in backticks (operator `name`);
* classification matches a proposal to the pool idea (or abandoned idea) naming the same operator;
* selection prefers ideas with few experiments;
* implementation applies the named operator (sometimes stacked with a random one) to the program
  in the prompt and answers with SEARCH/REPLACE hunks (``make_diff`` + ``render_diff``);
* an environment may offer operators that read the hypothesis
  (:class:`~harness.llm.offline.hypothesis.HypothesisMutation`; used by test instruments such as
  ``selftest-bandit``): the implementation stage then first applies them to the hypothesis text
  of the prompt's ``Change to make`` section, exactly as the advisor wrote it, and answers with
  that edit; when none changes the program it falls back to the operator rule above;
* summaries and pruning read the scores written in the pool and the records.

The program comes from the prompt itself; the operators come from the per-run side channel
:func:`harness.llm.offline.register_operators`, which the agent fills at start. Every answer
is a function of the request (messages and seed), so resumed runs repeat themselves exactly.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from harness.llm.offline import (
    OfflinePrompt,
    hypothesis_operators,
    operators_for,
    propose_edit,
    register_offline_proposer,
)
from harness.program import PatchError, ProgramFormatError, make_diff, render_diff

NAME = "pacevolve"
"""Proposer name: the model string is ``offline/pacevolve``."""
LABEL = "Offline proposer (deterministic, not an LLM)."
"""First line of every answer."""
_OP = re.compile(r"operator `([^`]+)`")
_POOL_LINE = re.compile(r"^Idea (\d+) \[experiments: (\d+), best: ([^\]]+)\]: (.*)$")
_ABANDONED_LINE = re.compile(r"^Abandoned idea (\d+) \[experiments: (\d+), best: ([^\]]+)\]: (.*)$")
_SCORE = re.compile(r"score (-?[0-9.]+(?:e[-+]?\d+)?)")
_FENCE = re.compile(r"^[ \t]*(`{3,})")
_CHANGE_HEADING = "## Change to make"
_HYPOTHESIS_FIELD = "\nHypothesis: "
_RULES_HEADING = "\n\n## Rules\n"


@dataclass(frozen=True)
class _Entry:
    id: int
    experiments: int
    best: float | None
    description: str

    @property
    def operator(self) -> str | None:
        m = _OP.search(self.description)
        return m.group(1) if m else None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _entries(text: str, pattern: re.Pattern[str]) -> list[_Entry]:
    out = []
    for line in text.split("\n"):
        m = pattern.match(line.strip())
        if m:
            out.append(_Entry(int(m.group(1)), int(m.group(2)), _float(m.group(3)), m.group(4)))
    return out


def _pool(p: OfflinePrompt) -> list[_Entry]:
    return _entries(p.section("idea pool"), _POOL_LINE)


def _abandoned(p: OfflinePrompt) -> list[_Entry]:
    return _entries(p.section("abandoned ideas"), _ABANDONED_LINE)


def _op_names(p: OfflinePrompt) -> list[str]:
    return [op.name for op in operators_for(p.env_id)]


def _idea_text(name: str) -> str:
    return f"Explore the operator `{name}` transformation of the program and keep variants that score better."


def idea_generation(p: OfflinePrompt, rng: random.Random) -> str:
    """Name up to ``Ideas requested`` operators, preferring ones the pool and failure memory lack."""
    n = max(1, p.number("ideas requested", 3))
    names = _op_names(p)
    used = {e.operator for e in _pool(p) + _abandoned(p)}
    fresh = [x for x in names if x not in used]
    rest = [x for x in names if x in used]
    rng.shuffle(fresh)
    rng.shuffle(rest)
    chosen = (fresh + rest)[:n]
    blocks = [
        f"Idea {k}\nHypothesis: {_idea_text(name)}\n"
        f"Reasoning: operator drawn from the environment's mutation set."
        for k, name in enumerate(chosen, start=1)
    ]
    return LABEL + "\n\n" + "\n\n".join(blocks) + "\n"


def idea_classification(p: OfflinePrompt, rng: random.Random) -> str:
    """Same operator as a pool idea: refine it; as an abandoned idea: abandoned; else new."""
    m = _OP.search(p.section("proposed idea"))
    name = m.group(1) if m else None
    for e in _pool(p):
        if name is not None and e.operator == name:
            return f"{LABEL}\nIdea exists: yes\nIdea ID: {e.id}\nDescription: {e.description}\n"
    for e in _abandoned(p):
        if name is not None and e.operator == name:
            return f"{LABEL}\nIdea exists: abandoned\nIdea ID: {e.id}\nDescription: {e.description}\n"
    text = _idea_text(name) if name else "Apply a random environment operator to the program."
    return f"{LABEL}\nIdea exists: no\nDescription: {text}\n"


def idea_selection(p: OfflinePrompt, rng: random.Random) -> str:
    """Pick an idea with probability proportional to 1 / (1 + experiments) and vary its operator."""
    pool = _pool(p)
    if not pool:
        return f"{LABEL}\nThe idea pool is empty; nothing to select."
    idea = rng.choices(pool, weights=[1.0 / (1 + e.experiments) for e in pool])[0]
    name = idea.operator or rng.choice(_op_names(p) or ["perturb_numeric_literal"])
    variant = rng.randrange(1_000_000)
    return (
        f"{LABEL}\nIdea ID: {idea.id}\n"
        f"Hypothesis: Apply operator `{name}` at a new site (offline variant {variant}); "
        f"keep the change if the score improves.\n"
    )


def _hypothesis_in(text: str) -> str | None:
    """The hypothesis of an implementation prompt (``prompts/implementation.md``), or None.

    The ``Change to make`` heading is looked for outside code fences (the task prompt and the
    program come before it), then the hypothesis runs from the first ``Hypothesis: `` line after
    it (idea descriptions are one line: the agent collapses their whitespace) to the template's
    last ``## Rules`` heading, so a hypothesis may span lines and hold any text but that heading.
    """
    fence: str | None = None
    pos = 0
    start = -1
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None and line.rstrip() == _CHANGE_HEADING:
            start = pos + len(line)
            break
        pos += len(line) + 1
    if start < 0:
        return None
    field = text.find(_HYPOTHESIS_FIELD, start)
    if field < 0:
        return None
    begin = field + len(_HYPOTHESIS_FIELD)
    end = text.rfind(_RULES_HEADING)
    return text[begin : end if end >= begin else len(text)]


def selected_hypothesis(p: OfflinePrompt) -> str | None:
    """The hypothesis the advisor selected, read from an implementation (or repair) prompt.

    A repair conversation repeats the request in its first user message, so the last user
    message is read first and the first one after it.

    Returns:
        The hypothesis text as rendered (the agent strips surrounding whitespace), or None.
    """
    users = [m.get("content") for m in p.messages if m.get("role") == "user"]
    for content in (users[-1:] + users[:1]) if users else []:
        if isinstance(content, str) and (found := _hypothesis_in(content)) is not None:
            return found
    return None


def _hypothesis_edit(p: OfflinePrompt, program: str) -> str | None:
    """Answer with the first hypothesis-reading operator's edit that changes the program, if any."""
    ops = hypothesis_operators(operators_for(p.env_id))
    hypothesis = selected_hypothesis(p) if ops else None
    if hypothesis is None:
        return None
    for op in ops:
        try:
            out = op.apply_hypothesis(program, hypothesis, p.language)
            if out is None or out == program:
                continue
            diff = render_diff(make_diff(program, out, p.language))
        except (ProgramFormatError, PatchError, ValueError):
            continue
        return f"{LABEL}\nApplied operator(s) `{op.name}` to the hypothesis text.\n\n```diff\n{diff}```\n"
    return None


def implementation(p: OfflinePrompt, rng: random.Random) -> str:
    """Implement the hypothesis and answer with hunks.

    A hypothesis-reading operator of the environment is tried first; otherwise (or when none
    changes the program) the operator named in the hypothesis is applied, or any applicable one.
    """
    program = p.program("current program")
    if program is None:
        return f"{LABEL}\nNo program found in the request."
    answer = _hypothesis_edit(p, program)
    if answer is not None:
        return answer
    m = _OP.search(p.section("change to make"))
    edit = propose_edit(
        program,
        p.language,
        rng,
        operators_for(p.env_id),
        prefer=m.group(1) if m else None,
        extra_ops=rng.choice((0, 1, 1, 2)),
    )
    if edit is None:
        return f"{LABEL}\nNo operator changes this program."
    ops = ", ".join(f"`{o}`" for o in edit.operators)
    return f"{LABEL}\nApplied operator(s) {ops}.\n\n```diff\n{edit.diff}```\n"


def hypothesis_summary(p: OfflinePrompt, rng: random.Random) -> str:
    """Count the records and report the best score found in them (direction read from the objective)."""
    records = [r for r in p.section("experiment records").split("\n") if r.strip().startswith("-")]
    scores = [float(s) for r in records for s in _SCORE.findall(r)]
    maximize = "higher is better" in p.section("objective") or "maximised" in p.section("objective")
    best = (max(scores) if maximize else min(scores)) if scores else None
    idea = p.section("idea").split(":", 1)[-1].strip()
    best_text = f"best score {best:.6g}" if best is not None else "no scored experiment"
    return (
        f"{LABEL}\nDescription: {idea}\n"
        f"Findings: {best_text} over {len(records)} records; offline summary, no analysis of what worked.\n"
    )


def idea_pruning(p: OfflinePrompt, rng: random.Random) -> str:
    """Drop the ideas with the worst best score (untested first), then the most tested."""
    n = max(1, p.number("ideas to drop", 1))
    maximize = "higher is better" in p.section("objective")
    sign = 1.0 if maximize else -1.0

    def key(e: _Entry) -> tuple[float, int, int]:
        value = -float("inf") if e.best is None else sign * e.best
        return (value, -e.experiments, e.id)

    drop = [e.id for e in sorted(_pool(p), key=key)[:n]]
    return f"{LABEL}\nDrop: {drop}\nReason: lowest best score among the pool (offline rule).\n"


def repetition_check(p: OfflinePrompt, rng: random.Random) -> str:
    """Never judges an experiment a repeat (the exact-match check of the agent still applies)."""
    return f"{LABEL}\nRepeat: no\nReason: the offline proposer does not judge repetition.\n"


HANDLERS: dict[str, Callable[[OfflinePrompt, random.Random], str]] = {
    "idea_generation": idea_generation,
    "idea_classification": idea_classification,
    "idea_selection": idea_selection,
    "implementation": implementation,
    "implementation_repair": implementation,
    "hypothesis_summary": hypothesis_summary,
    "idea_pruning": idea_pruning,
    "repetition_check": repetition_check,
}
"""Stage -> answer function."""


def respond(prompt: OfflinePrompt, rng: random.Random) -> str:
    """Answer one PACEvolve prompt (unknown stages get a reply that no parser accepts)."""
    handler = HANDLERS.get(prompt.stage)
    if handler is None:
        return f"{LABEL}\nNo answer for stage {prompt.stage!r}."
    return handler(prompt, rng)


def register() -> None:
    """Serve ``offline/pacevolve`` with :func:`respond` (done on import of ``agents.pacevolve``)."""
    register_offline_proposer(NAME, respond)
