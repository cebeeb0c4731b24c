"""Validation subsets: score a program on a seeded random subset of a variant's evaluation units.

A family whose manifest sets ``subset_unit`` (e.g. "workload windows", "test cases") can score a
candidate on some of its units only. The request travels as the scorer parameter
``subset = {"seed": s, "size": k}`` of a *derived* variant whose id is the base id plus the suffix
``~subset-<s>-<k>`` (resolved by ``Registry.get``), so two programs evaluated under one derived id
are scored on exactly the same units. Which units a request selects is :func:`draw_indices`:
``k`` distinct unit indices drawn with ``random.Random(s)``, sorted.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

SUFFIX_MARK = "~subset-"
"""What separates a base variant id from its subset request in a derived id."""
_SUFFIX = re.compile(r"^(?P<seed>0|[1-9][0-9]*)-(?P<size>[1-9][0-9]*)$")
PARAM_KEY = "subset"
"""Scorer parameter holding the request (a dict ``{"seed": int, "size": int}``)."""
QUICK_MARK = "~quick"
"""Suffix of a derived id naming a variant's reduced mode (``trimul-h100~quick``): the family's
correctness tests plus a few timed calls per benchmark, never ranked with full evaluations."""
QUICK_KEY = "quick"
"""Scorer parameter set (``True``) on a reduced-mode variant."""
QUICK_SUPPORT_KEY = "quick_timed_calls"
"""Scorer parameter by which a family offers a reduced mode: timed requests per benchmark in it."""
DERIVED_MARK = "~"
"""What every derived id (subset or reduced mode) carries and no manifest id may."""


@dataclass(frozen=True)
class SubsetRequest:
    """Which random subset of a variant's units to score."""

    seed: int
    """Seed of ``random.Random`` that draws the units (a non-negative integer)."""
    size: int
    """How many units to score (>= 1); a variant with fewer units scores all of them."""

    def __post_init__(self) -> None:
        """Check the fields.

        Raises:
            ValueError: If ``seed`` is negative, ``size`` is below 1, or either is not an int.
        """
        for name in ("seed", "size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"subset {name} must be an integer, got {value!r}")
        if self.seed < 0:
            raise ValueError(f"subset seed must be >= 0, got {self.seed}")
        if self.size < 1:
            raise ValueError(f"subset size must be >= 1, got {self.size}")

    def to_id_suffix(self) -> str:
        """The env-id suffix naming this request, ``~subset-<seed>-<size>``."""
        return f"{SUFFIX_MARK}{self.seed}-{self.size}"

    def to_params(self) -> dict[str, int]:
        """The scorer-parameter form, ``{"seed": seed, "size": size}``."""
        return {"seed": self.seed, "size": self.size}

    @classmethod
    def parse_env_id(cls, env_id: str) -> tuple[str, SubsetRequest | None]:
        """Split an env id into its base id and subset request.

        ``"eplb-tiny~subset-123-4"`` gives ``("eplb-tiny", SubsetRequest(123, 4))``; an id without
        the suffix gives ``(env_id, None)``.

        Raises:
            ValueError: If the id carries a malformed subset suffix (not ``~subset-<seed>-<size>``
                with decimal seed >= 0 and size >= 1, no leading zeros) or an empty base id.
        """
        base, mark, rest = env_id.partition(SUFFIX_MARK)
        if not mark:
            if "~" in env_id:
                raise ValueError(
                    f"env id {env_id!r}: '~' may only introduce a subset suffix '~subset-<seed>-<size>' "
                    f"or the reduced mode '{QUICK_MARK}'"
                )
            return env_id, None
        m = _SUFFIX.match(rest)
        if not base or "~" in base or m is None:
            raise ValueError(
                f"env id {env_id!r}: malformed subset suffix; expected '<variant id>~subset-<seed>-<size>' "
                "with an integer seed >= 0 and size >= 1 (e.g. 'eplb-tiny~subset-123-4')"
            )
        return base, cls(int(m["seed"]), int(m["size"]))


def is_subset_id(env_id: str) -> bool:
    """Whether an env id names a validation subset of a variant (its scores are not full scores)."""
    return SUFFIX_MARK in env_id


def is_reduced_id(env_id: str) -> bool:
    """Whether an env id names a derived variant (a subset or a reduced mode): never a full score."""
    return DERIVED_MARK in env_id


def split_quick(env_id: str) -> tuple[str, bool]:
    """``("trimul-h100", True)`` for ``"trimul-h100~quick"``; ``(env_id, False)`` otherwise.

    Raises:
        ValueError: The base id is empty or itself derived (``a~subset-1-2~quick``).
    """
    if not env_id.endswith(QUICK_MARK):
        return env_id, False
    base = env_id[: -len(QUICK_MARK)]
    if not base or DERIVED_MARK in base:
        raise ValueError(f"env id {env_id!r}: '{QUICK_MARK}' follows a manifest variant id only")
    return base, True


def subset_of(params: dict[str, Any]) -> SubsetRequest | None:
    """The subset request in a variant's scorer parameters, or None for a full evaluation.

    Raises:
        ValueError: If ``params["subset"]`` is present but not ``{"seed": int, "size": int}``.
    """
    raw = params.get(PARAM_KEY)
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"seed", "size"}:
        raise ValueError(f"scorer parameter 'subset' must be {{'seed': int, 'size': int}}, got {raw!r}")
    return SubsetRequest(seed=raw["seed"], size=raw["size"])


def draw_indices(n_units: int, request: SubsetRequest) -> list[int]:
    """The unit indices a request selects: ``min(size, n_units)`` distinct indices, sorted.

    Deterministic: the same ``n_units`` and request always give the same list.

    Raises:
        ValueError: If ``n_units`` is negative.
    """
    if n_units < 0:
        raise ValueError(f"n_units must be >= 0, got {n_units}")
    rng = random.Random(request.seed)
    return sorted(rng.sample(range(n_units), min(request.size, n_units)))


def unit_indices(n_units: int, params: dict[str, Any]) -> list[int]:
    """Indices of the units a scorer evaluates: all of them, or the requested subset.

    Args:
        n_units: How many units the full evaluation scores.
        params: The variant's scorer parameters (``subset`` read by :func:`subset_of`).

    Returns:
        ``0 .. n_units - 1`` without a subset request, else :func:`draw_indices`.

    Raises:
        ValueError: If the subset parameter is malformed or ``n_units`` is negative.
    """
    request = subset_of(params)
    if request is None:
        return list(range(n_units))
    return draw_indices(n_units, request)
