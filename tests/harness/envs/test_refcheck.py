"""Code references of a manifest are checked when the registry loads (file and key named), and
family code that fails to import is an environment error, not a plain ImportError."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from harness.envs.manifest import ManifestError
from harness.envs.refcheck import EnvironmentImportError, top_level_names
from harness.envs.registry import Registry, environments_root

BANDIT = environments_root() / "selftest_bandit"


def _bandit_copy(tmp_path: Path) -> Path:
    root = tmp_path / "envs"
    shutil.copytree(BANDIT, root / "selftest_bandit", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("file", "old", "new", "key", "reason", "module"),
    [
        (
            "env.toml",
            '"scorer:BanditScorer"',
            '"scorers:Bandit"',
            "family.scorer",
            "does not exist",
            "scorers.py",
        ),
        ("env.toml", '"scorer:BanditScorer"', '"scorer:Bandit"', "family.scorer", "defines no", "scorer.py"),
        (
            "env.toml",
            '"scorer:BanditScorer"',
            '"BanditScorer"',
            "family.scorer",
            "not 'module:attribute'",
            "",
        ),
        (
            "env.toml",
            '"mutations:operators"',
            '"mutations:ops"',
            "family.mutations",
            "no 'ops'",
            "mutations.py",
        ),
        (
            "scorer.py",
            "class BanditScorer(Scorer):",
            "class BanditScorer(Scorer)",
            "family.scorer",
            "line",
            "scorer.py",
        ),
    ],
)
def test_a_broken_reference_is_a_manifest_error_naming_file_and_key(
    tmp_path: Path, file: str, old: str, new: str, key: str, reason: str, module: str
) -> None:
    root = _bandit_copy(tmp_path)
    family = root / "selftest_bandit"
    _edit(family / file, old, new)
    with pytest.raises(ManifestError) as e:
        Registry(root, strict=True)
    msg = str(e.value)
    assert str(family / "env.toml") in msg and key in msg and reason in msg, msg
    if module:
        assert str(family / module) in msg, msg
    # non-strict (what ``bench envs`` loads): only this family is broken, with the same message
    lenient = Registry(root, strict=False)
    assert lenient.ids() == [] and str(lenient.errors["selftest_bandit"]) == msg


def test_the_built_in_families_pass_the_reference_checks() -> None:
    assert Registry(strict=True).errors == {}


def test_top_level_names_sees_guarded_definitions_and_gives_up_on_star_imports() -> None:
    src = "import a.b as c\nif X:\n    def f(): ...\nelse:\n    g = 1\n"
    src += "try:\n    import h\nexcept E:\n    h = 0\nfor i, j in []:\n    k = 1\n"
    assert top_level_names(ast.parse(src)) == {"c", "f", "g", "h", "i", "j", "k"}
    assert top_level_names(ast.parse("from m import *\n")) is None
    assert top_level_names(ast.parse("def __getattr__(n): ...\n")) is None


def test_family_code_that_fails_at_import_is_an_environment_import_error(tmp_path: Path) -> None:
    root = _bandit_copy(tmp_path)
    scorer = root / "selftest_bandit" / "scorer.py"
    _edit(
        scorer,
        "from __future__ import annotations\n",
        "from __future__ import annotations\nimport no_such_module_evobench\n",
    )
    variant = Registry(root, strict=True).get("selftest-bandit")  # parses: the import is not run
    with pytest.raises(EnvironmentImportError) as e:
        variant.load_attr(variant.scorer_ref)
    msg = str(e.value)
    assert msg.startswith("environment error: family selftest_bandit") and str(scorer) in msg
    assert "no_such_module_evobench" in msg
