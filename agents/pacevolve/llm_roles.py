"""LLM-backed advisor, implementer and summariser (the default implementations of the role protocols).

Each stage sends one prompt (``prompting``), parses the answer (``parsing``) and, when the
answer breaks the format, shows the model what was wrong and asks again, up to ``max_attempts``
times; the implementer gets ``max_fix_attempts`` extra tries after an edit that cannot be
applied. Call seeds are derived from the island's seed for the step, the stage and the attempt,
so a repeated request is identical (cacheable, and reproducible with the offline proposer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from harness.llm import LLMCallFailed, LLMClient, Message

from . import prompting
from .parsing import (
    ParseError,
    parse_classification,
    parse_drop,
    parse_edit,
    parse_ideas,
    parse_repeat,
    parse_selection,
    parse_summary,
)
from .roles import Classification, IslandView, ProposalError, Selection, Summary
from .state import Idea, derive_seed

T = TypeVar("T")


class _RoleCaller:
    """Sends a stage's messages for one role and retries on format errors."""

    def __init__(self, client: LLMClient, role: str, max_attempts: int) -> None:
        self.client = client
        self.role = role
        self.max_attempts = max_attempts

    def ask(
        self,
        view: IslandView,
        stage: str,
        messages: list[Message],
        parse: Callable[[str], T],
        salt: object = "",
        retry: Callable[[str], str] | None = None,
        attempts: int | None = None,
    ) -> T:
        msgs = list(messages)
        last_error = ""
        total = attempts if attempts is not None else self.max_attempts
        for attempt in range(total):
            label = stage if attempt == 0 else f"{stage}_{'repair' if retry else 'retry'}"
            try:
                resp = self.client.complete(
                    self.role,
                    msgs,
                    seed=derive_seed(view.seed, stage, salt, attempt),
                    stage=label,
                    step=view.step,
                    thread=view.island,
                )
            except LLMCallFailed as e:
                raise ProposalError(stage, str(e)) from None
            try:
                return parse(resp.text)
            except ParseError as e:
                last_error = str(e)
            follow_up = retry(last_error) if retry else prompting.format_retry(view, stage, last_error)
            msgs = [
                *msgs,
                {"role": "assistant", "content": resp.text},
                {"role": "user", "content": follow_up},
            ]
        raise ProposalError(stage, f"no usable answer after {total} attempt(s): {last_error}")


class LLMAdvisor:
    """The advisor role on an LLM (or the offline proposer)."""

    def __init__(self, client: LLMClient, *, max_attempts: int = 3, novelty_hint_pool_size: int = 5) -> None:
        """Bind the advisor to a client whose ``advisor`` role is configured."""
        self._call = _RoleCaller(client, "advisor", max_attempts)
        self.novelty_hint_pool_size = novelty_hint_pool_size

    def generate_ideas(self, view: IslandView, n: int) -> list[str]:
        """Brainstorm up to ``n`` ideas.

        Raises:
            ProposalError: If no usable answer came back.
        """
        msgs = prompting.idea_generation(view, n, self.novelty_hint_pool_size)
        return self._call.ask(view, "idea_generation", msgs, lambda t: parse_ideas(t, n))

    def classify_idea(self, view: IslandView, proposal: str) -> Classification:
        """Refine, new or known failure.

        Raises:
            ProposalError: If no usable answer came back.
        """
        pool = {i.id for i in view.ideas}
        pruned = {p.id for p in view.pruned}
        msgs = prompting.idea_classification(view, proposal)
        return self._call.ask(
            view,
            "idea_classification",
            msgs,
            lambda t: parse_classification(t, pool, pruned),
            salt=proposal,
        )

    def select_hypothesis(self, view: IslandView) -> Selection:
        """Choose an idea and a concrete hypothesis.

        Raises:
            ProposalError: If no usable answer came back.
        """
        pool = {i.id for i in view.ideas}
        msgs = prompting.idea_selection(view)
        return self._call.ask(view, "idea_selection", msgs, lambda t: parse_selection(t, pool))

    def is_repeat(self, view: IslandView, selection: Selection) -> bool:
        """Ask whether the hypothesis repeats the global log.

        Raises:
            ProposalError: If no usable answer came back.
        """
        idea = view.idea(selection.idea_id)
        if idea is None:
            return False
        msgs = prompting.repetition_check(view, idea, selection)
        return self._call.ask(view, "repetition_check", msgs, parse_repeat)

    def choose_pruned(self, view: IslandView, n_drop: int) -> tuple[list[int], str]:
        """Pick ``n_drop`` ideas to discard.

        Raises:
            ProposalError: If no usable answer came back.
        """
        pool = {i.id for i in view.ideas}
        cap = len(view.ideas) - n_drop
        msgs = prompting.idea_pruning(view, n_drop, cap)
        return self._call.ask(
            view,
            "idea_pruning",
            msgs,
            lambda t: parse_drop(t, pool, n_drop),
            salt=sorted(pool),
        )


class LLMImplementer:
    """The implementer role: a hypothesis becomes SEARCH/REPLACE hunks (or a full program)."""

    def __init__(self, client: LLMClient, *, max_fix_attempts: int = 2) -> None:
        """Bind the implementer to a client whose ``implementer`` role is configured."""
        self._call = _RoleCaller(client, "implementer", 1 + max_fix_attempts)

    def implement(self, view: IslandView, idea: Idea, selection: Selection) -> str:
        """The edited program.

        Raises:
            ProposalError: If no applicable edit came back within the allowed fixes.
        """
        language = view.task.language.value
        msgs = prompting.implementation(view, idea, selection)
        return self._call.ask(
            view,
            "implementation",
            msgs,
            lambda t: parse_edit(t, view.program, language),
            retry=lambda error: prompting.edit_repair(view, error),
        )


class LLMSummariser:
    """The summariser role: condenses an idea's records into key findings."""

    def __init__(self, client: LLMClient, *, max_attempts: int = 3) -> None:
        """Bind the summariser to a client whose ``summariser`` role is configured."""
        self._call = _RoleCaller(client, "summariser", max_attempts)

    def summarize(self, view: IslandView, idea: Idea) -> Summary:
        """Summarise ``idea.history``.

        Raises:
            ProposalError: If no usable answer came back.
        """
        msgs = prompting.hypothesis_summary(view, idea)
        return self._call.ask(view, "hypothesis_summary", msgs, parse_summary, salt=idea.id)
