"""Render the prompt templates of ``prompts/*.md`` for each stage.

Templates use ``string.Template`` placeholders (``$name``). Task-specific material (the task
prompt, the program, the objective) and search-managed material (the idea pool, the failure
memory, the experiment log) are filled in here. Every user prompt starts with the header the
offline proposer reads (``Stage``, ``Environment``, ``Language``; see
:mod:`harness.llm.offline.prompt`), which also tells a real model which stage it is in.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

from harness.llm import Message
from harness.llm.offline import fenced
from harness.llm.offline.vocabulary import render_vocabulary

from .hcm import fmt_score, render_log, render_pool, render_pruned
from .roles import IslandView, Selection
from .state import Idea

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
"""Where the templates live."""
TASK_SUMMARY_CHARS = 1500
"""Stages that only need the gist of the task get its first this many characters."""


@cache
def template(name: str) -> Template:
    """The template ``prompts/<name>.md``.

    Raises:
        FileNotFoundError: If there is no such template.
    """
    return Template((PROMPT_DIR / f"{name}.md").read_text(encoding="utf-8"))


def render(name: str, **values: object) -> str:
    """Fill a template.

    Raises:
        KeyError: If a placeholder has no value.
        FileNotFoundError: If there is no such template.
    """
    return template(name).substitute({k: str(v) for k, v in values.items()})


def _summary(text: str) -> str:
    text = text.strip()
    return text if len(text) <= TASK_SUMMARY_CHARS else text[:TASK_SUMMARY_CHARS].rstrip() + "\n[...]"


def _common(view: IslandView) -> dict[str, object]:
    task = view.task
    return {
        "env_id": task.env_id,
        "language": task.language.value,
        "task_prompt": task.prompt.strip(),
        "task_summary": _summary(task.prompt),
        "program_block": fenced(view.program, task.language.value),
        "idea_pool": render_pool(view.ideas),
        "pruned": render_pruned(view.pruned, view.pruned_evicted),
        "tried": render_log(view.log, view.log_total),
        "entry_point": task.entry_point,
        "signature": task.signature,
        # The environment's mutation operators as numbered edits of this program: an advisor may
        # name one (`edit <name> <n>`), which the offline exact implementer applies as written.
        "edit_vocabulary": render_vocabulary(*view.edits()),
    }


def objective(view: IslandView) -> str:
    """The objective paragraph: metric, direction, bounds, and where the island stands."""
    task = view.task
    return render(
        "objective",
        metric=task.combined,
        direction_word="maximised" if task.maximize else "minimised",
        better_word="higher" if task.maximize else "lower",
        y_init=fmt_score(task.progress.y_init),
        y_target=fmt_score(task.progress.y_target),
        best_score=fmt_score(view.best_score),
        program_score=fmt_score(view.program_score),
    ).strip()


def conversation(user: str) -> list[Message]:
    """System message plus one user message."""
    return [
        {"role": "system", "content": render("system")},
        {"role": "user", "content": user},
    ]


def idea_generation(view: IslandView, n: int, novelty_hint_pool_size: int) -> list[Message]:
    """Messages of the idea-generation stage."""
    hint = ""
    if len(view.ideas) <= novelty_hint_pool_size:
        hint = " At least one of the ideas must open a direction that is not in the pool yet."
    return conversation(
        render(
            "idea_generation",
            **_common(view),
            objective=objective(view),
            n_ideas=n,
            novelty_hint=hint,
        )
    )


def idea_classification(view: IslandView, proposal: str) -> list[Message]:
    """Messages of the novelty-classification stage."""
    return conversation(render("idea_classification", **_common(view), proposal=proposal.strip()))


def idea_selection(view: IslandView) -> list[Message]:
    """Messages of the selection stage."""
    return conversation(render("idea_selection", **_common(view), objective=objective(view)))


def implementation(view: IslandView, idea: Idea, selection: Selection) -> list[Message]:
    """Messages of the implementation stage (implementer role)."""
    return conversation(
        render(
            "implementation",
            **_common(view),
            idea_description=idea.description,
            hypothesis=selection.hypothesis.strip(),
        )
    )


def edit_repair(view: IslandView, error: str) -> str:
    """The follow-up user message after an edit that could not be applied."""
    return render("edit_repair", **_common(view), error=error.strip())


def format_retry(view: IslandView, stage: str, error: str) -> str:
    """The follow-up user message after an answer that broke the reply format."""
    return render("format_retry", **_common(view), stage=stage, error=error.strip())


def hypothesis_summary(view: IslandView, idea: Idea) -> list[Message]:
    """Messages of the record-summarisation stage (summariser role)."""
    records = "\n".join(f"- {r}" for r in idea.history) or "(none)"
    return conversation(
        render(
            "hypothesis_summary",
            **_common(view),
            objective=objective(view),
            idea_id=idea.id,
            idea_description=idea.description,
            records=records,
        )
    )


def idea_pruning(view: IslandView, n_drop: int, cap: int) -> list[Message]:
    """Messages of the pruning stage."""
    return conversation(
        render(
            "idea_pruning",
            **_common(view),
            objective=objective(view),
            n_drop=n_drop,
            n_ideas=len(view.ideas),
            cap=cap,
        )
    )


def repetition_check(view: IslandView, idea: Idea, selection: Selection) -> list[Message]:
    """Messages of the optional repetition filter."""
    return conversation(
        render(
            "repetition_check",
            **_common(view),
            idea_description=idea.description,
            hypothesis=selection.hypothesis.strip(),
        )
    )
