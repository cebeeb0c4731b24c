"""Run identity: what was really run (agent, configuration, models per role, budget), not just the agent.

Two runs are comparable seed for seed only when they share an identity. The identity is shown as
``<agent>@<cfg>``, where ``cfg`` is a short hash of the canonical JSON of the agent's resolved
configuration, its role -> model mapping and its configured budget. ``bench compare --agents`` and
``bench leaderboard`` name and group runs by it; several identities of one agent are pooled only
when asked (``--pool``), and unknown names fail with suggestions.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

# The record-level pieces live in .cfg (no pandas); re-exported here where callers always found them.
from .cfg import CFG_HASH_LEN as CFG_HASH_LEN
from .cfg import cfg_hash as cfg_hash
from .cfg import effective as effective
from .cfg import identity_of as identity_of
from .cfg import parse_object as _parse
from .labels import record_labels

if TYPE_CHECKING:  # pandas is imported by the functions on frames
    import pandas as pd

IDENTITY_COLUMN = "identity"
"""Column added by :func:`with_identity`: the ``<agent>@<cfg>`` label of each row."""
DEVICE_COLUMN = "device"
"""Leaderboard column naming the device a run was timed on (``LeaderboardRow.device``)."""


class UnknownAgentError(ValueError):
    """An ``--agents`` entry names no agent (or identity) that has runs here."""


class AmbiguousAgentError(ValueError):
    """An agent name covers several identities and pooling them was not asked for."""


def frame_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of a leaderboard frame as records (what :mod:`.labels` reads)."""
    return cast("list[dict[str, Any]]", df.to_dict("records"))


def with_identity(lb: pd.DataFrame) -> pd.DataFrame:
    """A copy of leaderboard rows with an :data:`IDENTITY_COLUMN` (``<agent>@<cfg>``) column.

    Rows written before budgets were recorded (no ``budget_json``) hash an empty budget, so they
    form their own identity rather than joining a run whose budget is known.
    """
    import pandas as pd

    df = lb.copy()
    if df.empty:
        df[IDENTITY_COLUMN] = pd.Series(dtype=object)
        return df
    none = pd.Series(None, index=df.index, dtype=object)
    cols = [df[c] if c in df else none for c in ("agent_config_json", "models_json", "budget_json")]
    df[IDENTITY_COLUMN] = [
        f"{agent}@{cfg_hash(_parse(c), _parse(m), _parse(b))}"
        for agent, c, m, b in zip(df["agent"], *cols, strict=True)
    ]
    return df


def devices(lb: pd.DataFrame) -> pd.Series:
    """Each row's GPU (:data:`DEVICE_COLUMN`) as text, ``""`` where none: not recorded or a CPU.

    Runs of different GPUs are never pooled: their timings are not comparable. CPU timings
    (``cpu``) name no CPU model, so they group with rows that recorded nothing (files from before
    the column, families that time nothing on a chosen device).
    """
    import pandas as pd

    if DEVICE_COLUMN not in lb:
        return pd.Series("", index=lb.index, dtype=object)
    return lb[DEVICE_COLUMN].map(lambda d: d if isinstance(d, str) and d != "cpu" else "").astype(object)


@dataclass
class Selection:
    """How the ``--agents`` entries map to identities: one compared unit per entry."""

    units: dict[str, tuple[str, ...]]
    """Label shown in the output -> identities whose runs it holds (several only when pooled)."""
    notes: list[str] = field(default_factory=list)
    """What the reader must know (pooled identities)."""

    def unit_of(self) -> dict[str, str]:
        """Identity -> the label of the unit it belongs to."""
        return {ident: label for label, idents in self.units.items() for ident in idents}


def describe(df: pd.DataFrame, identities: Sequence[str]) -> dict[str, str]:
    """What tells identities apart: the settings whose values differ between them, per identity.

    Args:
        df: Rows with :data:`IDENTITY_COLUMN`.
        identities: Identities to contrast.

    Returns:
        Identity -> ``key=value`` list of its differing settings and its number of runs.
    """
    flat = {i: effective(frame_records(df[df[IDENTITY_COLUMN] == i].head(1))[0]) for i in identities}
    keys = sorted({k for f in flat.values() for k in f})
    differ = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat.values()}) > 1]
    out = {}
    for i in identities:
        n = int((df[IDENTITY_COLUMN] == i).sum())
        shown = ", ".join(f"{k.split('.', 1)[1]}={json.dumps(flat[i].get(k))}" for k in differ[:4])
        more = f", +{len(differ) - 4} more" if len(differ) > 4 else ""
        out[i] = f"{shown or 'same settings'}{more}; {n} run(s)"
    return out


