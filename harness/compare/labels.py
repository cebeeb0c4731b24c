"""Readable names for run identities: what differs, not a hash (``pacevolve[budget=20]``).

An identity ``<agent>@<cfg>`` names a configuration by a hash, which tells two configurations of
one agent apart but not how they differ. Every printer (``bench leaderboard``, ``bench compare``
tables, plot legends, the reports) names the identities it shows with :func:`identity_labels`:

- an agent shown with one identity is its name (``pacevolve``);
- several identities of one agent show the settings whose values differ between them, and only
  those (``pacevolve[budget=20]`` and ``pacevolve[budget=50]``; at most :data:`MAX_KEYS` of them,
  then ``+N``);
- a run's own ``--label NAME`` (:attr:`RunInfo.label`) is used instead of the computed name;
- names are always unique within one call: names that would coincide (two identities given the
  same ``--label``, a label equal to a shown agent's name, settings cut by ``+N``) get ``@<cfg>``
  appended, then fall back to the identity itself.

Records only (mappings of leaderboard columns): no pandas, so ``bench leaderboard`` stays light.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .cfg import effective, identity_of

MAX_KEYS = 3
"""Differing settings named in a label; further ones are counted (``+2``)."""
MAX_VALUE_CHARS = 24
"""Characters of a setting's value shown in a label (longer values are cut with ``…``)."""
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,47}$")
"""What ``bench run --label`` accepts: shell- and ``--agents``-safe (no ``@``, ``=``, brackets or spaces)."""

# Settings of every identity under shorter names: the budget a run was given is what a reader scans for.
_SHORT = {
    "budget.max_evaluations": "budget",
    "budget.max_wall_s": "wall_s",
    "budget.max_cost_usd": "cost_usd",
}
_PART_ORDER = {"config": 0, "budget": 1, "models": 2}


@dataclass(frozen=True)
class ShownIdentity:
    """One identity a printer shows, with what its label is computed from."""

    identity: str
    """``<agent>@<cfg>`` (:func:`harness.compare.identity.identity_of`)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Flat effective configuration: ``config.*``, ``models.*``, ``budget.*`` (``identity.effective``)."""
    label: str | None = None
    """The user's name for it (``bench run --label``), used instead of the computed label."""

    @property
    def agent(self) -> str:
        """The agent part of the identity."""
        return self.identity.split("@", 1)[0]

    @property
    def cfg(self) -> str:
        """The configuration-hash part of the identity."""
        return self.identity.split("@", 1)[1] if "@" in self.identity else ""


def check_label(label: str) -> str:
    """Validate a ``--label``.

    Returns:
        The label.

    Raises:
        ValueError: If it does not match :data:`LABEL_PATTERN`.
    """
    if not LABEL_PATTERN.match(label):
        raise ValueError(
            f"--label {label!r}: use 1-48 letters, digits and _ . + - (starting with a letter or digit); "
            "no spaces, '@', '=' or brackets"
        )
    return label


