"""The import contract: no cycles, no upward arrows, and a sandbox inside that imports nothing trusted.

The graph is read from the source with ``ast`` (every ``import``, function-level and
``TYPE_CHECKING`` ones included), never by importing the code. Layers, top to bottom:
``evobench`` (the application: the CLI) > ``agents`` | ``environments`` > ``harness``. A module
may import its own package and the layers below it; ``agents`` and ``environments`` are
independent (an agent sees a task only through the harness, never a family's scorer or data
code). ``harness.inside`` and ``environments.<family>.inside`` run in the candidate's sandbox:
they import only the standard library, numpy/torch and inside packages. Each rule is also run
on a small planted tree to show that it fails.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("harness", "agents", "environments", "evobench")
# Top first: a package may import only its own and those of lower layers.
LAYERS: tuple[tuple[str, ...], ...] = (("evobench",), ("agents", "environments"), ("harness",))
# What sandbox-inside code may import beside the standard library and its own inside package.
INSIDE_ALLOWED = frozenset({"numpy", "torch", "triton"})


@dataclass(frozen=True)
class Edge:
    """One import: ``src`` (module) imports ``dst`` (module or package) at ``path:line``."""

    src: str
    dst: str
    path: str
    line: int


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules(root: Path, packages: Iterable[str] = ROOTS) -> dict[str, Path]:
    """Every ``.py`` module under ``root/<package>`` by dotted name (data folders included)."""
    mods: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" not in path.parts:
                mods[_module_name(root, path)] = path
    return mods


def _resolve(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


def imports_of(mods: dict[str, Path]) -> list[Edge]:
    """All imports of the given modules, external ones included (``dst`` as written, resolved).

    ``from pkg import name`` names the submodule ``pkg.name`` where one exists, else ``pkg``.
    """
    edges: list[Edge] = []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    edges.append(Edge(mod, alias.name, str(path), node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    edges.append(Edge(mod, sub if sub in mods else base, str(path), node.lineno))
    return edges


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The project module ``name`` refers to (its longest known prefix), or None if external."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in mods:
            return cand
    return None


def _package(mod: str) -> str:
    """The package a module belongs to for the package-level graph: ``harness.runner`` etc."""
    return ".".join(mod.split(".")[:2])


def _cycles(graph: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def module_cycles(mods: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a longer circle."""
    g: nx.DiGraph = nx.DiGraph()
    for e in edges:
        dst = _owner(e.dst, mods)
        if dst is not None and dst != e.src:
            g.add_edge(e.src, dst)
    return _cycles(g)


def package_cycles(mods: dict[str, Path], edges: list[Edge]) -> list[list[str]]:
    """Groups of packages (``harness.llm``, ``agents.learning``, ...) that import each other."""
    g: nx.DiGraph = nx.DiGraph()
    for e in edges:
        dst = _owner(e.dst, mods)
        if dst is not None and _package(dst) != _package(e.src):
            g.add_edge(_package(e.src), _package(dst))
    return _cycles(g)


def upward_imports(edges: list[Edge], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[Edge]:
    """Imports into a higher layer (``harness`` -> ``agents``) or a sibling layer package."""
    # A sibling is a package of the same layer: agents and environments know nothing of each other.
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    bad = []
    for e in edges:
        src, dst = e.src.split(".")[0], e.dst.split(".")[0]
        if src in rank and dst in rank and src != dst and rank[dst] <= rank[src]:
            bad.append(e)
    return bad


def _inside_root(mod: str) -> str | None:
    """The ``inside`` package a module belongs to (``harness.inside``, ``environments.x.inside``)."""
    parts = mod.split(".")
    if len(parts) >= 2 and parts[:2] == ["harness", "inside"]:
        return "harness.inside"
    if len(parts) >= 3 and parts[0] == "environments" and parts[2] == "inside":
        return ".".join(parts[:3])
    return None


def inside_violations(edges: list[Edge]) -> list[Edge]:
    """Imports by sandbox-inside code of anything but stdlib, numpy/torch and inside packages.

    ``harness.inside`` may import only itself; a family's inside package itself and ``harness.inside``.
    """
    bad = []
    for e in edges:
        own = _inside_root(e.src)
        if own is None:
            continue
        top = e.dst.split(".")[0]
        # A family's inside code may use the harness's inside package (the wire format).
        if any(e.dst == ok or e.dst.startswith(ok + ".") for ok in (own, "harness.inside")):
            continue
        if top in sys.stdlib_module_names or top in INSIDE_ALLOWED:
            continue
        if own == "environments.multi_evolve.inside" and top == "pandas":  # its candidates take DataFrames
            continue
        bad.append(e)
    return bad


def _fmt(edges: list[Edge]) -> str:
    return "\n".join(f"{e.path}:{e.line}: {e.src} -> {e.dst}" for e in edges)


# --- the real code -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project() -> tuple[dict[str, Path], list[Edge]]:
    mods = source_modules(REPO)
    return mods, imports_of(mods)


def test_graph_sees_the_project(project: tuple[dict[str, Path], list[Edge]]) -> None:
    mods, edges = project
    assert len(mods) > 200 and "harness.runner.runner" in mods and "evobench.cli.main" in mods
    assert any(e.src == "evobench.cli.main" and e.dst.startswith("harness.") for e in edges)


def test_no_package_cycles(project: tuple[dict[str, Path], list[Edge]]) -> None:
    assert package_cycles(*project) == []


def test_no_module_cycles(project: tuple[dict[str, Path], list[Edge]]) -> None:
    assert module_cycles(*project) == []


def test_no_upward_imports(project: tuple[dict[str, Path], list[Edge]]) -> None:
    bad = upward_imports(project[1])
    order = " > ".join(" | ".join(layer) for layer in LAYERS)
    assert not bad, f"imports climbing the layers {order} or across a layer:\n" + _fmt(bad)


def test_inside_imports_nothing_trusted(project: tuple[dict[str, Path], list[Edge]]) -> None:
    bad = inside_violations(project[1])
    assert not bad, "sandbox-inside code importing outside its package:\n" + _fmt(bad)


# --- each rule fails on a planted violation ----------------------------------------------------


def _plant(root: Path, files: dict[str, str]) -> tuple[dict[str, Path], list[Edge]]:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    mods = source_modules(root)
    return mods, imports_of(mods)


CLEAN = {
    "harness/__init__.py": "",
    "harness/budget.py": "import math\n",
    "harness/llm/__init__.py": "",
    "harness/llm/client.py": "from harness.budget import x\n",
    "harness/runner/__init__.py": "",
    "harness/runner/run.py": "from ..llm import client\nfrom harness.budget import x\n",
    "harness/inside/__init__.py": "",
    "harness/inside/shim.py": "import os\nimport numpy\nfrom . import wire\nfrom .wire import f\n",
    "harness/inside/wire.py": "import json\n",
    "environments/__init__.py": "",
    "environments/fam/__init__.py": "from harness.runner import run\n",
    "environments/fam/inside/__init__.py": "",
    "environments/fam/inside/driver.py": "import torch\nfrom .util import g\n"
    "from harness.inside import wire\n",
    "environments/fam/inside/util.py": "",
    "agents/__init__.py": "",
    "agents/a.py": "import harness.llm\nfrom harness.llm.client import c\n",
    "evobench/__init__.py": "",
    "evobench/cli/__init__.py": "",
    "evobench/cli/main.py": "from agents import a\nfrom harness.runner.run import r\n",
}


def test_planted_clean_tree_passes(tmp_path: Path) -> None:
    mods, edges = _plant(tmp_path, CLEAN)
    assert package_cycles(mods, edges) == [] and module_cycles(mods, edges) == []
    assert upward_imports(edges) == [] and inside_violations(edges) == []
    # Relative imports resolve: the runner's ``from ..llm import client`` is an edge to the module.
    run_py = str(tmp_path / "harness/runner/run.py")
    assert Edge("harness.runner.run", "harness.llm.client", run_py, 1) in edges


def test_planted_package_cycle_fails(tmp_path: Path) -> None:
    # A function-level import closes harness.llm -> harness.runner -> harness.llm.
    files = {**CLEAN, "harness/llm/other.py": "def f():\n    from harness.runner.run import r\n"}
    mods, edges = _plant(tmp_path, files)
    assert package_cycles(mods, edges) == [["harness.llm", "harness.runner"]]
    assert module_cycles(mods, edges) == []  # different modules: only the package level sees it


def test_planted_longer_package_circle_fails(tmp_path: Path) -> None:
    files = {
        **CLEAN,
        "harness/a/__init__.py": "from harness.b import x\n",
        "harness/b/__init__.py": "from harness.c import x\n",
        "harness/c/__init__.py": "import harness.a\n",
    }
    mods, edges = _plant(tmp_path, files)
    assert package_cycles(mods, edges) == [["harness.a", "harness.b", "harness.c"]]


def test_planted_module_cycle_fails(tmp_path: Path) -> None:
    files = {
        **CLEAN,
        "agents/learning/__init__.py": "",
        "agents/learning/agent.py": "from .state_loop import loop\n",
        "agents/learning/state_loop.py": "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .agent import Agent\n",
    }
    mods, edges = _plant(tmp_path, files)
    assert module_cycles(mods, edges) == [["agents.learning.agent", "agents.learning.state_loop"]]
    assert package_cycles(mods, edges) == []


@pytest.mark.parametrize(
    ("rel", "text", "dst"),
    [
        ("harness/runner/agents_use.py", "def f():\n    from agents.a import A\n", "agents.a"),
        ("harness/llm/env_use.py", "import environments.fam\n", "environments.fam"),
        ("harness/runner/cli_use.py", "from evobench.cli import main\n", "evobench.cli.main"),
        ("agents/b.py", "from evobench.cli.main import main\n", "evobench.cli.main"),
        ("environments/fam/scorer.py", "from agents import a\n", "agents.a"),
        ("agents/b.py", "def f():\n    import environments.fam\n", "environments.fam"),
    ],
)
def test_planted_upward_import_fails(tmp_path: Path, rel: str, text: str, dst: str) -> None:
    mods, edges = _plant(tmp_path, {**CLEAN, rel: text})
    bad = upward_imports(edges)
    assert [e.dst for e in bad] == [dst]


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        ("harness/inside/shim.py", "from harness.sandbox import worker\n"),
        ("harness/inside/shim.py", "def f():\n    import pydantic\n"),
        ("harness/inside/wire.py", "from ..runner import run\n"),
        ("environments/fam/inside/driver.py", "from environments.fam import scorer\n"),
        ("environments/fam/inside/driver.py", "from ... import fam\n"),
        ("environments/fam/inside/driver.py", "from harness.sandbox.inside_ish import wire\n"),
        ("harness/inside/wire.py", "from environments.fam.inside import util\n"),
    ],
)
def test_planted_inside_import_fails(tmp_path: Path, rel: str, text: str) -> None:
    mods, edges = _plant(tmp_path, {**CLEAN, rel: text})
    assert len(inside_violations(edges)) == 1
