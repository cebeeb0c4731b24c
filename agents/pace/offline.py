"""Offline answers to PACE's controller stages for ``offline/pacevolve`` (deterministic, NOT an LLM).

They make the whole two-timescale loop runnable without a model: a root cause is read off the
failure's category and error text, a revision picks a matching requirement from the library, and
a control edit sets one or two editable fields to values drawn within their bounds, with a
structural directive naming one of the environment's mutation operators.
"""

from __future__ import annotations

import json
import random

from agents.pacevolve import offline as pacevolve_offline
from harness.llm.offline import OfflinePrompt
from harness.llm.offline.tools import operators_for
from harness.program.mutate import ReplaceSnippet

from .control import EDITABLE
from .prompt_config import REQUIREMENT_LIBRARY

GENERIC_EDITS = ("scale-literal", "swap-comparison")
"""Vocabulary entries every family offers (``harness.llm.offline.vocabulary``)."""

LABEL = "[offline proposer: not an LLM]"

_CAUSES = {
    "extraction_runtime": "The edit could not be applied or the program crashed: "
    "its SEARCH text did not match the program exactly.",
    "format_constraint": "The answer or the program broke the required format or a task constraint.",
    "reasoning_content": "The change ran but did not improve the score: "
    "the idea was too small or repeated an earlier one.",
}
_FIXES = {
    "extraction_runtime": REQUIREMENT_LIBRARY[0],
    "format_constraint": REQUIREMENT_LIBRARY[5],
    "reasoning_content": REQUIREMENT_LIBRARY[3],
}


def reflection(p: OfflinePrompt, rng: random.Random) -> str:
    """One root-cause sentence for the failure's category."""
    text = p.messages[-1].get("content", "") if p.messages else ""
    category = next((c for c in _CAUSES if f"Category: {c}" in str(text)), "reasoning_content")
    return f"{LABEL}\nROOT CAUSE: {_CAUSES[category]}"


def revision(p: OfflinePrompt, rng: random.Random) -> str:
    """Requirements that address the root causes named in the prompt."""
    text = str(p.messages[-1].get("content", "")) if p.messages else ""
    picks = [fix for c, fix in _FIXES.items() if _CAUSES[c][:40] in text] or [rng.choice(REQUIREMENT_LIBRARY)]
    return LABEL + "\n" + "\n".join(f"REQUIREMENT: {r}" for r in picks[:2])


def control_edit(p: OfflinePrompt, rng: random.Random) -> str:
    """A JSON control edit within bounds, with a structural directive."""
    names = rng.sample(sorted(EDITABLE), k=rng.choice((1, 2)))
    fields: dict[str, object] = {}
    for name in names:
        typ, lo, hi = EDITABLE[name]
        if typ is bool:
            fields[name] = rng.random() < 0.5
        elif typ is int:
            fields[name] = rng.randint(lo, hi)
        else:
            fields[name] = round(rng.uniform(lo, hi), 3)
    # Entry names of the published edit vocabulary, so an advisor reading the directive (the
    # offline exact advisor does) proposes that kind of edit.
    ops = [op.name for op in operators_for(p.env_id) if isinstance(op, ReplaceSnippet)] + list(GENERIC_EDITS)
    target = rng.choice(ops)
    directive = f"Restructure the evolvable block around {target}."
    return f"{LABEL}\n" + json.dumps({"set": fields, "directive": directive})


def register() -> None:
    """Add PACE's stages to the ``offline/pacevolve`` responder."""
    pacevolve_offline.HANDLERS.update(
        {"pace_reflection": reflection, "pace_revision": revision, "pace_control_edit": control_edit}
    )
