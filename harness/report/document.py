"""A report as typed blocks, rendered as one self-contained HTML page or as Markdown with figure files.

The variant report is written either way (``bench report --env E --out report.html`` or
``report.md``); both show the same sections, tables, notes and figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from harness.compare.tables import frame_markdown

from . import page
from .plot import save


@dataclass(frozen=True)
class Para:
    """A paragraph of plain text."""

    text: str
    """The text (escaped when rendered)."""


@dataclass(frozen=True)
class Note:
    """Something the reader must know, set apart from the text."""

    text: str
    """The note (escaped when rendered)."""


@dataclass(frozen=True)
class Table:
    """A table of plain cells (numbers right-aligned in HTML)."""

    header: tuple[str, ...]
    """Column names."""
    rows: list[tuple[Any, ...]]
    """Rows, one cell per column."""


@dataclass(frozen=True)
class Figures:
    """Figures shown side by side (HTML: inline SVG; Markdown: SVG files beside the document)."""

    figs: tuple[Figure, ...]
    """The figures."""


Block = Para | Note | Table | Figures


@dataclass
class Document:
    """A titled report of sections, each a list of blocks."""

    title: str
    """Page title."""
    subtitle: str
    """One line under the title."""
    sections: list[tuple[str, list[Block]]] = field(default_factory=list)
    """(heading, blocks) in reading order."""

    def html(self) -> str:
        """The whole document as one self-contained HTML page (:func:`page.page`)."""
        return page.page(
            self.title, self.subtitle, [(h, "".join(_html(b) for b in blocks)) for h, blocks in self.sections]
        )

    def write_markdown(self, path: Path) -> list[Path]:
        """Write the document as Markdown to ``path``, each figure as ``<stem>-fig<k>.svg`` beside it.

        Returns:
            The files written (the document first).

        Raises:
            OSError: If a file cannot be written.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        out = [f"# {self.title}", "", self.subtitle, ""]
        for heading, blocks in self.sections:
            out += [f"## {heading}", ""]
            for b in blocks:
                if isinstance(b, Figures):
                    for fig in b.figs:
                        target = path.with_name(f"{path.stem}-fig{len(written) + 1}.svg")
                        written.append(save(fig, target))
                        out += [f"![{_md_text(_caption(fig))}]({target.name})", ""]
                else:
                    out += [_markdown(b), ""]
        path.write_text("\n".join(out).rstrip() + "\n", encoding="utf-8")
        return [path, *written]


def _caption(fig: Figure) -> str:
    return " ".join(fig.get_suptitle().split()) or "figure"


def _md_text(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def _html(b: Block) -> str:
    if isinstance(b, Para):
        return f"<p>{page.esc(b.text)}</p>"
    if isinstance(b, Note):
        return f"<p class='note'>{page.esc(b.text)}</p>"
    if isinstance(b, Table):
        return page.table(b.header, b.rows)
    return page.figures([page.figure(f) for f in b.figs])


def _markdown(b: Para | Note | Table) -> str:
    if isinstance(b, Para):
        return b.text
    if isinstance(b, Note):
        return f"> **Note:** {b.text}"
    return frame_markdown(pd.DataFrame([list(r) for r in b.rows], columns=list(b.header))).rstrip()


def notes(texts: Sequence[str]) -> list[Block]:
    """One :class:`Note` per text."""
    return [Note(t) for t in texts]
