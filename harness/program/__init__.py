"""Program model: EVOLVE-BLOCK parsing, edits confined to blocks, and offline mutation operators."""

from .blocks import (
    MARKER_END,
    MARKER_START,
    ParsedProgram,
    ProgramFormatError,
    Segment,
    comment_prefix,
    parse_program,
)
from .edits import BlockRewrite, DiffEdit, Edit, FullRewrite, Hunk, PatchError, parse_diff, render_diff
from .mutate import (
    FunctionMutation,
    Mutation,
    ReplaceSnippet,
    generic_operators,
    mutate,
    perturb_numeric_literal,
    swap_comparison,
)
from .patch import apply_edit, make_diff

__all__ = [
    "MARKER_END",
    "MARKER_START",
    "BlockRewrite",
    "DiffEdit",
    "Edit",
    "FullRewrite",
    "FunctionMutation",
    "Hunk",
    "Mutation",
    "ParsedProgram",
    "PatchError",
    "ProgramFormatError",
    "ReplaceSnippet",
    "Segment",
    "apply_edit",
    "comment_prefix",
    "generic_operators",
    "make_diff",
    "mutate",
    "parse_diff",
    "parse_program",
    "perturb_numeric_literal",
    "render_diff",
    "swap_comparison",
]
