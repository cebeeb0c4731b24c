"""``advisor_rule = bandit-ucb``: a count-based UCB1 bandit in the advisor's seat. It learns NO weights.

The non-learning adaptive baseline of the learning proof (issue 35): the same PACEvolve scaffold,
frozen implementer, rewards and budget as a trained advisor, but the edit each island tries is
chosen by UCB1 over **edit families** (the entries of the edit vocabulary the prompt offers,
``offline/exact``'s input: ``add-term``, ``scale-literal``, ...). No model is loaded and nothing is
trained: the only state is a pull count and a reward sum per family.

* Arms: the families the island's prompt offers (untried options only, ``IslandView.edits``).
  Without a vocabulary (e.g. ``selftest-bandit``, whose implementer writes the hypothesis text
  into the program), the arms are the configured ``bandit_menu`` texts; a menu hypothesis carries
  its step and island after the text, so choosing the best arm again is a new experiment rather
  than the repeat filter's skip or an unchanged program. No vocabulary and no menu: the
  iteration fails (``ProposalError``).
* Index: UCB1 on rewards scaled to [0, 1] (``reward_fail`` -> 0, ``reward_c`` -> 1):
  ``mean + c * sqrt(2 ln N / n)``; an arm never pulled comes first. Ties go by a seeded key
  per arm, so a run is deterministic per seed and seeds differ.
* Within a step every island chooses before any reward is known (the group is evaluated as one
  batch). Island ``i`` replays the choices of islands ``0..i-1`` as virtual pulls (count + 1,
  mean unchanged) over its own offered arms, so the islands of a step spread over the arms; the
  result depends on the step's statistics and the island's view only, not on thread timing.
* The option within the chosen family is drawn uniformly (seeded by island and step).
* Rewards: after the step, each island's candidate's reward (the trained advisor's reward,
  ``values.reward_of``) is added to the family it chose.

The other advisor stages are fixed rules: one idea in the pool (the bandit itself), every
proposal a new idea, no LLM repeat check, pruning drops the oldest ideas.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.pacevolve.roles import Classification, IslandView, ProposalError, Selection
from agents.pacevolve.state import derive_seed

NAME = "bandit-ucb"
"""``advisor_rule`` value and the advisor's model label (``rule:bandit-ucb``)."""
IDEA = "bandit-ucb: a count-based UCB1 bandit over the offered edit families (no weights are learned)."
"""The one idea the bandit keeps in the pool (the scaffold needs one to file experiments under)."""


@dataclass
class ArmStats:
    """Pulls and reward sum of one arm (rewards scaled to [0, 1])."""

    pulls: int = 0
    """Times the arm was chosen and its candidate's reward came back."""
    total: float = 0.0
    """Sum of its scaled rewards."""

    @property
    def mean(self) -> float:
        """Mean scaled reward (0 before the first pull)."""
        return self.total / self.pulls if self.pulls else 0.0


