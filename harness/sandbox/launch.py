"""How the trusted side starts a module of the inside packages (``harness/inside/``) as ``__main__``.

Inside code runs as a package (relative imports), started the way ``python -m`` would start it,
under ``-I`` (no environment variables, no user site, neither the working directory nor a script's
directory on ``sys.path``: a candidate's files cannot shadow a module) and ``-B`` (nothing written
next to the sources). ``-I`` leaves no way to name the package's root, so a one-line bootstrap
(:data:`BOOT`) puts the root given as its first argument on ``sys.path`` and runs the module with
``runpy.run_module`` (``sys.argv`` then holds the module's file and its own arguments, as with
``-m``). Under bubblewrap the root is :data:`INSIDE_ROOT_IN_SANDBOX`, where ``harness/inside`` alone
is bound (``harness`` is then a namespace package); elsewhere it is the project's root.
"""

from __future__ import annotations

from pathlib import Path

INSIDE_ROOT_IN_SANDBOX = "/opt/evobench-inside"
"""Where bubblewrap binds the project's ``harness/inside`` (as ``harness/inside`` below it)."""

BOOT = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)
"""``python -I -B -c BOOT ROOT MODULE ARGS...``: ``python -m MODULE ARGS...`` with ROOT on the path."""

SHIM_MODULE = "harness.inside.shim"
FILTER_MODULE = "harness.inside.syscall_filter"


def project_root() -> Path:
    """The directory holding the ``harness`` package on the trusted side."""
    return Path(__file__).resolve().parents[2]


def inside_dir() -> Path:
    """The ``harness/inside`` package on the trusted side (bound read-only into each sandbox)."""
    return project_root() / "harness" / "inside"


def module_argv(module: str, *args: str, python: str = "{python}", root: str = "{inside}") -> list[str]:
    """The command line that runs ``module`` as ``__main__`` with ``root`` on ``sys.path``.

    The defaults are placeholders that ``isolation.sandbox_command`` fills in (the interpreter, and
    the root as the sandbox sees it); a trusted caller passes real values.
    """
    return [python, "-I", "-B", "-c", BOOT, root, module, *args]


def fill(argv: list[str], python: str, root: str) -> list[str]:
    """``argv`` with the ``{python}`` and ``{inside}`` placeholders replaced."""
    return [a.replace("{python}", python).replace("{inside}", root) for a in argv]


def is_shim(argv: list[str]) -> bool:
    """Whether ``argv`` starts the shim (which installs the syscall filter itself)."""
    return argv[:7] == module_argv(SHIM_MODULE)
