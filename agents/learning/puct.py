"""TTT-Discover's PUCT state reuse (paper App. A.2) as a pure, JSON-serialisable archive.

Score of an archived state ``s`` (higher is better)::

    score(s) = Q(s) + c * scale * P(s) * sqrt(1 + T) / (1 + n(s))
    Q(s)  = best_child(s) if some child of s was valid, else reward(s)   (max child reward, not mean)
    P(s)  = (|H| - rank(s)) / sum_s' (|H| - rank(s')) = (|H| - rank(s)) / (|H| (|H| + 1) / 2)
    scale = max(R_max - R_min over non-seed states, 1e-6)
    n(s)  = rollouts recorded from s or any descendant;  T = all rollouts recorded

Choices where the paper and reference code leave room (all deterministic):

* Ranks: rank 0 is the highest reward; equal rewards rank by first-seen order (older first).
* ``scale`` with fewer than two non-seed states is the floor 1e-6 (the range of at most one
  value is 0), so selection is then driven by ``Q`` alone.
* ``T`` and ``n`` count rollouts (``record`` calls, failed ones included), as the code does.
* A child whose key was ever archived (live or evicted) is never staged again: keys are
  fresh when inserted, so parent links form a forest and walks terminate. A key staged twice
  in one step keeps its best reward (and that reward's parent); the first wins ties.
* Eviction keeps a tombstone ``key -> parent`` per evicted state, so ancestor walks (visit
  back-propagation, lineage blocking) pass through evicted states to the live ones above.
  Tombstones cost one string pair per evicted state and are never pruned.
* ``add_seed`` of an existing seed is ignored (the first reward stays).
* The top-``children_per_parent`` rule ranks all of a parent's children (archived ones too),
  as the reference ``flush`` does; only parents with a child staged this step can change.
* Rewards here are whatever the caller ranks by: the learning agents pass the raw score
  (oriented so higher is better), as the reference code does, not the clamped RL reward.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCALE_FLOOR = 1e-6
"""Lower bound of ``scale`` (reference code)."""
MAX_ABS = 1e100
"""Bound on ``|reward|`` and ``c``: keeps every score a finite float (no overflow in the range)."""

_FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class PUCTState(BaseModel):
    """One archived state. ``order`` is its first-seen sequence number (the tie-break)."""

    model_config = _FROZEN

    reward: float = Field(ge=-MAX_ABS, le=MAX_ABS)
    parent: str | None
    seed: bool
    best_child: float | None = Field(default=None, ge=-MAX_ABS, le=MAX_ABS)
    visits: int = Field(default=0, ge=0)
    order: int = Field(ge=0)


class PendingChild(BaseModel):
    """A valid child staged by ``record`` until the next ``flush``."""

    model_config = _FROZEN

    parent: str
    reward: float = Field(ge=-MAX_ABS, le=MAX_ABS)
    order: int = Field(ge=0)


@dataclass(frozen=True)
class FlushResult:
    """Keys changed by one ``flush``, each in the order it happened."""

    inserted: tuple[str, ...]
    """Staged children that entered the archive."""
    evicted: tuple[str, ...]
    """States removed to bring the archive back to ``capacity``."""
    displaced: tuple[str, ...] = ()
    """Archived children removed because their parent now has ``children_per_parent`` better
    ones (the top-k rule applies to all of a parent's children, archived and staged)."""


def _check_key(key: object, what: str) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"{what} must be a non-empty string, got {key!r}")
    return key


def _check_reward(reward: object, what: str) -> float:
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise TypeError(f"{what} must be a float, got {type(reward).__name__}")
    if not math.isfinite(reward) or abs(reward) > MAX_ABS:
        raise ValueError(f"{what} must be finite with |{what}| <= {MAX_ABS:g}, got {reward!r}")
    return float(reward)