class BanditAdvisor:
    """The advisor role as UCB1 over edit families (see the module docstring)."""

    def __init__(
        self, *, seed: int, c: float, reward_lo: float, reward_hi: float, menu: Sequence[str] = ()
    ) -> None:
        """Bind the exploration coefficient, the reward range and the fallback menu.

        Raises:
            ValueError: If ``reward_hi <= reward_lo`` or ``c < 0``.
        """
        if not reward_hi > reward_lo:
            raise ValueError("reward_hi must be above reward_lo")
        if c < 0:
            raise ValueError("c must be >= 0")
        self.seed, self.c, self.lo, self.hi = seed, c, reward_lo, reward_hi
        self.menu = tuple(menu)
        self.stats: dict[str, ArmStats] = {}
        """Arm -> pulls and reward sum."""
        self.step_rewards: list[float] = []
        """Mean (unscaled) reward of each step's group, for the run's summary."""
        self._chosen: dict[tuple[int, int], str] = {}
        self._lock = threading.Lock()

    # -- the choice -------------------------------------------------------------------------------
    def _tie(self, arm: str) -> float:
        return random.Random(f"{self.seed}:{arm}").random()

    def _index(self, arm: str, virtual: dict[str, int], total: int) -> tuple[float, float]:
        s = self.stats.get(arm, ArmStats())
        n = s.pulls + virtual.get(arm, 0)
        if n == 0:
            return (math.inf, self._tie(arm))
        bonus = self.c * math.sqrt(2.0 * math.log(max(total, 1)) / n)
        return (s.mean + bonus, self._tie(arm))

    def rank(self, arms: Sequence[str], island: int) -> str:
        """The arm island ``island`` takes: UCB1 after islands ``0..island-1`` took theirs virtually.

        Raises:
            ValueError: If ``arms`` is empty.
        """
        if not arms:
            raise ValueError("no arm to choose from")
        with self._lock:
            virtual: dict[str, int] = {}
            total = sum(s.pulls for s in self.stats.values())
            pick = arms[0]
            for _ in range(island + 1):
                pick = max(arms, key=lambda a: self._index(a, virtual, total))
                virtual[pick] = virtual.get(pick, 0) + 1
                total += 1
            return pick

    def select_hypothesis(self, view: IslandView) -> Selection:
        """Choose a family by UCB1 and one of its offered options; file it under the pool's idea.

        Raises:
            ProposalError: If the pool is empty, or neither a vocabulary nor a menu offers an arm.
        """
        if not view.ideas:
            raise ProposalError("idea_selection", "the idea pool is empty")
        idea = min(i.id for i in view.ideas)
        entries = {e.name: e for e in view.edits()[0] if e.options}
        rng = random.Random(derive_seed(view.seed, "bandit"))
        if entries:
            arm = self.rank(sorted(entries), view.island)
            option = rng.choice(entries[arm].options)
            hypothesis = f"edit {arm} {option.number}"
        elif self.menu:
            arm = self.rank(list(dict.fromkeys(self.menu)), view.island)
            hypothesis = f"{arm} (bandit step {view.step}, island {view.island})"
        else:
            raise ProposalError("idea_selection", "no edit vocabulary is offered and bandit_menu is empty")
        with self._lock:
            self._chosen[(view.step, view.island)] = arm
        return Selection(idea, hypothesis)

    # -- the rewards ------------------------------------------------------------------------------
    def observe(self, step: int, rewards: dict[int, float]) -> None:
        """Add each island's reward to the arm it chose at ``step`` (islands without a choice: none)."""
        with self._lock:
            for island, reward in sorted(rewards.items()):
                arm = self._chosen.pop((step, island), None)
                if arm is None:
                    continue
                s = self.stats.setdefault(arm, ArmStats())
                s.pulls += 1
                s.total += min(1.0, max(0.0, (reward - self.lo) / (self.hi - self.lo)))
            self._chosen = {k: v for k, v in self._chosen.items() if k[0] > step}
            if rewards:
                self.step_rewards.append(sum(rewards.values()) / len(rewards))

    def to_json(self) -> dict[str, Any]:
        """The statistics for the checkpoint."""
        with self._lock:
            return {
                "stats": {a: [s.pulls, s.total] for a, s in self.stats.items()},
                "step_rewards": list(self.step_rewards),
            }

    def load_json(self, data: dict[str, Any]) -> None:
        """Take back :meth:`to_json`'s statistics (a resumed run)."""
        with self._lock:
            self.stats = {a: ArmStats(int(p), float(t)) for a, (p, t) in data.get("stats", {}).items()}
            self.step_rewards = [float(r) for r in data.get("step_rewards", [])]

    def pulls(self) -> dict[str, int]:
        """Arm -> pulls (for the run's summary)."""
        with self._lock:
            return {a: s.pulls for a, s in sorted(self.stats.items())}

    # -- the fixed stages -------------------------------------------------------------------------
    def generate_ideas(self, view: IslandView, n: int) -> list[str]:
        """The bandit's one idea while the pool is empty, else none."""
        return [] if view.ideas else [IDEA]

    def classify_idea(self, view: IslandView, proposal: str) -> Classification:
        """Every proposal is a new idea."""
        return Classification("new", None, proposal)

    def is_repeat(self, view: IslandView, selection: Selection) -> bool:
        """No LLM repeat check (the scaffold's ``skip_repeats`` filter still applies)."""
        return False

    def choose_pruned(self, view: IslandView, n_drop: int) -> tuple[list[int], str]:
        """The oldest ideas."""
        return sorted(i.id for i in view.ideas)[:n_drop], "bandit-ucb drops the oldest ideas"
