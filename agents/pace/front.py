"""Pareto front of prompt configurations (progress vs token cost) and failure-coverage sampling.

Each prompt configuration tried in a round becomes an :class:`Entry`: the progress ``u`` of the
program it produced (0 when it produced none or the program failed), the proposer tokens it
spent, and the failure categories it hit. An entry is kept while no other entry has at least its
``u`` at no more tokens with one of the two strictly better. The parent of the next round's edits
is drawn with probability proportional to its *failure coverage*: one plus the number of failure
categories seen in the rounds so far that the entry avoided (PACE samples parents by how many
training failures they fix; our "training failures" are the failure categories of the search).
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .prompt_config import Channel, PromptConfig

FailureCategory = Literal["extraction_runtime", "format_constraint", "reasoning_content"]
"""PACE's failure taxonomy: extraction / runtime, format / constraint, reasoning / content."""
CATEGORIES: tuple[FailureCategory, ...] = ("extraction_runtime", "format_constraint", "reasoning_content")


class Entry(BaseModel):
    """One evaluated prompt configuration."""

    model_config = ConfigDict(extra="forbid")

    config: PromptConfig
    """The configuration."""
    u: float = Field(ge=0.0, le=1.0)
    """Progress of the program it produced in [0, 1] (0 for none or a failure)."""
    tokens: int = Field(ge=0)
    """Proposer tokens (prompt + completion) it spent in its round."""
    failures: list[FailureCategory] = []
    """Failure categories it hit."""
    channel: Channel = "seed"
    """Which channel produced it."""
    round: int = 0
    """Prompt round it was tried in."""

    def dominates(self, other: Entry) -> bool:
        """At least as good on both axes and strictly better on one."""
        return (self.u >= other.u and self.tokens <= other.tokens) and (
            self.u > other.u or self.tokens < other.tokens
        )


class ParetoFront(BaseModel):
    """Non-dominated prompt configurations, with the failure categories seen so far."""

    model_config = ConfigDict(extra="forbid")

    entries: list[Entry] = []
    """The front, best ``u`` first."""
    seen_failures: list[FailureCategory] = []
    """Failure categories observed in any round (the coverage universe)."""
    max_size: int = Field(default=8, ge=1)
    """Cap; past it the entries with the lowest ``u`` (then most tokens) are dropped."""

    def add(self, entry: Entry) -> bool:
        """Insert ``entry`` and return whether it was kept.

        It is refused when dominated (or when it repeats a configuration with no better result);
        the entries it dominates are dropped.
        """
        for c in entry.failures:
            if c not in self.seen_failures:
                self.seen_failures.append(c)
        key = entry.config.key()
        for e in self.entries:
            if e.dominates(entry) or (e.config.key() == key and e.u >= entry.u):
                return False
        self.entries = [e for e in self.entries if not entry.dominates(e) and e.config.key() != key]
        self.entries.append(entry)
        self.entries.sort(key=lambda e: (-e.u, e.tokens))
        del self.entries[self.max_size :]
        return entry in self.entries

    def best(self) -> Entry | None:
        """Highest ``u``, then fewest tokens."""
        return self.entries[0] if self.entries else None

    def coverage(self, entry: Entry) -> int:
        """One plus the seen failure categories ``entry`` avoided."""
        return 1 + sum(c not in entry.failures for c in self.seen_failures)

    def sample_parent(self, rng: random.Random) -> Entry | None:
        """A front member drawn with probability proportional to its failure coverage."""
        if not self.entries:
            return None
        weights = [self.coverage(e) for e in self.entries]
        return rng.choices(self.entries, weights=weights, k=1)[0]

    def complementary_pair(self) -> tuple[Entry, Entry] | None:
        """The two most complementary members.

        Those whose failure sets together avoid the most categories (ties: higher summed ``u``);
        None with fewer than two members.
        """
        best: tuple[tuple[int, float], tuple[Entry, Entry]] | None = None
        for i, a in enumerate(self.entries):
            for b in self.entries[i + 1 :]:
                joint = sum(c not in a.failures or c not in b.failures for c in self.seen_failures)
                score = (joint, a.u + b.u)
                if best is None or score > best[0]:
                    best = (score, (a, b))
        return None if best is None else best[1]