class PUCTArchive(BaseModel):
    """Archive ``H`` of states with PUCT selection; ``to_json``/``from_json`` checkpoint it exactly.

    One training step: ``select(k)`` the initial states, ``record`` every rollout, ``flush()``.

    Raises:
        ValueError: (pydantic ``ValidationError``) on construction or ``from_json`` when
            ``c`` is outside ``[0, 1e100]``, ``children_per_parent < 1``, ``capacity < 1``,
            or the stored states are inconsistent (dangling parents, cycles, reused keys).
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    c: float = Field(default=1.0, ge=0.0, le=MAX_ABS)
    children_per_parent: int = Field(default=2, ge=1)
    capacity: int = Field(default=1000, ge=1)
    states: dict[str, PUCTState] = Field(default_factory=dict)
    pending: dict[str, PendingChild] = Field(default_factory=dict)
    evicted: dict[str, str] = Field(default_factory=dict)
    rollouts: int = Field(default=0, ge=0)
    next_order: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> PUCTArchive:
        for key in (*self.states, *self.pending, *self.evicted):
            _check_key(key, "key")
        if self.states.keys() & self.evicted.keys() or self.pending.keys() & (
            self.states.keys() | self.evicted.keys()
        ):
            raise ValueError("a key is in more than one of states, pending and evicted")
        orders = [s.order for s in self.states.values()] + [p.order for p in self.pending.values()]
        if len(set(orders)) != len(orders) or any(o >= self.next_order for o in orders):
            raise ValueError("orders must be distinct and below next_order")
        for key, st in self.states.items():
            if st.seed != (st.parent is None):
                raise ValueError(f"state {key!r}: seeds and only seeds have no parent")
        known = self.states.keys() | self.evicted.keys()
        links = {**{k: s.parent for k, s in self.states.items()}, **self.evicted}
        if any(p is not None and p not in known for p in links.values()):
            raise ValueError("a parent link does not resolve to a live or evicted state")
        if any(p.parent not in self.states for p in self.pending.values()):
            raise ValueError("a pending child's parent is not a live state")
        rooted: set[str] = set()
        for key in links:
            path: dict[str, None] = {}  # ordered set: O(1) membership on deep chains
            cur: str | None = key
            while cur is not None and cur not in rooted:
                if cur in path:
                    raise ValueError(f"parent links form a cycle through {cur!r}")
                path[cur] = None
                cur = links[cur]
            rooted.update(path)
        return self

    def to_json(self) -> str:
        """The whole archive (settings, states, pending children, tombstones, counters) as JSON."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> PUCTArchive:
        """Rebuild an archive written by :meth:`to_json`.

        Raises:
            ValueError: (pydantic ``ValidationError``) the JSON is malformed or inconsistent.
        """
        return cls.model_validate_json(text)

    def __len__(self) -> int:
        return len(self.states)

    def __contains__(self, key: object) -> bool:
        return key in self.states

    def __getitem__(self, key: str) -> PUCTState:
        return self._require(key)

    def keys(self) -> list[str]:
        """Live state keys in first-seen order."""
        return sorted(self.states, key=lambda k: self.states[k].order)

    def get(self, key: str) -> PUCTState | None:
        """The (immutable) live state for ``key``, or None if unknown or evicted."""
        return self.states.get(key)

    @property
    def T(self) -> int:  # noqa: N802 - the paper's symbol
        """Total rollouts recorded (failed ones included)."""
        return self.rollouts

    @property
    def scale(self) -> float:
        """``max(R_max - R_min, 1e-6)`` over live non-seed states (the floor with fewer than two)."""
        rewards = [s.reward for s in self.states.values() if not s.seed]
        return max(max(rewards) - min(rewards), SCALE_FLOOR) if rewards else SCALE_FLOOR

    def _ranked(self) -> list[str]:
        return sorted(self.states, key=lambda k: (-self.states[k].reward, self.states[k].order))

    def _require(self, key: str) -> PUCTState:
        state = self.states.get(key)
        if state is None:
            why = "evicted" if key in self.evicted else "staged until flush()" if key in self.pending else ""
            raise KeyError(f"state {key!r} is not in the archive {f'({why})' if why else '(unknown key)'}")
        return state

    def prior(self, key: str) -> float:
        """Linear rank prior ``P(s)``.

        Raises:
            KeyError: ``key`` is not a live state.
        """
        self._require(key)
        n = len(self.states)
        return (n - self._ranked().index(key)) / (n * (n + 1) / 2)

    def _scores(self) -> dict[str, float]:
        n = len(self.states)
        explore = self.c * self.scale * math.sqrt(1 + self.rollouts) / (n * (n + 1) / 2)
        out: dict[str, float] = {}
        for rank, key in enumerate(self._ranked()):
            s = self.states[key]
            q = s.reward if s.best_child is None else s.best_child
            out[key] = q + explore * (n - rank) / (1 + s.visits)
        return out

    def score(self, key: str) -> float:
        """PUCT score of a live state (see the module docstring).

        Raises:
            KeyError: ``key`` is not a live state.
        """
        self._require(key)
        return self._scores()[key]

    def _parent_of(self, key: str) -> str | None:
        state = self.states.get(key)
        return state.parent if state is not None else self.evicted.get(key)

    def _ancestors(self, key: str) -> Iterator[str]:
        """Ancestors nearest first, through tombstones (some yielded keys may be evicted)."""
        parent = self._parent_of(key)
        while parent is not None:
            yield parent
            parent = self._parent_of(parent)

    def select(self, k: int, allow_repeats: bool = False) -> list[str]:
        """The up-to-``k`` best states by (score, reward), lineage blocked within the batch.

        States are visited by score descending, then reward descending, then first-seen order;
        a state is skipped if it is an ancestor or descendant of one already chosen. When fewer
        than ``k`` states are unblocked the list is shorter, unless ``allow_repeats``, which
        fills it to ``k`` by cycling through the chosen states in order.

        Raises:
            TypeError: ``k`` is not an int.
            ValueError: ``k < 1`` or the archive is empty.
        """
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an int, got {type(k).__name__}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not self.states:
            raise ValueError("the archive is empty: add_seed() first")
        scores = self._scores()
        st = self.states
        ordered = sorted(st, key=lambda x: (-scores[x], -st[x].reward, st[x].order))
        children: dict[str, list[str]] = {}
        for child in (*self.states, *self.evicted):
            parent = self._parent_of(child)
            if parent is not None:
                children.setdefault(parent, []).append(child)
        chosen: list[str] = []
        blocked: set[str] = set()
        for key in ordered:
            if len(chosen) == k:
                break
            if key not in blocked:
                chosen.append(key)
                blocked.add(key)
                blocked.update(self._ancestors(key))
                stack = [key]
                while stack:  # descendants, through tombstones
                    stack += children.get(stack.pop(), [])
                    blocked.update(stack)
        if allow_repeats:
            chosen += [chosen[i % len(chosen)] for i in range(k - len(chosen))]
        return chosen

    def add_seed(self, key: str, reward: float) -> None:
        """Add an initial state (never evicted). Re-adding an existing seed is ignored.

        Raises:
            TypeError: ``reward`` is not a number.
            ValueError: empty ``key``, non-finite or out-of-range ``reward``, or ``key`` is a
                known non-seed state (live, evicted or staged).
        """
        _check_key(key, "key")
        reward = _check_reward(reward, "reward")
        existing = self.states.get(key)
        if existing is not None and existing.seed:
            return
        if existing is not None or key in self.evicted or key in self.pending:
            raise ValueError(f"{key!r} is already a non-seed state; it cannot become a seed")
        self.states[key] = PUCTState(reward=reward, parent=None, seed=True, order=self.next_order)
        self.next_order += 1

    def record(self, parent: str, child: str | None, reward: float | None) -> None:
        """Record one rollout from ``parent``; a ``None`` child or reward is a failed rollout.

        Every rollout adds 1 to ``T`` and to the visits of ``parent`` and its live ancestors.
        A valid one also sets ``best_child(parent) = max(best_child, reward)`` and stages
        ``child`` for the next :meth:`flush` unless its key was ever archived.

        Raises:
            KeyError: ``parent`` is not a live state.
            TypeError: ``reward`` is not a number.
            ValueError: empty ``child`` key, or ``reward`` non-finite or out of range.
        """
        self._require(parent)
        if child is not None and reward is not None:
            child = _check_key(child, "child")
            reward = _check_reward(reward, "reward")
        for key in (parent, *self._ancestors(parent)):
            state = self.states.get(key)
            if state is not None:
                self.states[key] = state.model_copy(update={"visits": state.visits + 1})
        self.rollouts += 1
        if child is None or reward is None:
            return
        p = self.states[parent]
        best = reward if p.best_child is None else max(p.best_child, reward)
        self.states[parent] = p.model_copy(update={"best_child": best})
        if child in self.states or child in self.evicted:
            return
        staged = self.pending.get(child)
        if staged is None:
            self.pending[child] = PendingChild(parent=parent, reward=reward, order=self.next_order)
            self.next_order += 1
        elif reward > staged.reward:
            self.pending[child] = staged.model_copy(update={"parent": parent, "reward": reward})

    def flush(self) -> FlushResult:
        """End of a training step: keep the top children per parent, then evict to capacity.

        Each parent keeps its ``children_per_parent`` best children among those already archived
        and those staged this step (reward descending, older wins ties), as the reference code's
        ``flush`` filters the whole buffer; staged children outside the top are dropped and
        archived ones are displaced (tombstoned). Kept staged children are inserted in staging
        order. Then, while the archive exceeds ``capacity``, the lowest-reward non-seed state
        (newest among equals) is evicted and tombstoned. Seeds are never evicted, so seeds
        alone may exceed ``capacity``.
        """
        by_parent: dict[str, list[tuple[str, float, int]]] = {}
        for key, staged in self.pending.items():
            by_parent.setdefault(staged.parent, []).append((key, staged.reward, staged.order))
        for key, state in self.states.items():
            if state.parent is not None and state.parent in by_parent:
                by_parent[state.parent].append((key, state.reward, state.order))
        kept: list[tuple[str, PendingChild]] = []
        displaced: list[str] = []
        for group in by_parent.values():
            group.sort(key=lambda c: (-c[1], c[2]))
            for rank, (key, _, _) in enumerate(group):
                if key in self.pending and rank < self.children_per_parent:
                    kept.append((key, self.pending[key]))
                elif key in self.states and rank >= self.children_per_parent:
                    displaced.append(key)
        kept.sort(key=lambda kv: kv[1].order)
        displaced.sort(key=lambda k: self.states[k].order)
        for key in displaced:
            self._tombstone(key)
        for key, staged in kept:
            self.states[key] = PUCTState(
                reward=staged.reward, parent=staged.parent, seed=False, order=staged.order
            )
        self.pending = {}
        excess = len(self.states) - self.capacity
        victims = sorted(
            (k for k, s in self.states.items() if not s.seed),
            key=lambda k: (self.states[k].reward, -self.states[k].order),
        )[: max(excess, 0)]
        for key in victims:
            self._tombstone(key)
        return FlushResult(
            inserted=tuple(k for k, _ in kept), evicted=tuple(victims), displaced=tuple(displaced)
        )

    def _tombstone(self, key: str) -> None:
        parent = self.states.pop(key).parent
        assert parent is not None  # non-seed states always have one (validated)
        self.evicted[key] = parent