def _labelled(df: pd.DataFrame, label: str) -> list[str]:
    """The identities whose runs were given ``label`` (``bench run --label``), sorted."""
    if "label" not in df or not label:
        return []
    return sorted(set(df.loc[df["label"] == label, IDENTITY_COLUMN].astype(str)))


def resolve(
    specs: Iterable[str], df: pd.DataFrame, *, known_agents: Iterable[str] = (), pool: bool = False
) -> Selection:
    """Map ``--agents`` entries to identities present in ``df``.

    An entry is an agent name (``pacevolve``: its one identity, or all of them with ``pool``), an
    identity (``pacevolve@3fa2c1``, any unique hash prefix), a run's ``--label`` (the identities
    whose runs carry it; an agent of that name wins), or any of these followed by ``=LABEL`` to
    name the unit in the output. A unit of one identity without ``=LABEL`` is named by
    :func:`~.labels.identity_labels` over the selected identities (``pacevolve[budget=20]``, or the
    run's ``--label``); a pooled unit by its agent name.

    Args:
        specs: The entries, in the order the output lists them.
        df: Leaderboard rows of the compared variants, with :data:`IDENTITY_COLUMN`.
        known_agents: Registered agent ids (for suggestions and to tell "unknown" from "no runs").
        pool: Let an agent name cover several identities (its runs pooled under one label).

    Returns:
        The selection.

    Raises:
        UnknownAgentError: If an entry matches nothing (the message suggests close names).
        AmbiguousAgentError: If an agent name covers several identities and ``pool`` is off, or
            a hash prefix matches several identities.
        ValueError: If two entries select the same identity or use the same label.
    """
    present = sorted(set(df[IDENTITY_COLUMN].astype(str))) if not df.empty else []
    agents_here = sorted({p.split("@", 1)[0] for p in present})
    owner: dict[str, str] = {}
    picked: list[tuple[str, str, list[str]]] = []  # (spec, =LABEL or "", identities)
    for spec in specs:
        ref, _, label = spec.partition("=")
        name, _, prefix = ref.partition("@")
        if name not in agents_here and (mine := _labelled(df, ref)):  # a run's --label names its identity
            if len(mine) > 1 and not pool:
                raise AmbiguousAgentError(
                    f"the label {ref!r} was given to {len(mine)} identities ({', '.join(mine)}): "
                    f"name one (e.g. --agents {mine[0]}) or pass --pool to pool them"
                )
            label = label or ref
        elif name not in agents_here:
            known = set(known_agents)
            if name in known:  # a real agent without runs: point at the ones that have runs
                close = difflib.get_close_matches(ref, agents_here, n=3, cutoff=0.0)
                what = "has no runs here"
            else:
                close = difflib.get_close_matches(ref, sorted(set(agents_here) | known), n=3, cutoff=0.6)
                what = "is not an agent"
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UnknownAgentError(
                f"{ref!r} {what}{hint} (agents with runs: {', '.join(agents_here) or 'none'})"
            )
        else:
            mine = [
                p for p in present if p.split("@", 1)[0] == name and p.split("@", 1)[1].startswith(prefix)
            ]
            if not mine:
                theirs = ", ".join(p for p in present if p.startswith(name + "@"))
                raise UnknownAgentError(f"no identity {ref!r}; {name} has: {theirs}")
            if len(mine) > 1 and (prefix or not pool):
                detail = "; ".join(f"{i} ({d})" for i, d in describe(df, mine).items())
                raise AmbiguousAgentError(
                    f"{ref!r} covers {len(mine)} identities (configuration, models or budget differ): "
                    f"{detail}. Name one (e.g. --agents {mine[0]}) or pass --pool to pool them"
                )
        for ident in mine:
            if ident in owner:
                raise ValueError(
                    f"{ident} is selected by both {owner[ident]!r} and {spec!r}: need distinct agents"
                )
            owner[ident] = spec
        picked.append((spec, label, mine))
    singles = {m[0] for _, label, m in picked if len(m) == 1 and not label}
    readable = record_labels(frame_records(df), singles) if singles else {}
    sel = Selection(units={})
    for _, label, mine in picked:
        label = label or (readable[mine[0]] if len(mine) == 1 else mine[0].split("@", 1)[0])
        if label in sel.units:
            raise ValueError(f"two --agents entries use the label {label!r}: need distinct agents")
        sel.units[label] = tuple(mine)
        if len(mine) > 1:
            sel.notes.append(f"{label}: pooling {len(mine)} identities ({', '.join(mine)}) (--pool)")
    return sel