def _value(v: Any) -> str:
    if v is None:
        text = "none"
    elif isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, float):
        text = f"{v:g}" if math.isfinite(v) else str(v)
    elif isinstance(v, int | str):
        text = str(v)
    else:
        text = json.dumps(v, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def _key_order(key: str) -> tuple[int, str]:
    part = key.split(".", 1)[0]
    return _PART_ORDER.get(part, 3), key


def _differing(group: list[ShownIdentity]) -> list[str]:
    """Settings whose values differ within one agent's identities.

    A role's model repeated by a differing config key with the same values (``config.model``) is
    named once.
    """
    keys = sorted({k for s in group for k in s.settings}, key=_key_order)
    vectors = {k: tuple(_canon(s.settings[k]) if k in s.settings else "<unset>" for s in group) for k in keys}
    differ = [k for k in keys if len(set(vectors[k])) > 1]
    config_vectors = {vectors[k] for k in differ if k.startswith("config.")}
    return [k for k in differ if not (k.startswith("models.") and vectors[k] in config_vectors)]


def _names(keys: list[str]) -> dict[str, str]:
    """Short display names of settings (the part after the dot), full where two would coincide."""
    short = {k: _SHORT.get(k, k.split(".", 1)[-1]) for k in keys}
    counts = Counter(short.values())
    return {k: (v if counts[v] == 1 else k) for k, v in short.items()}


def _computed(group: list[ShownIdentity]) -> dict[str, str]:
    if len(group) == 1:
        return {group[0].identity: group[0].agent}
    differ = _differing(group)
    names = _names(differ)
    out = {}
    for s in group:
        parts = [
            f"{names[k]}={_value(s.settings[k]) if k in s.settings else 'unset'}" for k in differ[:MAX_KEYS]
        ]
        if len(differ) > MAX_KEYS:
            parts.append(f"+{len(differ) - MAX_KEYS}")
        out[s.identity] = f"{s.agent}[{','.join(parts)}]" if parts else s.identity
    return out


def identity_labels(shown: Iterable[ShownIdentity]) -> dict[str, str]:
    """Name each identity by what tells it apart from the others shown (see the module docstring).

    Args:
        shown: The identities one view prints (a table, a figure, a report); one entry per identity.

    Returns:
        Identity -> its label, unique across ``shown``.

    Raises:
        ValueError: If an identity is given twice.
    """
    items = list(shown)
    ids = [s.identity for s in items]
    if len(set(ids)) != len(ids):
        dup = sorted(i for i, n in Counter(ids).items() if n > 1)
        raise ValueError(f"identities given twice: {', '.join(dup)}")
    by_agent: dict[str, list[ShownIdentity]] = defaultdict(list)
    for s in items:
        # identities the user named stay out of the contrast: their label says what they are
        if not s.label:
            by_agent[s.agent].append(s)
    labels = {s.identity: s.label for s in items if s.label}
    for group in by_agent.values():
        labels.update(_computed(group))
    by_id = {s.identity: s for s in items}
    # Make names unique: append the configuration hash, then fall back to the identity itself,
    # then (names no label check allowed) a counter.
    for widen in (lambda i, lab: f"{lab}@{by_id[i].cfg}", lambda i, lab: i):
        counts = Counter(labels.values())
        labels = {i: (widen(i, lab) if counts[lab] > 1 else lab) for i, lab in labels.items()}
    counts = Counter(labels.values())
    seen: Counter[str] = Counter()
    for i in sorted(labels):
        lab = labels[i]
        if counts[lab] > 1:
            seen[lab] += 1
            labels[i] = f"{lab}#{seen[lab]}"
    return {i: labels[i] for i in ids}


def shown_from_records(
    records: Iterable[Mapping[str, Any]], identities: Collection[str] | None = None
) -> list[ShownIdentity]:
    """The identities of leaderboard records, each with its settings and its newest ``label``.

    Args:
        records: Leaderboard rows as mappings (``agent``, ``agent_config_json``, ``models_json``,
            ``budget_json``; ``label`` and ``finished_at`` when present).
        identities: Keep only these (None: every identity in ``records``).

    Returns:
        One entry per identity, in order of first appearance. Runs of one identity given different
        ``--label`` values take the label of the most recently finished one.
    """
    first: dict[str, Mapping[str, Any]] = {}
    newest: dict[str, tuple[str, str]] = {}
    for r in records:
        ident = identity_of(r)
        if identities is not None and ident not in identities:
            continue
        first.setdefault(ident, r)
        lab = r.get("label")
        if isinstance(lab, str) and lab:
            when = str(r.get("finished_at") or "")
            if ident not in newest or when >= newest[ident][0]:
                newest[ident] = (when, lab)
    return [
        ShownIdentity(identity=i, settings=effective(r), label=newest[i][1] if i in newest else None)
        for i, r in first.items()
    ]


def record_labels(
    records: Iterable[Mapping[str, Any]], identities: Collection[str] | None = None
) -> dict[str, str]:
    """:func:`identity_labels` of the identities in leaderboard records (see :func:`shown_from_records`)."""
    return identity_labels(shown_from_records(records, identities))
