"""``bench sweep``'s grid: agents (with their configurations) x variants x seeds, from TOML or flags.

A grid is a :class:`SweepSpec` (the TOML file's keys, documented in ``docs/sweep.md``, each
overridable by a command-line flag). :func:`expand` turns it into :class:`Cell` s, one per run.
Nothing here imports the harness's heavy parts; ids are checked against the registries by
:func:`check_ids`, and every error is one line for the user (:class:`GridError`).
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.sandbox.names import BackendName, Mode

MAX_SEEDS = 10_000
"""Most seeds one grid may name (a typo such as ``1-100000`` is refused, not run)."""
MODEL_FIELDS = ("model", "advisor_model", "implementer_model")
"""Agent configuration fields that name LLMs (grid-level values apply to the agents that have them)."""


class GridError(ValueError):
    """The grid cannot be run as given; the message is one line for the user."""


class AgentSpec(BaseModel):
    """One ``[[agents]]`` entry: an agent and its configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    """Agent id (``bench agents``)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Configuration overrides, as ``bench run --agent-config``."""
    model: str | None = None
    """LLM for every role (this agent only; it must have the field)."""
    advisor_model: str | None = None
    """The advisor model (this agent only)."""
    implementer_model: str | None = None
    """The implementer model (this agent only)."""
    label: str | None = None
    """A name for this entry's identity in tables, plots and reports (``bench run --label``; on
    the command line ``--agents AGENT=LABEL``)."""

    def overrides(self) -> dict[str, Any]:
        """The configuration overrides with this entry's own models set."""
        return {**self.config, **{f: getattr(self, f) for f in MODEL_FIELDS if getattr(self, f) is not None}}


