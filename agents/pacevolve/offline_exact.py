"""``offline/exact``: a deterministic implementer applying exactly the edit a hypothesis names. NOT an LLM.

``offline/pacevolve`` (the labelled no-LLM baseline) seeds a random operator choice with a hash of
the request, so any change of wording changes the program and the advisor's meaning is lost.
``offline/exact`` answers the implementation stage from the edit vocabulary the advisor's prompt
publishes (:mod:`harness.llm.offline.vocabulary`): the first ``edit <name> <n>`` in the
hypothesis is applied, with no randomness, and a hypothesis that names none gets a reply saying
so (no diff, so the iteration fails). Hypothesis-reading operators of test instruments
(``selftest-bandit``) are applied first, as in ``offline/pacevolve``. A request whose
``Preferred reply format`` asks for the complete program gets it in one fenced block instead of
SEARCH/REPLACE hunks. The advisor stages (idea generation, classification, selection) name edits
of the vocabulary (:mod:`agents.pacevolve.offline_advisor`); summaries and pruning are answered as
``offline/pacevolve`` does.
"""

from __future__ import annotations

import random

from harness.llm.offline import OfflinePrompt, fenced, operators_for, register_offline_proposer
from harness.llm.offline.vocabulary import apply_named_edit
from harness.program import PatchError, ProgramFormatError, make_diff, render_diff

from . import offline, offline_advisor

NAME = "exact"
"""Proposer name: the model string is ``offline/exact``."""
LABEL = "Offline exact implementer (deterministic, not an LLM)."
"""First line of every implementation answer."""


def implementation(p: OfflinePrompt, rng: random.Random) -> str:
    """Apply the named edit (the generator is not used: the answer depends on the text only)."""
    program = p.program("current program")
    if program is None:
        return f"{LABEL}\nNo program found in the request."
    answer = offline._hypothesis_edit(p, program)
    if answer is not None:
        return answer
    hypothesis = offline.selected_hypothesis(p) or ""
    edit = apply_named_edit(program, p.language, operators_for(p.env_id), hypothesis)
    if edit.program is None:
        return f"{LABEL}\nNo edit: {edit.reason}."
    if "complete program" in p.section("preferred reply format"):
        return f"{LABEL}\nApplied edit `{edit.name}`.\n\n{fenced(edit.program, p.language)}\n"
    try:
        diff = render_diff(make_diff(program, edit.program, p.language))
    except (ProgramFormatError, PatchError, ValueError) as e:
        return f"{LABEL}\nNo edit: edit {edit.name} cannot be written as a diff ({e})."
    return f"{LABEL}\nApplied edit `{edit.name}`.\n\n```diff\n{diff}```\n"


def respond(prompt: OfflinePrompt, rng: random.Random) -> str:
    """Answer one PACEvolve prompt: implementation stages exactly, the rest as ``offline/pacevolve``."""
    if prompt.stage in ("implementation", "implementation_repair"):
        return implementation(prompt, rng)
    handler = _ADVISOR.get(prompt.stage)
    if handler is not None:
        return handler(prompt, rng)
    return offline.respond(prompt, rng)


_ADVISOR = {
    "idea_generation": offline_advisor.idea_generation,
    "idea_classification": offline_advisor.idea_classification,
    "idea_selection": offline_advisor.idea_selection,
}


def register() -> None:
    """Serve ``offline/exact`` with :func:`respond` (done on import of ``agents.pacevolve``)."""
    register_offline_proposer(NAME, respond)
