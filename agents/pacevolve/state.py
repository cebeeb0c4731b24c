"""The agent's whole search state as JSON-serialisable models (checkpointed after every step).

Programs are stored once, by sha256, in :attr:`SearchState.programs`; everything else refers to
them with :class:`ProgramRef`.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

from harness.evaluation.result import program_sha256

from .momentum import Momentum

STATE_VERSION = 2
"""Version of the checkpoint layout (2: s0, context chain, bounded failure memory)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Idea(_Model):
    """A macro-level conceptual idea with its micro-level experiment records."""

    id: int
    """Id, unique within the island for the whole run."""
    description: str
    """At most two sentences."""
    history: list[str] = []
    """Experiment records (one line each), or a single key-findings summary plus newer records."""
    experiments: int = 0
    """Experiments run under this idea (not reset by summaries)."""
    best: float | None = None
    """Best score any of its experiments reached."""
    created_step: int = 0
    """Step the idea entered the pool."""
    summaries: int = 0
    """How often its records were condensed."""


class PrunedIdea(_Model):
    """An idea removed from the pool, kept forever in the island's failure memory."""

    id: int
    """Its former id."""
    description: str
    """Its description when pruned."""
    experiments: int
    """Experiments run under it."""
    best: float | None
    """Best score it reached."""
    findings: str
    """Its last record or summary."""
    step: int
    """Step it was pruned at."""
    reason: str = ""
    """Why (the advisor's reason, ``fallback`` or ``known failure``)."""
    last_relevant: int = 0
    """Last step it mattered: pruned then, or matched by a new proposal (eviction is least recent first)."""
    rejections: int = 0
    """Proposals rejected as repeats of it."""


class LogEntry(_Model):
    """One attempted hypothesis in the island's permanent global log (never pruned)."""

    step: int
    """Step of the attempt."""
    idea_id: int
    """Idea it belonged to."""
    hypothesis: str
    """The concrete hypothesis."""
    outcome: str
    """``ok``, a failed evaluation status, or why it was not evaluated."""
    score: float | None = None
    """Its score when evaluated ok."""
    prev: int = -1
    """Index in the island's log of the previous attempt on the same line of search (-1: none).
    Following ``prev`` from the island's ``context_head`` gives the attempts its prompts show; a
    backtrack moves the head back, which unlearns the attempts after the restored state."""
    depth: int = 1
    """Attempts on this line of search up to and including this one."""


class ProgramRef(_Model):
    """A program (by sha256, text in ``SearchState.programs``) and its score."""

    sha: str
    """sha256 of the program text."""
    score: float | None = None
    """Its combined score (None: not scored ok)."""


class Snapshot(_Model):
    """A saved island state that MBB can revert to: the idea pool and the working best program."""

    step: int
    """Step after which it was saved."""
    ideas: list[str]
    """The idea pool then, as keys of ``SearchState.idea_versions`` (ideas rarely change between
    snapshots, so each version is stored once)."""
    sota: ProgramRef
    """The working best program then."""
    context_head: int = -1
    """The island's ``context_head`` then (its visible experiment log)."""