class SweepSpec(BaseModel):
    """A grid as the TOML file gives it (top-level keys and ``[[agents]]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agents: tuple[AgentSpec, ...] = Field(min_length=1)
    """The agents with their configurations; one agent may appear with several."""
    envs: tuple[str, ...] = Field(min_length=1)
    """Variant ids."""
    seeds: tuple[int, ...] = Field(min_length=1)
    """Master seeds (in TOML a list or a string such as ``"1-3,7"``)."""
    max_evaluations: int = Field(default=50, ge=1)
    """Evaluation budget of every run (includes the initial program)."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Wall-clock budget of every run, seconds."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    """LLM cost budget of every run, US dollars."""
    model: str | None = None
    """LLM for the agents that use one (agents without a ``model`` field are left as they are)."""
    advisor_model: str | None = None
    """Advisor model for the agents that have one."""
    implementer_model: str | None = None
    """Implementer model for the agents that have one."""
    workers: int = Field(default=0, ge=0)
    """Parallel evaluations of each run (0: as ``bench run``)."""
    mode: Mode = "warm"
    """Sandbox mode of every run."""
    backend: BackendName = "local"
    """Where the grid's evaluations run."""
    concurrency: int = Field(default=0, ge=0)
    """Evaluations in flight over the whole grid (0: one per core locally, or per GPU slot)."""

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> Any:
        return parse_seeds(v) if isinstance(v, str) else v


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"1-3,7"`` -> ``(1, 2, 3, 7)``: comma-separated seeds and inclusive ranges, in order, once each.

    Raises:
        GridError: If a part is not a non-negative seed or an ascending range, or there are too many.
    """
    out: dict[int, None] = {}
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise GridError(f"{part!r} is not a seed or a range such as 1-3") from None
        if a < 0 or b < a:
            raise GridError(f"{part!r} is not a seed >= 0 or an ascending range such as 1-3")
        if b - a >= MAX_SEEDS or len(out) + b - a >= MAX_SEEDS:
            raise GridError(f"{text!r} names more than {MAX_SEEDS} seeds")
        out.update(dict.fromkeys(range(a, b + 1)))
    return tuple(out)


def _keys_hint(loc: Sequence[Any], key: str, known: Sequence[str] = ()) -> str:
    model: type[BaseModel] = AgentSpec if "agents" in [str(x) for x in loc] else SweepSpec
    known = list(known or model.model_fields)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    return f"did you mean: {', '.join(close)}?" if close else f"known keys: {', '.join(known)}"


def _where(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def one_line(e: ValidationError, source: str, at: Sequence[Any] = (), known: Sequence[str] = ()) -> str:
    """The first problem of a validation as ``SOURCE: where: what`` (with key suggestions).

    ``at``: where the validated object sits in the grid; ``known``: its keys (default: the grid's).
    """
    err = e.errors()[0]
    loc = (*at, *err["loc"])
    more = f" (and {len(e.errors()) - 1} more)" if len(e.errors()) > 1 else ""
    if err["type"] == "extra_forbidden":
        hint = _keys_hint(loc[:-1], str(loc[-1]), known)
        return f"{source}: unknown key {_where(loc)}; {hint}{more}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{source}: {_where(loc)}: {msg}{more}"


def load_toml(path: Path) -> dict[str, Any]:
    """A grid file's table.

    Raises:
        GridError: If it cannot be read or is not TOML (the line and column are named).
    """
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise GridError(f"{path}: cannot read it: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise GridError(f"{path}: not valid TOML: {e}") from None


def _flag_entry(text: str) -> dict[str, str]:
    """One ``--agents`` item: ``AGENT`` or ``AGENT=LABEL``."""
    agent, eq, label = text.partition("=")
    return {"agent": agent.strip(), "label": label.strip()} if eq else {"agent": agent.strip()}


def build_spec(table: dict[str, Any], overrides: dict[str, Any], source: str) -> SweepSpec:
    """A grid from a TOML table and command-line values (given flags win; None means not given).

    ``overrides`` may give ``agents`` and ``envs`` as comma-separated text, ``seeds`` as text,
    ``agent_config`` as a JSON object applied to every agent, and any :class:`SweepSpec` field.

    Raises:
        GridError: If the result is not a valid grid (one line naming the key and the problem).
    """
    data = dict(table)
    given = {k: v for k, v in overrides.items() if v is not None}
    config = given.pop("agent_config", None)
    if "agents" in given:
        data["agents"] = [_flag_entry(a.strip()) for a in str(given.pop("agents")).split(",") if a.strip()]
    if "envs" in given:
        data["envs"] = [e.strip() for e in str(given.pop("envs")).split(",") if e.strip()]
    data.update(given)
    if config is not None:
        try:
            extra = json.loads(config)
        except ValueError as e:
            raise GridError(f"--agent-config: not JSON: {e}") from None
        if not isinstance(extra, dict):
            raise GridError("--agent-config: not a JSON object")
        agents = data.get("agents")
        if isinstance(agents, list):
            data["agents"] = [
                {**a, "config": {**a.get("config", {}), **extra}} if isinstance(a, dict) else a
                for a in agents
            ]
    if not data.get("agents"):
        raise GridError(f"{source}: no agents: give --agents a,b or [[agents]] entries")
    if not data.get("envs"):
        raise GridError(f"{source}: no variants: give --envs x,y or envs = [...]")
    if data.get("seeds") in (None, "", []):
        raise GridError(f"{source}: no seeds: give --seeds 1-3 or seeds = [1, 2, 3]")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        raise GridError(one_line(e, source)) from None
    seen: dict[str, int] = {}
    for i, a in enumerate(spec.agents):
        key = json.dumps([a.agent, a.overrides()], sort_keys=True)
        if key in seen:
            raise GridError(
                f"{source}: agents[{i}] repeats agents[{seen[key]}] (same agent and configuration)"
            )
        seen[key] = i
    return spec


class Cell(BaseModel):
    """One run of the grid: an agent configuration on a variant with a seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    """Unique name in the grid: ``<variant>/<agent name>/s<seed>``."""
    name: str
    """The agent entry's name: its id, or ``<id>-<n>`` when the id appears more than once."""
    agent: str
    """Agent id."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Configuration overrides, models included (``bench run --agent-config``)."""
    env: str
    """Variant id."""
    seed: int
    """Master seed."""
    label: str | None = None
    """The agent entry's ``label`` (``bench run --label``), or None."""


def agent_names(agents: Sequence[AgentSpec]) -> list[str]:
    """Each entry's name: its id, or ``<id>-<n>`` (n from 1, in order) when the id appears more than once."""
    count: dict[str, int] = {}
    for a in agents:
        count[a.agent] = count.get(a.agent, 0) + 1
    seen: dict[str, int] = {}
    names = []
    for a in agents:
        seen[a.agent] = seen.get(a.agent, 0) + 1
        names.append(a.agent if count[a.agent] == 1 else f"{a.agent}-{seen[a.agent]}")
    return names


def expand(spec: SweepSpec, uses: Callable[[str, str], bool]) -> list[Cell]:
    """Every cell of the grid, seed-major (each agent and variant gets its first seed first).

    ``uses(agent, field)``: whether the agent's configuration has that field; grid-level models
    are set only on the agents that do.

    Raises:
        GridError: If a grid-level model applies to no agent of the grid.
    """
    for f in MODEL_FIELDS:
        if getattr(spec, f) is not None and not any(uses(a.agent, f) for a in spec.agents):
            raise GridError(f"--{f.replace('_', '-')}: no agent of the grid has a {f} to set")
    entries = []
    for a, name in zip(spec.agents, agent_names(spec.agents), strict=True):
        grid_models = {
            f: getattr(spec, f) for f in MODEL_FIELDS if getattr(spec, f) is not None and uses(a.agent, f)
        }
        entries.append((name, a.agent, {**grid_models, **a.overrides()}, a.label))
    return [
        Cell(
            key=f"{env}/{name}/s{seed}", name=name, agent=agent, overrides=ov, env=env, seed=seed, label=label
        )
        for seed in spec.seeds
        for env in spec.envs
        for name, agent, ov, label in entries
    ]


def agent_uses(agent: str, field: str) -> bool:
    """Whether the registered agent's configuration has ``field`` (unknown agents: False).

    Imports the agents' registry.
    """
    from agents.registry import AGENTS

    cls = AGENTS.get(agent)
    return cls is not None and field in cls.Config.model_fields


def check_ids(spec: SweepSpec, source: str) -> None:
    """Every agent and variant id of the grid is known, and every agent entry's configuration valid.

    Raises:
        GridError: At the first unknown id (``sweep.toml: agents[1].agent: unknown agent ...``,
            with ``bench run``'s suggestions) or invalid configuration (``agents[0].config.islandz``).
    """
    from agents.registry import get_agent_class
    from harness.envs.registry import UnknownIdError, default_registry

    reg = default_registry()
    where = ""
    try:
        for i, a in enumerate(spec.agents):
            where = f"agents[{i}].agent"
            get_agent_class(a.agent)
        for i, env in enumerate(spec.envs):
            where = f"envs[{i}]"
            reg.get(env)
    except UnknownIdError as e:
        raise GridError(f"{source}: {where}: {e}") from None
    for i, a in enumerate(spec.agents):
        cls = get_agent_class(a.agent)
        try:
            cls.Config.model_validate(a.overrides())
        except ValidationError as e:
            at = (
                ("agents", i)
                if e.errors()[0]["loc"] and e.errors()[0]["loc"][0] in MODEL_FIELDS
                else ("agents", i, "config")
            )
            raise GridError(one_line(e, source, at, list(cls.Config.model_fields))) from None
