"""The trained policy behind PACEvolve's role seam: sampling, call records, advisor and implementer.

A :class:`PolicySampler` turns a role's chat messages into token ids (through the policy's chat
template), keeps the middle out of over-long prompts, samples one completion from the current
adapter with a seed derived from the island, step, stage and attempt, and files the completion
under ``(step, island)`` in a :class:`RolloutBuffer` so the step's update can give every token
the candidate's advantage. Each call is also a ledger row (``kind = trainable policy``).

:class:`PolicyAdvisor` answers the advisor stages with PACEvolve's own prompts and parsers;
with ``lenient`` parsing a broken format does not end the iteration (the whole answer is read
as the idea or hypothesis) and the fallback is counted. :class:`PolicyImplementer` is the
end-to-end target: the policy writes the edit itself, and a broken edit fails the candidate.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agents.learning import answer_formats as af
from agents.learning.lockstep import Lockstep
from agents.pacevolve import prompting
from agents.pacevolve.parsing import (
    ParseError,
    parse_classification,
    parse_drop,
    parse_edit,
    parse_ideas,
    parse_repeat,
    parse_selection,
)
from agents.pacevolve.roles import Classification, IslandView, ProposalError, Selection
from agents.pacevolve.state import Idea, derive_seed
from agents.rl.backends.base import Completion, PolicyBackend, SampleRequest
from agents.rl.policy import LoadedPolicy
from harness.llm.ledger import LLMCallRow, utc_now

KIND_POLICY = "trainable policy"
"""Ledger ``kind`` of calls answered by the trained policy."""


def encode_messages(
    policy: LoadedPolicy, messages: Sequence[Mapping[str, Any]], max_tokens: int
) -> list[int]:
    """Token ids of a conversation, with the middle cut out when it exceeds ``max_tokens``.

    The first quarter and the last three quarters of the budget are kept: the head holds the
    task, the tail the current program, history and answer format.

    Raises:
        ValueError: If the conversation encodes to no tokens or ``max_tokens`` < 2.
    """
    if max_tokens < 2:
        raise ValueError("max_tokens must be >= 2")
    tok = policy.tokenizer
    if policy.chat and getattr(tok, "chat_template", None) is not None:
        ids: Any = tok.apply_chat_template(
            [{"role": m["role"], "content": m["content"]} for m in messages],
            add_generation_prompt=True,
            tokenize=True,
        )
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = [int(i) for i in ids]
    else:
        text = "\n\n".join(str(m["content"]) for m in messages) + "\n\n"
        ids = [int(i) for i in tok(text, add_special_tokens=False)["input_ids"]]
    if not ids:
        raise ValueError("the prompt encodes to no tokens")
    if len(ids) > max_tokens:
        head = max_tokens // 4
        ids = ids[:head] + ids[len(ids) - (max_tokens - head) :]
    return ids


class RolloutBuffer:
    """Completions of the policy filed by ``(step, island)`` until the step's update takes them."""

    def __init__(self) -> None:
        """An empty buffer."""
        self._lock = threading.Lock()
        self._calls: dict[tuple[int, int], list[Completion]] = defaultdict(list)

    def add(self, step: int, island: int, completion: Completion) -> None:
        """File one completion."""
        with self._lock:
            self._calls[(step, island)].append(completion)

    def take(self, step: int) -> dict[int, list[Completion]]:
        """Remove and return the step's completions by island (older steps are dropped too)."""
        with self._lock:
            out = {i: c for (s, i), c in self._calls.items() if s == step}
            self._calls = defaultdict(list, {k: v for k, v in self._calls.items() if k[0] > step})
        return out