class IslandState(_Model):
    """Everything one island (search thread) keeps."""

    index: int
    """Island number."""
    ideas: list[Idea] = []
    """The active idea pool."""
    next_idea_id: int = 1
    """Id of the next new idea."""
    pruned: list[PrunedIdea] = []
    """Failure memory of pruned ideas (at most ``max_abandoned_ideas``, least recently relevant evicted)."""
    pruned_evicted: int = 0
    """Pruned ideas dropped from ``pruned`` because it was over ``max_abandoned_ideas``."""
    log: list[LogEntry] = []
    """Permanent log of attempted hypotheses (the exact-repeat filter reads all of it)."""
    context_head: int = -1
    """Index of the newest attempt the prompts show (-1: none); see :attr:`LogEntry.prev`."""
    s0: float | None = None
    """MBB / CE initial score s_0: the score of the island's first scored program (normally the
    initial program, measured at the start of the run)."""
    sota: ProgramRef
    """Working best program: the parent of normal iterations."""
    best: ProgramRef
    """Best program the island ever produced (s_t of MBB / CE)."""
    snapshots: list[Snapshot] = []
    """Saved states, oldest first."""
    momentum: Momentum = Field(default_factory=Momentum)
    """MBB momentum."""
    completed: int = 0
    """Iterations that updated the momentum."""
    last_intervention: int = 0
    """``completed`` at the last intervention (freeze period reference)."""
    interventions: int = 0
    """Interventions so far."""
    backtrack_left: int = 0
    """Remaining iterations of the current backtrack."""
    backtrack_horizon: int = 0
    """Saved states eligible as backtrack targets (those that existed at the trigger)."""
    pre_backtrack_ideas: list[Idea] | None = None
    """The pool at the trigger, merged back after the last backtrack iteration."""
    crossover_parent: ProgramRef | None = None
    """Partner's best program: the parent of the next iteration after a crossover."""
    crossover_partner: int | None = None
    """That partner's island number."""
    pending_tokens_in: int = 0
    """Prompt tokens not yet attributed to an evaluated candidate."""
    pending_tokens_out: int = 0
    """Completion tokens not yet attributed."""
    pending_cost_usd: float = 0.0
    """Cost not yet attributed."""


class SearchState(_Model):
    """The checkpointed state of a PACEvolve run."""

    version: int = STATE_VERSION
    """Checkpoint layout version."""
    step: int = 0
    """Steps completed."""
    base_seed: int
    """Seed all per-step randomness is derived from."""
    islands: list[IslandState]
    """One per island."""
    programs: dict[str, str] = {}
    """sha256 -> text of every program the state refers to."""
    idea_versions: dict[str, Idea] = {}
    """Content key -> idea, for every idea version a snapshot refers to."""
    known: dict[str, float | None] = {}
    """sha256 -> score (None: not ok) of every program evaluated in the run."""
    empty_steps: int = 0
    """Consecutive steps without a candidate to evaluate."""
    evaluations: int = 0
    """Evaluations made in the run so far (the initial program included)."""
    pinned: list[str] = []
    """Programs (sha256) kept by :meth:`compact` although no island refers to them (e.g. a
    learning agent's PUCT archive)."""

    def add_program(self, source: str, score: float | None) -> ProgramRef:
        """Store a program's text and return a reference to it."""
        sha = program_sha256(source)
        self.programs.setdefault(sha, source)
        return ProgramRef(sha=sha, score=score)

    def source(self, ref: ProgramRef) -> str:
        """Text of a referenced program.

        Raises:
            KeyError: If the program is not stored.
        """
        return self.programs[ref.sha]

    def save_ideas(self, ideas: list[Idea]) -> list[str]:
        """Store copies of ideas by content and return their keys (for a snapshot)."""
        keys = []
        for idea in ideas:
            key = hashlib.sha256(idea.model_dump_json().encode("utf-8")).hexdigest()[:20]
            self.idea_versions.setdefault(key, idea.model_copy(deep=True))
            keys.append(key)
        return keys

    def load_ideas(self, keys: list[str]) -> list[Idea]:
        """Fresh copies of stored ideas.

        Raises:
            KeyError: If a key is not stored.
        """
        return [self.idea_versions[k].model_copy(deep=True) for k in keys]

    def compact(self) -> None:
        """Drop stored programs and idea versions nothing refers to any more."""
        used: set[str] = set()
        versions: set[str] = set()
        for isl in self.islands:
            used.update({isl.sota.sha, isl.best.sha, *(s.sota.sha for s in isl.snapshots)})
            versions.update(k for s in isl.snapshots for k in s.ideas)
            if isl.crossover_parent is not None:
                used.add(isl.crossover_parent.sha)
        used.update(self.pinned)
        self.programs = {k: v for k, v in self.programs.items() if k in used}
        self.idea_versions = {k: v for k, v in self.idea_versions.items() if k in versions}


def derive_seed(base: int, *parts: object) -> int:
    """A 31-bit seed that depends only on ``base`` and ``parts`` (for per-step, per-island randomness)."""
    blob = ":".join(str(p) for p in (base, *parts)).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF
