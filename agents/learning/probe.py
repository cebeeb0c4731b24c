"""The learning line's policy probe: how training moved the policy's own choices on fixed states.

A run's mean step reward can rise without any learning (a search keeps its best programs, so
later steps start from better parents; a frozen advisor's line rose too, issue 35). The probe
asks the policy itself instead. It keeps the policy's answers of the first steps whose rewards
differ within the step's group (fixed states: the recorded prompts, and the answers sampled from
them), each with its candidate's reward minus the group's mean (the trusted scorer's rewards).
At the end of the run each answer is scored twice by the learner on the same prompt: with the
trained adapter and with the adapter switched off (the initial weights: the frozen twin; a LoRA
adapter starts as the identity). The line reports

    separation = mean Δ over answers of above-mean candidates - mean Δ over below-mean ones,

where Δ = log p_trained(answer | prompt) - log p_frozen(answer | prompt) in nats (the answer's
sequence log-prob under the sampler's grammar mask). A frozen run (``lr = 0``) gives exactly 0;
a policy that learned from its rewards moved probability towards the answers that scored better,
so > 0. These are the policy's training states (it was updated on them), so the line shows that
the update moved the policy the way its rewards pointed, not that it generalises.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.rl.backends.base import Completion, PolicyBackend

PROBE_ANSWERS = 16
"""Answers the probe keeps: a few forward passes of the policy at the end of a run (two per
micro-batch of answers: with and without the adapter)."""


@dataclass(frozen=True)
class ProbeAnswer:
    """One recorded policy answer of a probe state."""

    completion: Completion
    """The sampler's record: prompt ids (the state), answer ids and the grammar it was decoded under."""
    centred_reward: float
    """Its candidate's reward minus the mean reward of its step's group (> 0: above the group mean)."""
    step: int
    """Scaffold step that sampled it."""


@dataclass(frozen=True)
class ProbeResult:
    """The probe's measurement at the end of a run."""

    answers: int
    """Answers scored (above plus below the group mean; answers at the mean are not scored)."""
    above: int
    """Answers of candidates above their group's mean reward."""
    below: int
    """Answers of candidates below it."""
    shift_above: float
    """Mean Δ log-prob (trained - frozen twin, nats) of the above-mean answers."""
    shift_below: float
    """Mean Δ log-prob of the below-mean answers."""
    separation: float
    """``shift_above - shift_below``: > 0 when training favoured the better answers; 0 untrained."""
    steps: tuple[int, ...]
    """The steps whose answers form the probe."""

    def headline(self) -> str:
        """The learning line (labelled for what it measures)."""
        verdict = "no change (untrained)" if self.separation == 0.0 else ""
        if self.separation > 0:
            verdict = "trained policy favours the better-scored answers"
        elif self.separation < 0:
            verdict = "trained policy favours the worse-scored answers"
        span = ",".join(str(s) for s in self.steps)
        return (
            f"learning (policy vs its frozen twin on {self.answers} recorded answers of steps {span}): "
            f"log-prob change above-mean answers {self.shift_above:+.3f}, below-mean "
            f"{self.shift_below:+.3f}, separation {self.separation:+.3f} nats: {verdict}"
        )


class PolicyProbe:
    """Collects the probe's answers from the first steps with non-constant rewards, then scores them."""

    def __init__(self, size: int) -> None:
        """Keep up to ``size`` answers (0: no probe)."""
        self.size = size
        self.answers: list[ProbeAnswer] = []

    def offer(self, step: int, candidates: list[list[Completion]], rewards: list[float]) -> None:
        """Add a step's candidates (each its policy calls) while the probe has room.

        A step whose rewards are all equal says nothing about which answer is better and is
        passed over. A step is taken whole or, when it does not fit, its above- and below-mean
        candidates alternately until the probe is full, so a step with both kinds always gives
        both (a candidate brings one answer per policy call: filling in candidate order let the
        first step's first candidates, all on one side of the mean, fill the probe alone).
        """
        if len(self.answers) >= self.size or len(rewards) < 2:
            return
        r = np.asarray(rewards, dtype=np.float64)
        if not np.all(np.isfinite(r)) or r.max() == r.min():
            return
        mean = float(r.mean())
        above = [(calls, float(x)) for calls, x in zip(candidates, r, strict=True) if x > mean]
        below = [(calls, float(x)) for calls, x in zip(candidates, r, strict=True) if x < mean]
        order = [pair for duo in itertools.zip_longest(above, below) for pair in duo if pair is not None]
        for calls, reward in order:
            for c in calls:
                if len(self.answers) < self.size and c.token_ids:
                    self.answers.append(ProbeAnswer(c, reward - mean, step))

    def measure(
        self, backend: PolicyBackend, temperature: float, *, untrained: bool = False
    ) -> ProbeResult | None:
        """Score every answer with the current adapter and with it off; None without both kinds.

        Args:
            backend: The learner holding the adapter.
            temperature: The sampler's temperature (the answers' log-probs are taken at it).
            untrained: The adapter cannot have moved (``lr = 0``: a LoRA adapter starts as the
                identity and a zero step size leaves it there), so every Δ is exactly 0 and no
                forward pass is spent on it (a frozen arm of a comparison pays nothing).
        """
        above = [a for a in self.answers if a.centred_reward > 0]
        below = [a for a in self.answers if a.centred_reward < 0]
        if not above or not below:
            return None
        completions = [a.completion for a in above + below]
        if untrained:
            delta = [0.0] * len(completions)
        else:
            trained = backend.score(completions, temperature)
            frozen = backend.score(completions, temperature, adapter=False)
            delta = [float(t.sum() - f.sum()) for t, f in zip(trained, frozen, strict=True)]
        up, down = float(np.mean(delta[: len(above)])), float(np.mean(delta[len(above) :]))
        if not (math.isfinite(up) and math.isfinite(down)):
            return None
        return ProbeResult(
            answers=len(delta),
            above=len(above),
            below=len(below),
            shift_above=up,
            shift_below=down,
            separation=up - down,
            steps=tuple(sorted({a.step for a in self.answers})),
        )

    def to_json(self) -> list[dict[str, Any]]:
        """The answers as JSON (kept in the scaffold's checkpoint so a resumed run keeps its probe)."""
        return [
            {"completion": a.completion.to_json(), "centred_reward": a.centred_reward, "step": a.step}
            for a in self.answers
        ]

    def load_json(self, data: list[dict[str, Any]]) -> None:
        """Inverse of :meth:`to_json`.

        Raises:
            KeyError: If a record lacks a field.
            ValueError: If a completion record is inconsistent.
        """
        self.answers = [
            ProbeAnswer(Completion.from_json(d["completion"]), float(d["centred_reward"]), int(d["step"]))
            for d in data
        ]
