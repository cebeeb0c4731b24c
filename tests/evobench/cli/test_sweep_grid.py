"""``bench sweep``'s grid (expansion, seeds, TOML and flag errors), manifest and lanes; no run is started."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evobench.cli.sweep_grid import (
    GridError,
    agent_uses,
    build_spec,
    check_ids,
    expand,
    load_toml,
    parse_seeds,
)

if TYPE_CHECKING:
    from harness.sandbox.local import LocalBackend

from evobench.cli.sweep_manifest import (
    MANIFEST,
    CellRecord,
    Manifest,
    SweepDir,
    SweepError,
    remove_stillborn,
    stillborn,
)

ids = st.text("abcdefgh-", min_size=1, max_size=6).filter(lambda s: s.strip("-") == s)
configs = st.dictionaries(
    st.sampled_from(["islands", "budget", "temperature"]), st.integers(0, 3), max_size=2
)


@settings(max_examples=60, deadline=None)
@given(
    agents=st.lists(
        st.tuples(st.sampled_from(["a", "b", "llm"]), configs),
        min_size=1,
        max_size=4,
        unique_by=lambda t: json.dumps(t, sort_keys=True),
    ),
    envs=st.lists(ids, min_size=1, max_size=3, unique=True),
    seeds=st.lists(st.integers(0, 50), min_size=1, max_size=5, unique=True),
    model=st.none() | st.just("offline/pacevolve"),
)
def test_expansion_is_the_full_product_once_each_seed_major(
    agents: list[tuple[str, dict[str, int]]], envs: list[str], seeds: list[int], model: str | None
) -> None:
    def uses(agent: str, field: str) -> bool:  # only "llm" has models
        return agent == "llm"

    table = {"agents": [{"agent": a, "config": c} for a, c in agents], "envs": envs, "seeds": seeds}
    if model is not None and not any(a == "llm" for a, _ in agents):
        with pytest.raises(GridError, match="no agent of the grid has a model"):
            expand(build_spec(table, {"model": model}, "g.toml"), uses)
        return
    cells = expand(build_spec(table, {"model": model}, "g.toml"), uses)
    assert len(cells) == len(agents) * len(envs) * len(seeds)
    assert len({c.key for c in cells}) == len(cells)
    names = list(dict.fromkeys(c.name for c in cells))
    assert len(names) == len(agents)  # one name per entry, even for one agent with two configurations
    assert {(c.name, c.env, c.seed) for c in cells} == {(n, e, s) for n in names for e in envs for s in seeds}
    assert [c.seed for c in cells] == sorted([c.seed for c in cells], key=seeds.index)  # seed-major
    for c in cells:
        assert c.overrides.get("model") == (model if c.agent == "llm" else None)


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=20))
def test_seeds_text_lists_each_seed_once_in_order(seeds: list[int]) -> None:
    assert parse_seeds(",".join(map(str, seeds))) == tuple(dict.fromkeys(seeds))


def test_seed_ranges() -> None:
    assert parse_seeds("1-3") == (1, 2, 3)
    assert parse_seeds("0-2, 9, 2") == (0, 1, 2, 9)
    for bad in ("3-1", "x", "-1", "1-", "0-100000"):
        with pytest.raises(GridError):
            parse_seeds(bad)


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    with pytest.raises(GridError) as e:
        spec = build_spec(load_toml(path), {}, str(path))
        check_ids(spec, str(path))
        expand(spec, agent_uses)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path))
    return msg.removeprefix(f"{path}: ")


TOP = 'envs = ["selftest-tiny"]\nseeds = "1-2"\n'
AGENT = '[[agents]]\nagent = "random-search"\n'
GOOD = TOP + AGENT


def test_toml_errors_are_one_line_with_suggestions(tmp_path: Path) -> None:
    assert _error(tmp_path, TOP + "max_evaluation = 3\n" + AGENT) == (
        "unknown key max_evaluation; did you mean: max_evaluations, max_wall_s?"
    )
    assert _error(tmp_path, GOOD + '[[agents]]\nagent = "pacevolve"\nmodle = "x"\n') == (
        "unknown key agents[1].modle; did you mean: model?"
    )
    assert _error(tmp_path, GOOD.replace("random-search", "random-serch")) == (
        "agents[0].agent: unknown agent 'random-serch'; did you mean: random-search?"
    )
    assert _error(tmp_path, GOOD.replace("selftest-tiny", "selftest-tiyn")).startswith(
        "envs[0]: unknown environment 'selftest-tiyn'; did you mean: selftest-tiny"
    )
    assert _error(tmp_path, GOOD.replace('"1-2"', '"2-1"')) == (
        "seeds: '2-1' is not a seed >= 0 or an ascending range such as 1-3"
    )
    assert (
        _error(tmp_path, TOP + "max_evaluations = 0\n" + AGENT)
        == "max_evaluations: Input should be greater than or equal to 1"
    )
    assert _error(tmp_path, TOP + 'backend = "cloud"\n' + AGENT).startswith(
        "backend: Input should be 'local', 'docker' or 'modal'"
    )
    assert _error(tmp_path, GOOD + '[[agents]]\nagent = "random-search"\n') == (
        "agents[1] repeats agents[0] (same agent and configuration)"
    )
    pace = '[[agents]]\nagent = "pacevolve"\nconfig = {islandz = 2}\n'
    assert _error(tmp_path, GOOD + pace) == "unknown key agents[1].config.islandz; did you mean: islands?"
    assert _error(tmp_path, GOOD + pace.replace("islandz = 2", 'islands = "many"')).startswith(
        "agents[1].config.islands: Input should be a valid integer"
    )
    assert _error(tmp_path, TOP + AGENT + 'model = "m"\n').startswith(  # an entry's model is strict
        "unknown key agents[0].model; known keys: batch_size, "
    )
    assert "not valid TOML" in _error(tmp_path, TOP + "seeds = \n")
    assert _error(tmp_path, 'seeds = [1]\n[[agents]]\nagent = "random-search"\n').startswith("no variants")


def test_grid_model_for_no_agent_is_refused_in_one_line() -> None:
    spec = build_spec(
        {}, {"agents": "random-search", "envs": "selftest-tiny", "seeds": "1", "model": "m"}, "cli"
    )
    with pytest.raises(GridError, match=r"^--model: no agent of the grid has a model to set$"):
        expand(spec, agent_uses)


def test_flags_override_the_file_and_set_models_only_where_they_apply(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        TOP + "max_evaluations = 5\n" + AGENT + '[[agents]]\nagent = "pacevolve"\nconfig = {islands = 2}\n'
    )
    spec = build_spec(
        load_toml(path), {"max_evaluations": 2, "model": "offline/pacevolve", "seeds": "7"}, "g"
    )
    cells = expand(spec, agent_uses)
    assert spec.max_evaluations == 2 and [c.seed for c in cells] == [7, 7]
    assert [c.overrides for c in cells] == [{}, {"islands": 2, "model": "offline/pacevolve"}]


def _manifest(name: str = "sw") -> Manifest:
    spec = build_spec({}, {"agents": "random-search", "envs": "selftest-tiny", "seeds": "1-2"}, "cli")
    cells = [CellRecord(cell=c) for c in expand(spec, agent_uses)]
    return Manifest(sweep_id=name, spec=spec, results_dir="runs", leaderboard_dir="leaderboards", cells=cells)


def test_manifest_updates_are_on_disk_at_once_and_the_sweep_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "sw"
    with SweepDir.create(path, _manifest()) as sweep:
        key = sweep.manifest.cells[1].cell.key
        sweep.update(key, run_id="r1", state="running")
        on_disk = json.loads((path / MANIFEST).read_text())
        assert on_disk["cells"][1]["run_id"] == "r1" and on_disk["cells"][1]["state"] == "running"
        with pytest.raises(SweepError, match="is being run by pid"):
            SweepDir.open(path)
        with pytest.raises(SweepError, match="exists already; resume it with --resume"):
            SweepDir.create(path, _manifest())
    with SweepDir.open(path) as again:
        assert again.manifest == Manifest.model_validate_json((path / MANIFEST).read_bytes())
        assert again.results_dir == path / "runs"
    with pytest.raises(SweepError, match="not a sweep directory"):
        SweepDir.open(tmp_path)


def test_only_a_run_directory_killed_while_being_made_is_removed(tmp_path: Path) -> None:
    born = tmp_path / "r1"
    born.mkdir()
    (born / ".lock").write_text("pid 1\n")
    assert stillborn(born)
    remove_stillborn(born)
    assert not born.exists()
    started = tmp_path / "r2"
    started.mkdir()
    (started / "run.json").write_text("{}")
    remove_stillborn(started)
    assert started.exists() and not stillborn(started)


def test_the_agents_that_own_a_policy_run_alone() -> None:
    from agents.registry import AGENTS
    from evobench.cli.sweep_exec import runs_alone

    alone = sorted(name for name, cls in AGENTS.items() if runs_alone(cls))
    assert alone == ["maxk", "pacevolve++", "thetaevolve", "ttt-discover"]  # as docs/sweep.md lists them


def test_a_stopped_lane_fails_its_pending_evaluation_and_leaves_the_shared_backend_open(
    local_warm_backend: LocalBackend,
) -> None:
    from evobench.cli.sweep_exec import Lane, SweepStopped
    from harness.envs.registry import default_registry
    from harness.evaluation.result import Status

    v = default_registry().get("selftest-tiny")
    slow = "import time\n\n\ndef probe():\n    time.sleep(0.5)\n    return {'answer': 42.0}\n"
    stopping = threading.Event()
    lane = Lane(local_warm_backend, 1, stopping)
    pending = lane.submit(v, slow)
    stopping.set()  # what Ctrl-C or SIGTERM does to every run of the sweep
    lane.stop()
    with pytest.raises(SweepStopped):  # raised in the run's thread: the run records itself interrupted
        pending.result(timeout=5)
    with pytest.raises(SweepStopped):
        lane.submit(v, v.initial_program)
    lane.close()  # a run's end closes nothing: the sweep owns the backend
    assert Lane(local_warm_backend, 1, threading.Event()).evaluate(v, v.initial_program).status is Status.OK


def test_an_agent_entrys_label_reaches_every_run_of_it(tmp_path: Path) -> None:
    from evobench.cli.sweep_exec import cell_args, cell_command

    spec = build_spec(
        {}, {"agents": "random-search=RS,pacevolve", "envs": "selftest-tiny", "seeds": "1-2"}, "cli"
    )
    cells = expand(spec, agent_uses)
    assert [(c.agent, c.label) for c in cells] == [("random-search", "RS"), ("pacevolve", None)] * 2
    args = cell_args(cells[0], spec, tmp_path / "runs", tmp_path / "lb")
    cmd = cell_command(args)
    assert args.label == "RS" and cmd[cmd.index("--label") + 1] == "RS"
    assert "--label" not in cell_command(cell_args(cells[1], spec, tmp_path / "runs", tmp_path / "lb"))
    path = tmp_path / "g.toml"
    path.write_text(
        'envs = ["selftest-tiny"]\nseeds = [1]\n[[agents]]\nagent = "random-search"\nlabel = "base"\n'
    )
    assert [c.label for c in expand(build_spec(load_toml(path), {}, "g"), agent_uses)] == ["base"]
