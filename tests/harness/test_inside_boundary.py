"""Lint rule: code that runs inside the sandbox imports nothing from the trusted side.

Scope: every module under ``harness/inside/`` and ``environments/<family>/inside/``. Allowed imports:

* the standard library (``sys.stdlib_module_names``), numpy and torch;
* relative imports that stay inside the module's own inside package (``from . import wire``; a
  relative import climbing above the package, ``from .. import x``, is a violation);
* for a family's inside package only, ``harness.inside`` (the one absolute project import it may
  use, e.g. the wire format) and the extra third-party modules its candidates' contract names
  (:data:`FAMILY_EXTRA`: Multi-Evolve's driver builds the pandas DataFrames its candidates take).

Imports anywhere in a module count, including those inside functions. Family inside modules are
shipped into the sandbox as source text and run there on their own, so in practice they use only
the first kind; the rule allows ``harness.inside`` so that sharing the wire format stays possible.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALLOWED = frozenset(sys.stdlib_module_names) | {"numpy", "torch"}
FAMILY_EXTRA = {"multi_evolve": frozenset({"pandas"})}
"""Third-party modules a family's inside package may import beyond :data:`ALLOWED` (its contract)."""


@dataclass(frozen=True)
class Violation:
    """One import an inside module may not make."""

    path: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.name}"


def inside_packages(repo: Path) -> list[Path]:
    """``harness/inside`` and each ``environments/<family>/inside`` directory of ``repo``."""
    found = [repo / "harness" / "inside", *sorted((repo / "environments").glob("*/inside"))]
    return [p for p in found if p.is_dir()]


def violations(package: Path, repo: Path) -> list[Violation]:
    """Imports of the modules under ``package`` that break the rule (see the module docstring).

    Raises:
        SyntaxError: A module does not parse.
    """
    rel_pkg = package.relative_to(repo).parts
    family = rel_pkg[1] if rel_pkg[0] == "environments" else None
    allowed = ALLOWED | FAMILY_EXTRA.get(family or "", frozenset())
    out = []
    for path in sorted(package.rglob("*.py")):
        # Depth of this module below the package root: ``from .`` .. ``from .{depth+1}`` stay inside.
        depth = len(path.relative_to(package).parts) - 1
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names if not _ok(a.name, allowed, family)]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    if node.level > depth + 1:
                        names = ["." * node.level + (node.module or "")]
                elif not _ok(node.module or "", allowed, family):
                    names = [node.module or ""]
            out += [Violation(str(path.relative_to(repo)), node.lineno, n) for n in names]
    return out


def _ok(name: str, allowed: frozenset[str], family: str | None) -> bool:
    if name.partition(".")[0] in allowed:
        return True
    return family is not None and (name == "harness.inside" or name.startswith("harness.inside."))


def test_inside_packages_import_only_the_allowed() -> None:
    packages = inside_packages(REPO)
    names = {str(p.relative_to(REPO)) for p in packages}
    assert {"harness/inside", "environments/kuairec/inside", "environments/mla_decode/inside"} <= names
    bad = [v for p in packages for v in violations(p, REPO)]
    assert not bad, "sandbox-inside code importing the trusted side:\n" + "\n".join(map(str, bad))


def test_every_inside_module_is_found() -> None:
    """The walk sees the modules that run in the sandbox (so an empty scan cannot pass)."""
    mods = {str(p.relative_to(REPO)) for pkg in inside_packages(REPO) for p in pkg.rglob("*.py")}
    for m in ("shim", "serve", "zygote", "scrub", "wire", "syscall_filter", "kernel_driver", "kernel_wire"):
        assert f"harness/inside/{m}.py" in mods
    for fam in ("kuairec", "llm_sr", "multi_evolve"):
        assert f"environments/{fam}/inside/driver.py" in mods


@pytest.mark.parametrize(
    ("where", "source", "name"),
    [
        ("harness/inside/bad.py", "from harness.sandbox import worker\n", "harness.sandbox"),
        ("harness/inside/bad.py", "def f():\n    import pydantic\n", "pydantic"),
        ("harness/inside/bad.py", "from .. import scoring\n", ".."),
        ("harness/inside/bad.py", "import harness.inside.wire\n", "harness.inside.wire"),
        ("harness/inside/sub/bad.py", "from ... import runner\n", "..."),
        ("harness/inside/bad.py", "import pandas\n", "pandas"),
        ("environments/fam/inside/bad.py", "from environments.fam import scorer\n", "environments.fam"),
        ("environments/fam/inside/bad.py", "from .. import scorer\n", ".."),
        ("environments/fam/inside/bad.py", "import pandas\n", "pandas"),
    ],
)
def test_a_planted_bad_import_fails(tmp_path: Path, where: str, source: str, name: str) -> None:
    good = {
        "harness/inside/__init__.py": "",
        "harness/inside/wire.py": "import json\nimport numpy as np\nfrom . import shim\n",
        "harness/inside/sub/__init__.py": "from .. import wire\nfrom ..wire import x\n",
        "environments/fam/inside/__init__.py": "",
        "environments/fam/inside/driver.py": "import torch\nfrom . import u\nfrom harness.inside import w\n",
    }
    for rel, text in {**good, where: source}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    bad = [v for p in inside_packages(tmp_path) for v in violations(p, tmp_path)]
    assert [(v.path, v.name) for v in bad] == [(where, name)]


def test_the_clean_planted_tree_passes(tmp_path: Path) -> None:
    (tmp_path / "harness/inside").mkdir(parents=True)
    (tmp_path / "harness/inside/shim.py").write_text("import os\nfrom . import wire\nfrom .wire import f\n")
    (tmp_path / "environments/multi_evolve/inside").mkdir(parents=True)
    (tmp_path / "environments/multi_evolve/inside/driver.py").write_text(
        "import numpy as np\nimport pandas as pd\n"
    )
    assert [v for p in inside_packages(tmp_path) for v in violations(p, tmp_path)] == []
