"""Configuration of the PACEvolve agent.

Defaults follow the reference implementation except the intervention schedule (islands,
momentum_init, freeze_period, stagnation_counts_failures), which is set for 100-1000-evaluation
budgets (see README "Intervention defaults").
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ROLES = ("advisor", "implementer", "summariser")
"""LLM roles of the agent: ideas / classification / selection / pruning, code edits, idea summaries."""


class PACEvolveConfig(BaseModel):
    """PACEvolve: hierarchical idea pool (HCM), momentum backtracking (MBB), adaptive crossover (CE)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str = "gemini/gemini-2.5-pro"
    """litellm model string for every role (``bench run --model``); ``offline/pacevolve`` is the
    deterministic offline proposer (not an LLM)."""
    advisor_model: str | None = None
    """Override for the advisor role (idea generation, novelty classification, selection, pruning)."""
    implementer_model: str | None = None
    """Override for the implementer role (turns a hypothesis into a code edit)."""
    summariser_model: str | None = None
    """Override for the summariser role (condenses an idea's experiment records)."""

    islands: int = Field(default=8, ge=1)
    """Islands (search threads); each proposes one candidate per step (the paper's Multi runs use 2,
    the reference EPLB configuration 8; see README "Intervention defaults")."""
    ideas_per_generation: int = Field(default=3, ge=1)
    """Ideas the advisor brainstorms every iteration."""
    novelty_hint_pool_size: int = Field(default=5, ge=0)
    """While the pool has at most this many ideas, ask for at least one idea outside it."""
    max_ideas: int = Field(default=5, ge=1)
    """K_idea: active ideas per island; above it the advisor chooses ideas to prune."""
    max_hypotheses_per_idea: int = Field(default=20, ge=1)
    """K_hyp: experiment records per idea; above it they are summarised into key findings."""
    max_abandoned_ideas: int = Field(default=20, ge=0)
    """Cap of the failure memory of pruned ideas shown in every prompt; over it the least recently
    relevant entry (pruned longest ago, not matched by a proposal since) is evicted."""
    skip_repeats: bool = True
    """Do not implement a hypothesis that repeats one in the island's log: the same named edit
    (``edit <name> <n>``, whatever free text follows it), or for a hypothesis naming no edit the
    same words (up to case, spacing and punctuation); the iteration is recorded as a ``repeat``."""
    idea_filter: bool = False
    """Also ask the advisor whether a selected hypothesis repeats the global log (off in the reference)."""

    backtracking: bool = True
    """Momentum-based backtracking (MBB); False disables interventions altogether."""
    crossover: bool = True
    """Collaborative evolution (CE): crossover as an alternative to backtracking (needs 2+ islands)."""
    momentum_decay: float = Field(default=0.85, ge=0.0, lt=1.0)
    """beta of the momentum EWMA m = beta * m + (1 - beta) * R."""
    stagnation_threshold: float = Field(default=0.001, ge=0.0)
    """epsilon_rel: an intervention triggers when momentum drops below it."""
    momentum_init: float = Field(default=0.0, ge=0.0)
    """Initial momentum (the reference code's 0.0; the paper's 1.0 blocks every trigger for the
    first 43 updates at beta 0.85, epsilon 0.001)."""
    freeze_period: int = Field(default=6, ge=0)
    """Momentum updates without interventions at the start and after every intervention
    (the reference uses 15 with 1000-iteration budgets)."""
    power_law_alpha: float = Field(default=1.5, gt=0.0)
    """Backtrack target k (0 = oldest saved state) drawn with P(k) proportional to (k + 1) ** -alpha."""
    backtrack_length: int = Field(default=5, ge=1)
    """Iterations that take their parent and idea pool from a sampled earlier state after a trigger."""
    backtrack_merge_back: bool = False
    """At the end of a backtrack, merge the pre-backtrack ideas back into the pool (the reference
    code does; off by default because the paper unlearns the abandoned line)."""
    stagnation_counts_failures: bool = True
    """Update momentum (with R = 0) on failed evaluations too: the paper sets R_t = 0 for every
    generation without a new best; the reference updates on scored ones only (False)."""

    max_attempts: int = Field(default=3, ge=1)
    """Tries per advisor / summariser stage when a response does not follow the format."""
    max_fix_attempts: int = Field(default=2, ge=0)
    """Extra implementer tries after an edit that cannot be parsed or applied (error shown to the model)."""
    max_empty_steps: int = Field(default=10, ge=1)
    """Stop after this many consecutive steps in which no island produced a candidate to evaluate."""
    llm_concurrency: int = Field(default=0, ge=0)
    """Islands drafting in parallel (threads) within a step (0: all islands)."""

    temperature: float | None = 1.0
    """Sampling temperature of every role (None: provider default)."""
    max_tokens: int | None = None
    """Completion token limit per call (None: provider default)."""
    timeout_s: float = Field(default=600.0, gt=0.0)
    """Seconds before one LLM request is abandoned (then retried as a transient error)."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of one LLM request after transient errors (rate limit, timeout, 5xx)."""
    retry_backoff_s: float = Field(default=2.0, ge=0.0)
    """First retry delay in seconds (doubled per retry, with jitter)."""
    max_cost_usd: float | None = Field(default=None, ge=0.0)
    """Agent-side LLM cost cap in US dollars (the run budget's cap applies too; the lower wins)."""
    cache: str = "run"
    """Response cache: ``run`` (inside the run directory, so a resumed step reuses paid answers),
    ``off``, or a directory shared between runs."""
    litellm_params: dict[str, Any] = {}
    """Extra litellm keyword arguments for every call (``api_base``, ``reasoning_effort``, ...;
    never keys: they come from the environment)."""

    def role_models(self) -> dict[str, str]:
        """Role -> model string, with the per-role overrides applied."""
        return {
            "advisor": self.advisor_model or self.model,
            "implementer": self.implementer_model or self.model,
            "summariser": self.summariser_model or self.model,
        }
