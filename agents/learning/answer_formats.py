"""Regex answer formats of the policy's stages, for constrained decoding (xgrammar dialect).

Each builder returns a regex whose every match is accepted by the stage's parser in
``agents/pacevolve/parsing.py``, built from what the call knows: the pool's idea ids, the
pruned ids, how many ideas to drop, the current program's EVOLVE-BLOCK lines and, when the
implementer is ``offline/exact``, the edit vocabulary the prompt shows (the hypothesis then
starts with ``edit <name> <n>``, that implementer's input). Lengths are bounded so an answer
fits in ``policy_max_new_tokens`` (free text is optional where the parser does not need it,
so the policy can stop early). The regexes use only what both xgrammar and Python's ``re``
read alike (literals, classes, groups, alternation, bounded repeats), so the tests check them
with Python's ``re``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agents.pacevolve.roles import IslandView
from harness.llm.offline.vocabulary import Entry
from harness.program import ProgramFormatError, parse_program

_SPECIAL = set("\\.^$|?*+()[]{}")
_WORD = "A-Za-z0-9"
_INNER = "A-Za-z0-9,.;:'()+=/%-"
TEXT_CHARS = 72
"""Longest free-text field (one line) in the advisor formats."""
EDIT_LINE_CHARS = 80
"""Longest REPLACE line of an end-to-end edit."""
EDIT_REPLACE_LINES = 4
"""Most REPLACE lines of an end-to-end edit."""
EDIT_SEARCH_LINES = 3
"""Most consecutive program lines one SEARCH part may copy."""


def escape(text: str) -> str:
    """``text`` as a regex literal (only the metacharacters are escaped)."""
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in text)


def text(lo: int, hi: int = TEXT_CHARS) -> str:
    """A one-line free text of at least ``lo`` and at most about ``hi`` characters.

    It survives the parsers' normalisation unshortened: it starts with a letter or digit, has
    single spaces only (values are whitespace-collapsed), no ``*``/``_`` (stripped at the ends)
    and no ``<`` (no reasoning tags).

    Raises:
        ValueError: If ``lo < 1`` or ``hi < 2 * lo``.
    """
    if lo < 1 or hi < 2 * lo:
        raise ValueError("need 1 <= lo and 2 * lo <= hi")
    return f"[{_WORD}]( ?[{_INNER}]){{{lo - 1},{hi // 2}}}"


def _alt(options: Iterable[str]) -> str:
    return "(" + "|".join(options) + ")"


def _ids(ids: Iterable[int]) -> str:
    return _alt(str(i) for i in sorted(set(ids)))


def edit_names(entries: Sequence[Entry]) -> str | None:
    """``edit <name> <n>`` over the vocabulary's entries and option numbers (None when empty)."""
    names = [f"{escape(e.name)} {_alt(str(o.number) for o in e.options)}" for e in entries if e.options]
    return f"edit {_alt(names)}" if names else None


def hypothesis(edit: str | None) -> str:
    """A hypothesis: ``edit <name> <n>`` and optional free text, or free text alone."""
    if edit is None:
        return text(8)
    return f"{edit}( {text(1)})?"


def view_edits(view: IslandView) -> str | None:
    """The ``edit <name> <n>`` regex of the edits this view's prompt shows (None when none)."""
    return edit_names(view.edits()[0])


def idea_generation(edit: str | None) -> str:
    """``Hypothesis: <h>`` (one idea; ``parse_ideas`` keeps the first ``n``)."""
    return f"Hypothesis: {hypothesis(edit)}"


def classification(pool: Iterable[int], pruned: Iterable[int], edit: str | None) -> str:
    """``Idea exists: yes|no|abandoned`` with an ``Idea ID`` from the pool / pruned ids and a description."""
    desc = f"\nDescription: {hypothesis(edit)}"
    options = [f"no{desc}"]
    pool, pruned = sorted(set(pool)), sorted(set(pruned))
    if pool:
        options.append(f"yes\nIdea ID: {_ids(pool)}{desc}")
    if pruned:
        options.append(f"abandoned\nIdea ID: {_ids(pruned)}({desc})?")
    return f"Idea exists: {_alt(options)}"


def selection(pool: Iterable[int], edit: str | None) -> str | None:
    """``Idea ID: <pool id>`` then ``Hypothesis: <h>`` (None for an empty pool: nothing to choose)."""
    ids = sorted(set(pool))
    if not ids:
        return None
    return f"Idea ID: {_ids(ids)}\nHypothesis: {hypothesis(edit)}"


def repetition() -> str:
    """``Repeat: yes|no`` with an optional reason."""
    return f"Repeat: (yes|no)(\nReason: {text(1)})?"


def pruning(pool: Iterable[int], n_drop: int) -> str | None:
    """``Drop: [<id>, ...]`` with 1..``n_drop`` pool ids and an optional reason (None: empty pool)."""
    ids = sorted(set(pool))
    if not ids or n_drop < 1:
        return None
    one = _ids(ids)
    more = f"(, {one}){{0,{n_drop - 1}}}" if n_drop > 1 else ""
    return f"Drop: \\[{one}{more}\\](\nReason: {text(1)})?"


def search_runs(program: str, language: str) -> list[str]:
    """Runs of 1..:data:`EDIT_SEARCH_LINES` consecutive EVOLVE-BLOCK lines that occur once in ``program``.

    A run starts at a non-blank line whose text (with its newline) occurs exactly once, so the
    SEARCH part it becomes matches exactly one place.
    """
    try:
        blocks = parse_program(program, language).blocks
    except (ProgramFormatError, ValueError):
        return []
    runs: list[str] = []
    for seg in blocks:
        lines = seg.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, line in enumerate(lines):
            if not line.strip() or program.count(line + "\n") != 1:
                continue
            for k in range(1, EDIT_SEARCH_LINES + 1):
                if i + k > len(lines):
                    break
                run = "\n".join(lines[i : i + k])
                if any(ch in run for ch in "\r\x00"):
                    break
                runs.append(run)
    return list(dict.fromkeys(runs))


def edit_block(program: str, language: str) -> str | None:
    """One SEARCH/REPLACE block: SEARCH copies a run of block lines, REPLACE is free code lines.

    A REPLACE line is empty or starts (after indentation) with a character that cannot open a
    ``<<<<<<<`` / ``=======`` / ``>>>>>>>`` marker. None when the program has no usable line.
    """
    runs = search_runs(program, language)
    if not runs:
        return None
    line = f"([ \\t]{{0,16}}[^ \\t\\n<=>][^\\n]{{0,{EDIT_LINE_CHARS - 1}}})?"
    replace = f"({line}\\n){{1,{EDIT_REPLACE_LINES}}}"
    search = _alt(escape(r) for r in runs)
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}>>>>>>> REPLACE"
