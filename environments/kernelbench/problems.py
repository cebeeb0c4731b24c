"""KernelBench problem files: where a variant's file lies, its checked text, and the initial program.

The PACEvolve variants read their problem file from the family's data cache (fetched by
``bench data fetch kernelbench`` from the pinned KernelBench commit, one sha256 per file); the
CPU smoke variant reads its own file from ``tiny_problems/``. The initial program of a data
variant is the problem file itself with ``Model`` renamed ``ModelNew`` (PACEvolve's starting
kernel: the PyTorch reference, speedup 1).
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

from harness.envs.data import ChecksumError, DataMissingError, family_data_dir, sha256_file
from harness.envs.registry import Variant

PARAM = "problem_data"
"""Scorer parameter: the problem file's path inside the variant's (single) data source."""


def problem_path(variant: Variant, data_dir: Path | None = None) -> tuple[Path, str]:
    """The variant's problem file and its expected sha256 (empty for the family's own files).

    Args:
        variant: A kernelbench variant.
        data_dir: The family's data cache (default: :func:`family_data_dir`).

    Returns:
        ``(path, sha256)``.

    Raises:
        ValueError: The variant names no problem, or its ``problem_data`` is not a file of its
            data source (a manifest mistake).
    """
    params = variant.scorer_params
    if PARAM not in params:
        if "problem" not in params:
            raise ValueError(f"{variant.id}: scorer parameter 'problem' or '{PARAM}' is required")
        return variant.family_dir / str(params["problem"]), ""
    rel = str(params[PARAM])
    if len(variant.data) != 1:
        raise ValueError(f"{variant.id}: '{PARAM}' needs exactly one data source, not {len(variant.data)}")
    _, source = variant.data[0]
    if rel not in source.files:
        raise ValueError(f"{variant.id}: '{PARAM}' {rel!r} is not among the files of {source.filename}")
    root = data_dir if data_dir is not None else family_data_dir(variant.family)
    return root / source.filename / rel, source.files[rel]


def problem_source(variant: Variant, data_dir: Path | None = None) -> str:
    """The text of the variant's problem file, checked against its pinned sha256.

    Raises:
        DataMissingError: The file has not been fetched; names ``bench data fetch kernelbench``.
        ChecksumError: The cached file differs from its pinned sha256.
        ValueError: See :func:`problem_path`.
    """
    path, want = problem_path(variant, data_dir)
    if not path.is_file():
        if not want:
            raise FileNotFoundError(f"{variant.id}: problem file {path} is missing from the family")
        raise DataMissingError(
            f"{variant.id} needs the KernelBench problem file {path}, which is not there. Run "
            f"`bench data fetch {variant.family}` (needs network access) first, or "
            f"`bench data import {variant.family} DIR` from a local copy."
        )
    if want and (got := sha256_file(path)) != want:
        raise ChecksumError(
            f"{path}: sha256 {got} does not match the pinned {want}; delete it and run "
            f"`bench data fetch {variant.family}` again"
        )
    return path.read_text(encoding="utf-8")


def model_as_model_new(source: str) -> str:
    """Rename every ``Model`` identifier to ``ModelNew`` (class, ``super(Model, self)``, uses).

    Token-based, so strings, comments and layout are kept byte for byte; other names that merely
    contain ``Model`` are untouched.

    Raises:
        ValueError: The source does not tokenize, already defines ``ModelNew``, or has no ``Model``.
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as e:
        raise ValueError(f"problem file does not tokenize: {e}") from e
    names = [t for t in tokens if t.type == tokenize.NAME]
    if any(t.string == "ModelNew" for t in names):
        raise ValueError("problem file already uses the name ModelNew")
    hits = [t for t in names if t.string == "Model"]
    if not hits:
        raise ValueError("problem file defines no Model")
    lines = source.splitlines(keepends=True)
    for t in reversed(hits):  # right to left, so earlier columns stay valid
        row, col = t.start[0] - 1, t.start[1]
        lines[row] = lines[row][:col] + "ModelNew" + lines[row][col + len("Model") :]
    return "".join(lines)


_HEADER = '''"""KernelBench problem {rel}, its reference Model renamed ModelNew: make it faster.

Keep the constructor and forward signatures and create parameters in the same order (they are
initialised from the same seed as the reference). get_inputs/get_init_inputs here are for your
information: the scorer uses the pinned problem file's own.
"""

'''


def initial_program(variant: Variant) -> str | None:
    """Family hook (``initial_program_from``): the data variant's problem with Model as ModelNew.

    Args:
        variant: A kernelbench variant.

    Returns:
        The program text (whole problem file inside one EVOLVE block), or None for variants whose
        problem is the family's own file (they keep ``initial_program.py``).

    Raises:
        DataMissingError: The problem file has not been fetched (names ``bench data fetch kernelbench``).
        ChecksumError: The cached file differs from its pinned sha256.
    """
    if PARAM not in variant.scorer_params:
        return None
    body = model_as_model_new(problem_source(variant))
    header = _HEADER.format(rel=variant.scorer_params[PARAM])
    return f"{header}# EVOLVE-BLOCK-START\n{body.rstrip()}\n# EVOLVE-BLOCK-END\n"
