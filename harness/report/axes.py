"""What a score plot's y axis measures: the variant's combined metric, its unit and direction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.envs.manifest import DEFAULT_HEADROOM


@dataclass(frozen=True)
class ScoreAxis:
    """What the y axis of a score plot measures: the variant's combined metric."""

    name: str
    """Name of the combined metric (manifest ``combined``)."""
    unit: str
    """Its unit or range as the manifest's ``meaning`` states it; empty when it states none."""
    maximize: bool
    """Whether higher is better."""

    def label(self, metric: str = "score") -> str:
        """Y-axis label: the metric's name, unit and direction (``u`` is always 0 to 1, higher better).

        Args:
            metric: ``score`` (the raw combined score) or ``u`` (normalised progress).
        """
        if metric == "u":
            return f"best-so-far progress u of {self.name} (0 to 1)\n↑ higher is better"
        unit = f" ({self.unit})" if self.unit else ""
        better = "↑ higher is better" if self.maximize else "↓ lower is better"
        return f"best-so-far {self.name}{unit}\n{better}"


class _MetricLike(Protocol):
    name: str
    meaning: str


class _VariantLike(Protocol):
    @property
    def combined(self) -> str: ...
    @property
    def metrics(self) -> Sequence[_MetricLike]: ...
    @property
    def maximize(self) -> bool: ...


_UNIT_WORDS = (("microseconds", "µs"), ("milliseconds", "ms"), ("seconds", "s"), ("USD", "USD"))


def unit_of(meaning: str) -> str:
    """The unit or range a metric's ``meaning`` sentence states, or ``""`` when it states none.

    The manifest has no unit field; its sentences end in a parenthesised unit or range
    (``(dimensionless)``, ``(0 to 1)``) or say ``in microseconds``.
    """
    tail = re.search(r"\(([^()]*(?:dimensionless|\bto\b)[^()]*)\)\.?\s*$", meaning)
    if tail:
        return tail.group(1).strip()
    for word, short in _UNIT_WORDS:
        if re.search(rf"\bin {word}\b", meaning):
            return short
    return ""


def score_axis(variant: _VariantLike) -> ScoreAxis:
    """The y axis of a variant's score plots, from its manifest (combined metric and direction)."""
    spec = next((m for m in variant.metrics if m.name == variant.combined), None)
    return ScoreAxis(variant.combined, unit_of(spec.meaning) if spec else "", variant.maximize)


def y_init_of(y_floor: float, y_target: float, headroom: float | None) -> float:
    """The initial program's score from the progress bounds (inverse of ``Progress.y_floor``).

    ``y_floor = y_init - headroom * (y_target - y_init)``, so
    ``y_init = (y_floor + headroom * y_target) / (1 + headroom)``; exact for every draw, since a
    held-out key's bounds keep the manifest's headroom.

    Args:
        y_floor: Score at u = 0 of the runs' draw.
        y_target: Score at u = 1 of the runs' draw.
        headroom: The variant's ``Progress.headroom`` (None: the default).
    """
    h = DEFAULT_HEADROOM if headroom is None else headroom
    return (y_floor + h * y_target) / (1.0 + h)
