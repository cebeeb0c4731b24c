"""Shared rich console and small formatting helpers for the CLI."""

from __future__ import annotations

import math
import sys

from rich.console import Console

# Piped output (logs, CI, tests) gets wide tables instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 200)
# Error messages quote user input and package extras (``evobench[rl]``): never read them as markup.
# soft_wrap: one error stays one line, however long the path it quotes (grep, copy and paste).
err_console = Console(
    stderr=True, width=None if sys.stderr.isatty() else 200, markup=False, highlight=False, soft_wrap=True
)


def fmt(x: float | None, digits: int = 4) -> str:
    """Format a number compactly; '-' for None or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}"
