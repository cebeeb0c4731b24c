"""Progress bounds of the draw a variant is scored on: the manifest's, or measured once per held-out key.

A variant whose scorer draws its cases from the installation's held-out key (``heldout = "secret"``)
scores every key on different data, so the manifest's bounds (measured on the public draw) do not
hold for it: on one key eplb-tiny's initial program scored 0.680 against a y_init of 0.714, so every
run sat at u = 0. The rule for such a draw:

* ``y_init`` is the initial program's score on this key's draw, measured once (a trusted evaluation
  of the trusted initial program) and stored beside the key in ``<data root>/heldout-bounds.json``;
* ``y_target = y_init + (manifest y_target - manifest y_init)``: the same span as on the public draw;
* ``y_floor`` follows from them as for every variant (:attr:`Progress.y_floor`).

Every run records the bounds it used (``run.json``) and so does its leaderboard row, with the key's
fingerprint; comparisons never put rows of different keys on one u scale.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from .data import data_root
from .manifest import Progress
from .secret import PUBLIC, fingerprint, public_draw_forced

STORE_FILE = "heldout-bounds.json"
"""File beside the key holding each key's measured initial scores."""
NO_KEY = ""
"""Key label of a variant that draws nothing from the held-out key."""


class BoundsError(RuntimeError):
    """The initial program could not be scored on this key's draw, so no bounds exist for it."""


class VariantBoundsLike(Protocol):
    """What bounds need of a variant (``envs.registry.Variant``)."""

    @property
    def id(self) -> str:
        """Variant id."""
        ...

    @property
    def hash(self) -> str:
        """Content hash."""
        ...

    @property
    def progress(self) -> Progress:
        """The manifest's progress bounds."""
        ...

    @property
    def scorer_params(self) -> dict[str, Any]:
        """Merged scorer parameters (``heldout``)."""
        ...


class DrawBounds(BaseModel):
    """The progress bounds one run is measured against, and the draw they belong to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    y_floor: float
    """Score at u = 0."""
    y_init: float
    """The initial program's score on this draw (the manifest's on the public draw)."""
    y_target: float
    """Score at u = 1."""
    headroom: float | None = None
    """The variant's headroom (:attr:`Progress.headroom`), kept to rebuild the agent's bounds."""
    key: str = NO_KEY
    """Held-out key fingerprint (six hex digits), ``public``, or empty (no held-out draw)."""
    measured: bool = False
    """True when ``y_init`` was measured on this key's draw, False when it is the manifest's."""
    y_init_public: float | None = Field(default=None)
    """The manifest's ``y_init`` (public draw), for the record."""

    def u(self, y: float | None) -> float:
        """Normalised progress of ``y`` in [0, 1] (None or non-finite: 0)."""
        return self.progress().u(y)

    def progress(self) -> Progress:
        """These bounds as the :class:`Progress` an agent sees."""
        return Progress(y_init=self.y_init, y_target=self.y_target, headroom=self.headroom)


def keyed(variant: VariantBoundsLike) -> bool:
    """Whether ``variant`` scores a draw made from the held-out key (and the key is in use)."""
    return str(variant.scorer_params.get("heldout", "public")) == "secret" and not public_draw_forced()


def key_label(variant: VariantBoundsLike) -> str:
    """The key a result of ``variant`` depends on: a fingerprint, ``public`` or empty.

    Raises:
        HeldoutKeyError: If the installation key is unusable.
    """
    if str(variant.scorer_params.get("heldout", "public")) != "secret":
        return NO_KEY
    return PUBLIC if public_draw_forced() else fingerprint()


def manifest_bounds(variant: VariantBoundsLike, key: str = NO_KEY) -> DrawBounds:
    """The manifest's bounds (the public draw's, or a variant without a held-out draw)."""
    p = variant.progress
    return DrawBounds(y_floor=p.y_floor, y_init=p.y_init, y_target=p.y_target, headroom=p.headroom,
                      key=key, measured=False, y_init_public=p.y_init)  # fmt: skip


def keyed_bounds(variant: VariantBoundsLike, y_init: float, key: str) -> DrawBounds:
    """Bounds for a key's draw whose initial program scored ``y_init`` (the rule in the module doc).

    Raises:
        BoundsError: If ``y_init`` is not finite.
    """
    if not math.isfinite(y_init):
        raise BoundsError(f"{variant.id}: the initial program's score on key {key} is {y_init}")
    p = variant.progress
    local = Progress(y_init=y_init, y_target=y_init + (p.y_target - p.y_init), headroom=p.headroom)
    return DrawBounds(y_floor=local.y_floor, y_init=y_init, y_target=local.y_target, headroom=p.headroom,
                      key=key, measured=True, y_init_public=p.y_init)  # fmt: skip


def store_path() -> Path:
    """Where measured initial scores are kept (beside the key file)."""
    return data_root() / STORE_FILE


def _entry(variant: VariantBoundsLike) -> str:
    return f"{variant.id}@{variant.hash}"


@contextlib.contextmanager
def _locked() -> Iterator[Path]:
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{STORE_FILE}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield path


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # a damaged store is re-measured, never trusted
        return {}
    return data if isinstance(data, dict) else {}


def cached_bounds(variant: VariantBoundsLike) -> DrawBounds | None:
    """The stored bounds of ``variant`` for the key in use (None: not measured yet or not keyed).

    Raises:
        HeldoutKeyError: If the installation key is unusable.
    """
    if not keyed(variant):
        return None
    key = fingerprint()
    value = _read(store_path()).get(key, {}).get(_entry(variant))
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return keyed_bounds(variant, float(value), key)


def bounds_for(variant: VariantBoundsLike, score_initial: Callable[[], float | None]) -> DrawBounds:
    """The bounds a run of ``variant`` uses, measuring the initial program once per key if needed.

    Args:
        variant: The variant.
        score_initial: Evaluates the variant's initial program on the trusted scorer and returns
            its combined score (None when the evaluation was not ``ok``).

    Returns:
        The manifest's bounds, or this key's (measured now or earlier).

    Raises:
        BoundsError: If the initial program did not score on this key's draw.
        HeldoutKeyError: If the installation key is unusable.
    """
    if not keyed(variant):
        return manifest_bounds(variant, key_label(variant))
    found = cached_bounds(variant)
    if found is not None:
        return found
    key = fingerprint()
    score = score_initial()  # outside the lock: an evaluation takes seconds
    if score is None or not math.isfinite(score):
        raise BoundsError(
            f"{variant.id}: the initial program did not score on this held-out key's draw ({key}), "
            "so its progress bounds cannot be set; see `bench eval --env "
            f"{variant.id}` for the reason"
        )
    with _locked() as path:
        data = _read(path)
        stored = data.setdefault(key, {}).get(_entry(variant))
        if isinstance(stored, int | float) and not isinstance(stored, bool) and math.isfinite(stored):
            return keyed_bounds(variant, float(stored), key)  # measured meanwhile: one value per key
        data[key][_entry(variant)] = float(score)
        tmp = path.with_name(f".{STORE_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    return keyed_bounds(variant, float(score), key)