class PolicySampler:
    """Serialises calls to one policy backend (it is not thread-safe) and records them."""

    def __init__(
        self,
        backend: PolicyBackend,
        policy: LoadedPolicy,
        *,
        reference: str,
        temperature: float,
        max_prompt_tokens: int,
        buffer: RolloutBuffer,
        on_call: Callable[[LLMCallRow], None] | None = None,
    ) -> None:
        """Bind the backend, its tokenizer and the sampling settings."""
        self.backend = backend
        self.policy = policy
        self.reference = reference
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.buffer = buffer
        self.on_call = on_call
        self._lock = threading.Lock()
        self.lockstep = Lockstep(self._run_batch)
        """Batches the islands' concurrent calls while the agent holds a session open."""

    def _run_batch(self, requests: list[SampleRequest]) -> list[Completion]:
        with self._lock:
            return self.backend.sample_requests(requests, self.temperature)

    def complete(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        seed: int,
        stage: str,
        step: int,
        island: int,
        max_new_tokens: int,
        constraint: str | None = None,
    ) -> str:
        """Sample one answer, file it under ``(step, island)`` and return its text.

        While a lockstep session has ``island`` as a participant, the call waits for its round's
        batch; otherwise it is sampled alone. ``constraint`` is a regex the answer is decoded
        under (xgrammar).
        """
        ids = encode_messages(self.policy, messages, self.max_prompt_tokens)
        started, t0 = utc_now(), time.perf_counter()
        request = SampleRequest(tuple(ids), max_new_tokens, seed, constraint)
        if self.lockstep.is_participant(island):
            c = self.lockstep.submit(island, request)
        else:
            [c] = self._run_batch([request])
        self.buffer.add(step, island, c)
        if self.on_call is not None:
            self.on_call(
                LLMCallRow(
                    call_id=uuid.uuid4().hex,
                    started_at=started,
                    role=role,
                    model=f"policy:{self.reference}@v{c.adapter_version}",
                    kind=KIND_POLICY,
                    stage=stage,
                    step=step,
                    thread=island,
                    tokens_in=len(ids),
                    tokens_out=len(c.token_ids),
                    latency_s=time.perf_counter() - t0,
                    response_chars=len(c.text),
                )
            )
        return c.text


