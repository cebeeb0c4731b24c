"""Static checks of a manifest's code references, run when the registry loads a family.

``family.scorer``, ``family.mutations`` and ``family.initial_program_from`` name ``module:attr``
inside the family package; ``family.sandbox_driver`` names a Python file. A reference whose module
file is missing, does not parse, or defines no such attribute is a :class:`ManifestError` naming
the file and the key, reported by ``bench envs`` instead of failing at the first evaluation.

Nothing is imported or executed here: the module is parsed (``ast``), so listing environments
stays cheap and never runs family code. What parsing cannot see (an import error inside the
module) is caught when the trusted worker imports it (:class:`EnvironmentImportError`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from .manifest import EnvManifest, ManifestError

REFERENCE_KEYS = ("scorer", "mutations", "initial_program_from")
"""``[family]`` keys holding ``module:attr`` references."""


class EnvironmentImportError(ImportError):
    """A family's own code (scorer, mutations, initial-program hook) failed to import.

    Deterministic: the same code fails the same way on every attempt, so it is an environment
    error, never the candidate's fault and never retried as an infrastructure failure.
    """


def module_file(family_dir: Path, module: str) -> Path | None:
    """The file of ``module`` (dotted, relative to the family package), or None if there is none."""
    base = family_dir.joinpath(*module.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _bind_names(target: ast.expr, out: set[str]) -> None:
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, ast.Tuple | ast.List):
        for elt in target.elts:
            _bind_names(elt, out)


def top_level_names(tree: ast.Module) -> set[str] | None:
    """Names a module binds at its top level (also inside top-level ``if`` / ``try`` / ``with`` / loops).

    Returns:
        The names, or None when they cannot be known statically (``from x import *`` or a
        module-level ``__getattr__``).
    """
    names: set[str] = set()
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                _bind_names(t, names)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            _bind_names(node.target, names)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.For | ast.AsyncFor):
            _bind_names(node.target, names)
            stack.extend([*node.body, *node.orelse])
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.While):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    stack.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return None if "__getattr__" in names else names


def _parse(path: Path, where: str) -> ast.Module:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as e:
        raise ManifestError(f"{where}: {path} line {e.lineno}: {e.msg}") from e


def check_reference(manifest_path: Path, key: str, ref: str) -> None:
    """Check one ``module:attr`` reference of ``[family]`` without importing it.

    Raises:
        ManifestError: The reference is malformed, its module file is missing or does not parse,
            or the module defines no such attribute; the message names the manifest, the key and
            the module file.
    """
    where = f"{manifest_path}: key 'family.{key}'"
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise ManifestError(f"{where}: {ref!r} is not 'module:attribute'")
    path = module_file(manifest_path.parent, module)
    if path is None:
        rel = module.replace(".", "/") + ".py"
        raise ManifestError(f"{where}: {ref!r}: module file {manifest_path.parent / rel} does not exist")
    names = top_level_names(_parse(path, where))
    if names is not None and attr not in names:
        raise ManifestError(f"{where}: {ref!r}: {path} defines no {attr!r}")


def check_references(manifest: EnvManifest, manifest_path: Path) -> None:
    """Check every code reference of a manifest (module references and the sandbox driver's syntax).

    Raises:
        ManifestError: On the first broken reference (see :func:`check_reference`).
    """
    fam = manifest.family
    for key in REFERENCE_KEYS:
        ref = getattr(fam, key)
        if ref:
            check_reference(manifest_path, key, ref)
    if fam.sandbox_driver:
        _parse(manifest_path.parent / fam.sandbox_driver, f"{manifest_path}: key 'family.sandbox_driver'")
