"""Shared rich console and small formatting helpers for the CLI."""

from __future__ import annotations

import math

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def fmt(x: float | None, digits: int = 4) -> str:
    """Format a number compactly; '-' for None or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}"
