"""The canonical form of an LLM-SR program, and a cap on the information it can carry.

LLM-SR's data is public, so a program can carry the targets it is scored on, in any encoding:
digits, a string, whitespace on blank lines or comments read back through ``__file__``,
identifiers, string lengths, numbers of statements. Counting one kind of literal cannot stop that;
two encoding-independent measures do:

* **Formatting never reaches the scored process.** The trusted side parses the program with
  :mod:`ast`, drops docstrings, and unparses it: comments, whitespace, quoting and layout are gone.
  The fresh prediction process (whose output is scored) receives only this text, so a table held
  in the formatting is not there to read, by ``__file__``, frames, ``gc`` or raw memory. The
  fitting process loads it too: the harness sends the sandbox ``LlmSrScorer.sandbox_source``,
  never the submitted text (a runtime built without it, in tools or tests, still has the fresh
  process and rule ``deterministic`` behind it).
* **Rule ``size``: the canonical text is small.** At most ``max_canonical_chars`` characters and
  at most ``max_compressed_bytes`` bytes once compressed (LZMA2 preset 9e, raw stream). The
  compressed cap bounds the information in the program whatever the encoding: distinct programs
  under the cap number at most 2^(8 * cap + 8), so the program carries at most 8 * cap + 8 bits
  (a fixed decompressor maps each compressed stream to one program). The submitted text is
  capped too (``max_source_chars``), before parsing, to bound the trusted side's work.

Not a rule: a program whose behaviour depends on its formatting (it reads its own file) behaves
differently in the fresh process; that is rule ``deterministic`` or a crash, the candidate's.
"""

from __future__ import annotations

import ast
import lzma

from harness.evaluation.errors import CandidateError, CandidateInvalid

# A 64 KiB dictionary covers any text under the character cap; preset 9's 64 MiB would make every
# call allocate ~0.7 GB for nothing.
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 1 << 16}]


def compressed_size(text: str) -> int:
    """Bytes of the raw LZMA2 stream (preset 9e, 64 KiB dictionary, no header) of ``text`` in UTF-8."""
    return len(lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS))


class _DropDocstrings(ast.NodeTransformer):
    """Remove module, class and function docstrings (``pass`` where a body would be empty)."""

    def _strip(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr):
            first = body[0].value
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                del body[0]
                if not body:
                    body.append(ast.Pass())
        return node

    visit_Module = _strip  # noqa: N815 - ast.NodeTransformer's naming
    visit_ClassDef = _strip  # noqa: N815
    visit_FunctionDef = _strip  # noqa: N815
    visit_AsyncFunctionDef = _strip  # noqa: N815


def canonicalise(source: str, max_source_chars: int) -> str:
    """Parse ``source`` and return its canonical form (see the module docstring).

    Args:
        source: The submitted program text.
        max_source_chars: Longest submitted text that is parsed at all.

    Returns:
        ``ast.unparse`` of the program without docstrings, plus a final newline (not yet checked
        against the caps: :func:`check_size`).

    Raises:
        CandidateInvalid: Rule ``size``: the text is longer than ``max_source_chars``, or its tree
            is too deep to unparse.
        CandidateError: The program does not parse (it would not load either).
    """
    if len(source) > max_source_chars:
        raise CandidateInvalid(
            f"rule 'size': the program has {len(source)} characters (limit {max_source_chars}); an "
            "equation skeleton is a few kB"
        )
    try:
        tree = ast.parse(source, filename="candidate.py")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise CandidateError(f"the program does not parse: {type(e).__name__}: {str(e)[:300]}") from None
    try:
        text = ast.unparse(_DropDocstrings().visit(tree)) + "\n"
        ast.parse(text)  # unparse must give back a program (guards against an unparse bug)
    except (RecursionError, MemoryError) as e:
        raise CandidateInvalid(
            "rule 'size': the program's syntax tree is too deep to put in canonical form "
            f"({type(e).__name__})"
        ) from None
    except (SyntaxError, ValueError) as e:
        raise CandidateError(f"the program's canonical form does not parse: {str(e)[:300]}") from None
    return text


def check_size(text: str, max_canonical_chars: int, max_compressed_bytes: int) -> None:
    """Rule ``size``: the canonical program is small enough to carry no table of the data.

    The character cap is checked first, so the trusted side compresses at most that many.

    Raises:
        CandidateInvalid: If the canonical text or its compressed form is over its cap.
    """
    if len(text) > max_canonical_chars:
        raise CandidateInvalid(
            f"rule 'size': the program has {len(text)} characters without comments, docstrings "
            f"and formatting (limit {max_canonical_chars}); an equation skeleton is far smaller, a "
            "table of the data is not"
        )
    packed = compressed_size(text)
    if packed > max_compressed_bytes:
        raise CandidateInvalid(
            f"rule 'size': the program compresses to {packed} bytes without comments, docstrings "
            f"and formatting (limit {max_compressed_bytes}); that much information is a table of "
            "the data, not an equation skeleton"
        )
