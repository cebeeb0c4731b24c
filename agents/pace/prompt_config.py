"""The proposer's prompt configuration P and its template-constrained edits (PACE's fast timescale).

A :class:`PromptConfig` has exactly the four fields of PACE's ``prompt_config`` template: role,
requirements, temperature and response format. Every edit (a library mutation, a reflective
revision written by the model, a crossover) yields a new config that is validated against the
template's bounds, so no channel can change anything else about the agent.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.llm import Message

MAX_REQUIREMENTS = 6
"""Requirements kept in one configuration."""
MAX_REQUIREMENT_CHARS = 200
"""Longest requirement (characters)."""
MAX_ROLE_CHARS = 300
"""Longest role description (characters)."""
TEMPERATURE_RANGE = (0.0, 1.5)
"""Allowed sampling temperatures."""
FORMATS = ("search-replace", "full-program")
"""Response formats the implementer may be asked for (its parser accepts both)."""

ROLE_LIBRARY = (
    "You are a careful performance engineer who changes one thing at a time and keeps the program correct.",
    "You are an algorithm designer who looks for a better method, not a tweak of constants.",
    "You are a meticulous reviewer who makes sure every edit applies cleanly and keeps the contract.",
    "You are a pragmatic researcher who exploits what already worked in the experiment log.",
    "You are an explorer who tries bold directions the idea pool has not covered yet.",
)
"""Role descriptions the mutation channel draws from."""
REQUIREMENT_LIBRARY = (
    "Copy SEARCH lines exactly from the current program, including indentation.",
    "Keep the entry point's name, arguments and return type unchanged.",
    "Prefer vectorised array operations over Python loops.",
    "Build on the best program's structure; change one component per experiment.",
    "Avoid ideas that the failure memory lists as already tried.",
    "Reply only in the requested format, without explanations.",
    "Check edge cases (empty inputs, ties, zero loads) before replying.",
    "Prefer `scale-literal` edits: change one numeric constant at a time.",
    "Prefer `swap-comparison` edits: move one boundary test (`<` versus `<=`).",
)
"""Requirements the mutation channel adds."""

Channel = Literal["seed", "mutation", "reflective", "crossover"]
"""Where a prompt configuration came from."""


class PromptConfig(BaseModel):
    """The prompt configuration template: the only thing the fast timescale may edit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str = Field(default="", max_length=MAX_ROLE_CHARS)
    """Role sentence prepended to the system message (empty: the scaffold's own)."""
    requirements: tuple[str, ...] = ()
    """Extra requirements appended to every proposer prompt."""
    temperature: float = Field(default=1.0, ge=TEMPERATURE_RANGE[0], le=TEMPERATURE_RANGE[1])
    """Sampling temperature of the proposer's calls."""
    response_format: Literal["search-replace", "full-program"] = "search-replace"
    """Preferred reply format of the implementer."""

    @field_validator("requirements")
    @classmethod
    def _bounded(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        out: list[str] = []
        for r in value:
            text = " ".join(str(r).split())
            if not text:
                continue
            if len(text) > MAX_REQUIREMENT_CHARS:
                raise ValueError(f"requirement longer than {MAX_REQUIREMENT_CHARS} characters")
            if "```" in text:
                raise ValueError("requirements may not contain code fences")
            if text not in out:
                out.append(text)
        if len(out) > MAX_REQUIREMENTS:
            raise ValueError(f"more than {MAX_REQUIREMENTS} requirements")
        return tuple(out)

    def key(self) -> str:
        """Stable identity of the configuration (for deduplication and telemetry)."""
        return self.model_dump_json()

    def apply(self, messages: list[Message], *, implementer: bool) -> list[Message]:
        """The messages with this configuration applied.

        The role is prepended to the system message; the requirements and the reply format are
        appended to the last user message.
        """
        out = [dict(m) for m in messages]
        if self.role:
            for m in out:
                if m.get("role") == "system":
                    m["content"] = f"{self.role}\n\n{m['content']}"
                    break
        extra: list[str] = []
        if self.requirements:
            extra.append("## Additional requirements\n" + "\n".join(f"- {r}" for r in self.requirements))
        if implementer:
            fmt = (
                "SEARCH/REPLACE blocks"
                if self.response_format == "search-replace"
                else "the complete program in one fenced block"
            )
            extra.append(f"## Preferred reply format\nPrefer {fmt}.")
        if extra:
            for m in reversed(out):
                if m.get("role") == "user":
                    m["content"] = f"{m['content'].rstrip()}\n\n" + "\n\n".join(extra) + "\n"
                    break
        return out


def mutate(parent: PromptConfig, rng: random.Random) -> PromptConfig:
    """One handcrafted mutation that changes the parent.

    Its role, a requirement (added or dropped), the temperature or the response format (kinds
    tried in random order).
    """
    kinds = ["role", "add", "drop", "temperature", "format"]
    rng.shuffle(kinds)
    for kind in kinds:
        child = _mutate_once(parent, kind, rng)
        if child != parent:
            return child
    return parent  # unreachable: the format toggle always changes the config


def _mutate_once(parent: PromptConfig, kind: str, rng: random.Random) -> PromptConfig:
    if kind == "role":
        return parent.model_copy(update={"role": rng.choice([r for r in ROLE_LIBRARY if r != parent.role])})
    if kind == "add":
        new = [r for r in REQUIREMENT_LIBRARY if r not in parent.requirements]
        if not new:
            return parent
        reqs = [*parent.requirements, rng.choice(new)][-MAX_REQUIREMENTS:]
        return PromptConfig.model_validate({**parent.model_dump(), "requirements": tuple(reqs)})
    if kind == "drop":
        if not parent.requirements:
            return parent
        reqs = list(parent.requirements)
        reqs.pop(rng.randrange(len(reqs)))
        return parent.model_copy(update={"requirements": tuple(reqs)})
    if kind == "temperature":
        lo, hi = TEMPERATURE_RANGE
        options = {round(min(hi, max(lo, parent.temperature + d)), 2) for d in (-0.3, -0.2, 0.2, 0.3)}
        options.discard(parent.temperature)
        return parent.model_copy(update={"temperature": rng.choice(sorted(options))})
    other = FORMATS[1] if parent.response_format == FORMATS[0] else FORMATS[0]
    return parent.model_copy(update={"response_format": other})


def crossover(a: PromptConfig, b: PromptConfig) -> PromptConfig:
    """Combine two configurations.

    ``a``'s role and format, both requirement lists (``a``'s first, capped), the mean temperature.
    """
    reqs = list(dict.fromkeys([*a.requirements, *b.requirements]))[:MAX_REQUIREMENTS]
    return PromptConfig(
        role=a.role or b.role,
        requirements=tuple(reqs),
        temperature=round((a.temperature + b.temperature) / 2, 2),
        response_format=a.response_format,
    )


def revise(parent: PromptConfig, requirements: list[str]) -> PromptConfig:
    """A reflective revision: the model's targeted requirements added to the parent's.

    The oldest requirements are dropped past the cap.

    Raises:
        pydantic.ValidationError: If a requirement breaks the template (too long, a code fence).
    """
    reqs = [*parent.requirements, *requirements]
    reqs = list(dict.fromkeys(" ".join(r.split()) for r in reqs if r.strip()))
    return PromptConfig.model_validate(
        {**parent.model_dump(), "requirements": tuple(reqs[-MAX_REQUIREMENTS:])}
    )