class PolicyAdvisor:
    """The advisor role on the trained policy (one sample per stage; see the module docstring)."""

    def __init__(
        self,
        sampler: PolicySampler,
        *,
        max_new_tokens: int,
        lenient: bool,
        novelty_hint_pool_size: int,
        constrained: bool = False,
        exact_edits: bool = False,
    ) -> None:
        """Bind the sampler, the parsing mode and the answer formats.

        ``constrained`` decodes every answer under its stage's format (``answer_formats.py``);
        ``exact_edits`` makes hypotheses start with ``edit <name> <n>`` from the prompt's
        vocabulary (the ``offline/exact`` implementer's input).
        """
        self.sampler = sampler
        self.max_new_tokens = max_new_tokens
        self.lenient = lenient
        self.novelty_hint_pool_size = novelty_hint_pool_size
        self.constrained = constrained
        self.exact_edits = exact_edits
        self.fallbacks: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def _edits(self, view: IslandView) -> str | None:
        return af.view_edits(view) if self.exact_edits else None

    def _ask(
        self, view: IslandView, stage: str, messages: list[Any], salt: object = "", fmt: str | None = None
    ) -> str:
        with self._lock:
            self.calls[stage] += 1
        return self.sampler.complete(
            "advisor",
            messages,
            seed=derive_seed(view.seed, "policy", stage, salt),
            stage=stage,
            step=view.step,
            island=view.island,
            max_new_tokens=self.max_new_tokens,
            constraint=fmt if self.constrained else None,
        )

    def parse_rates(self) -> dict[str, float]:
        """Per stage: calls parsed without a fallback / calls."""
        with self._lock:
            return {s: (n - self.fallbacks.get(s, 0)) / n for s, n in sorted(self.calls.items()) if n}

    def _fallback(self, stage: str, error: ParseError) -> None:
        if not self.lenient:
            raise ProposalError(stage, f"the policy broke the answer format: {error}")
        with self._lock:
            self.fallbacks[stage] += 1

    def generate_ideas(self, view: IslandView, n: int) -> list[str]:
        """Ideas from the policy (lenient: the whole answer is one idea).

        Raises:
            ProposalError: If the answer is empty, or breaks the format without lenient parsing.
        """
        text = self._ask(
            view,
            "idea_generation",
            prompting.idea_generation(view, n, self.novelty_hint_pool_size),
            fmt=af.idea_generation(self._edits(view)),
        )
        try:
            return parse_ideas(text, n)
        except ParseError as e:
            self._fallback("idea_generation", e)
        idea = " ".join(text.split())[:400]
        if not idea:
            raise ProposalError("idea_generation", "the policy answered with nothing")
        return [idea]

    def classify_idea(self, view: IslandView, proposal: str) -> Classification:
        """Refine / new / known failure (lenient: a new idea).

        Raises:
            ProposalError: If the format is broken without lenient parsing.
        """
        pool = {i.id for i in view.ideas}
        pruned = {p.id for p in view.pruned}
        fmt = af.classification(pool, pruned, self._edits(view))
        text = self._ask(
            view, "idea_classification", prompting.idea_classification(view, proposal), proposal, fmt
        )
        try:
            return parse_classification(text, pool, pruned)
        except ParseError as e:
            self._fallback("idea_classification", e)
        return Classification("new", None, proposal.strip()[:400])

    def select_hypothesis(self, view: IslandView) -> Selection:
        """Idea and hypothesis (lenient: the newest idea, the whole answer as the hypothesis).

        Raises:
            ProposalError: If the answer is empty, or breaks the format without lenient parsing.
        """
        pool = {i.id for i in view.ideas}
        fmt = af.selection(pool, self._edits(view))
        text = self._ask(view, "idea_selection", prompting.idea_selection(view), fmt=fmt)
        try:
            return parse_selection(text, pool)
        except ParseError as e:
            self._fallback("idea_selection", e)
        hypothesis = text.strip()[:500]
        if not hypothesis or not pool:
            raise ProposalError("idea_selection", "the policy answered with nothing")
        return Selection(max(pool), hypothesis)

    def is_repeat(self, view: IslandView, selection: Selection) -> bool:
        """The optional repetition filter (lenient: not a repeat).

        Raises:
            ProposalError: If the format is broken without lenient parsing.
        """
        idea = view.idea(selection.idea_id)
        if idea is None:
            return False
        text = self._ask(
            view, "repetition_check", prompting.repetition_check(view, idea, selection), fmt=af.repetition()
        )
        try:
            return parse_repeat(text)
        except ParseError as e:
            self._fallback("repetition_check", e)
        return False

    def choose_pruned(self, view: IslandView, n_drop: int) -> tuple[list[int], str]:
        """Ideas to drop (lenient: the oldest ones).

        Raises:
            ProposalError: If the format is broken without lenient parsing.
        """
        pool = {i.id for i in view.ideas}
        cap = len(view.ideas) - n_drop
        fmt = af.pruning(pool, n_drop)
        text = self._ask(view, "idea_pruning", prompting.idea_pruning(view, n_drop, cap), sorted(pool), fmt)
        try:
            return parse_drop(text, pool, n_drop)
        except ParseError as e:
            self._fallback("idea_pruning", e)
        return sorted(pool)[:n_drop], "unparsable pruning answer: the oldest ideas were dropped"


class PolicyImplementer:
    """The implementer role on the trained policy (training target ``end-to-end``)."""

    def __init__(self, sampler: PolicySampler, *, max_new_tokens: int, constrained: bool = False) -> None:
        """Bind the sampler; ``constrained`` decodes the edit as one SEARCH/REPLACE block."""
        self.sampler = sampler
        self.max_new_tokens = max_new_tokens
        self.constrained = constrained
        self.calls = 0
        """Edits asked for."""
        self.failures = 0
        """Answers with no applicable edit."""
        self._lock = threading.Lock()

    def implement(self, view: IslandView, idea: Idea, selection: Selection) -> str:
        """The policy's edit applied to the parent.

        Raises:
            ProposalError: If the answer holds no applicable edit (the candidate fails: R = fail).
        """
        text = self.sampler.complete(
            "implementer",
            prompting.implementation(view, idea, selection),
            seed=derive_seed(view.seed, "policy", "implementation"),
            stage="implementation",
            step=view.step,
            island=view.island,
            max_new_tokens=self.max_new_tokens,
            constraint=af.edit_block(view.program, view.task.language.value) if self.constrained else None,
        )
        try:
            with self._lock:
                self.calls += 1
            return parse_edit(text, view.program, view.task.language.value)
        except ParseError as e:
            with self._lock:
                self.failures += 1
            raise ProposalError("implementation", str(e)) from None
