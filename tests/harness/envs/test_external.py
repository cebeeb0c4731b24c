"""Families outside the repository: ``EVOBENCH_ENV_PATH`` and entry points, collisions refused with
both manifests named, and their directories masked in the sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.external import PATH_VAR, path_roots
from harness.envs.manifest import ManifestError
from harness.envs.registry import Registry, UnknownIdError, default_registry, environments_root
from harness.envs.skeleton import write_skeleton
from harness.sandbox.isolation import hidden_paths


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    default_registry.cache_clear()
    yield
    default_registry.cache_clear()


def test_path_roots_split_resolve_and_drop_repeats(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert path_roots(f"{a}{os.pathsep}{os.pathsep}{b}{os.pathsep}{a}/") == [a, b]
    assert path_roots("") == []


def test_a_family_on_the_path_is_listed_after_the_built_in_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    write_skeleton("outside_fam", tmp_path / "envs")
    # the built-in root named again is not loaded twice
    monkeypatch.setenv(PATH_VAR, f"{tmp_path / 'envs'}{os.pathsep}{environments_root()}")
    reg = default_registry()
    assert reg.errors == {}
    assert reg.roots == (environments_root(), (tmp_path / "envs").resolve())
    v = reg.get("outside-fam-tiny")
    assert v.family_dir == tmp_path / "envs" / "outside_fam" and v.tiny
    assert reg.get("eplb-tiny").family == "eplb"
    # its scorer is imported by path under a private package, not as environments.<family>
    scorer = v.load_attr(v.scorer_ref)
    assert scorer.__module__.endswith(".outside_fam.scorer") and not scorer.__module__.startswith(
        "environments"
    )
    # a candidate never sees it: the root is masked like the built-in one
    assert (tmp_path / "envs").resolve() in hidden_paths()


def test_an_unknown_id_names_a_root_that_does_not_exist(tmp_path: Path) -> None:
    reg = Registry(extra_roots=[tmp_path / "typo"])
    with pytest.raises(UnknownIdError, match=f"no such environments directory: {tmp_path / 'typo'}"):
        reg.get("knapsack-tiny")
    assert reg.get("eplb-tiny").family == "eplb"


def test_a_family_that_redefines_a_built_in_one_is_refused_naming_both_manifests(tmp_path: Path) -> None:
    root = tmp_path / "envs"
    shutil.copytree(environments_root() / "selftest", root / "selftest")
    lenient = Registry(strict=False, extra_roots=[root])
    msg = str(lenient.errors["selftest"])
    assert str(root / "selftest" / "env.toml") in msg
    assert str(environments_root() / "selftest" / "env.toml") in msg and "already defined" in msg
    assert lenient.get("selftest-tiny").family_dir == environments_root() / "selftest"  # built-in kept
    with pytest.raises(ManifestError, match="already defined"):
        Registry(strict=True, extra_roots=[root])


def test_a_variant_id_taken_by_another_family_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "envs"
    write_skeleton("eplbx", root)
    toml = root / "eplbx" / "env.toml"
    toml.write_text(
        toml.read_text()
        .replace('id_prefix = "eplbx"', 'id_prefix = "eplb"')
        .replace("eplbx-tiny", "eplb-tiny")
    )
    reg = Registry(strict=False, extra_roots=[root])
    assert "'eplb'" in str(reg.errors["eplbx"]) and str(environments_root() / "eplb" / "env.toml") in str(
        reg.errors["eplbx"]
    )


def test_entry_points_name_a_root_or_a_family_folder(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write_skeleton("ep_many", site / "evobench_ep_demo")
    (site / "evobench_ep_demo" / "__init__.py").write_text("")
    write_skeleton("ep_single", site)  # a top-level package that is itself a family folder
    dist = site / "evobench_ep_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evobench-ep-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[evobench.environments]\nmany = evobench_ep_demo\nsingle = ep_single\nbroken = no_such_pkg_x\n"
    )
    probe = (
        "import json; from harness.envs.registry import default_registry as d; r = d();"
        "print(json.dumps([r.get(i).family_dir.as_posix() for i in ('ep-many-tiny', 'ep-single-tiny')]"
        " + [len(r.errors)]))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop(PATH_VAR, None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    many, single, errors = json.loads(out.stdout.splitlines()[-1])
    assert many == (site / "evobench_ep_demo" / "ep_many").as_posix()
    assert single == (site / "ep_single").as_posix()
    assert errors == 0
    assert "no_such_pkg_x" in out.stderr  # the broken entry point is named, the others still load
