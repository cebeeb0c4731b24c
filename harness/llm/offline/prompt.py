"""The prompt convention the offline proposer reads, and a parser for it.

Agents that want to run offline write every prompt so that a program can read it back:

* The **last user message starts with a header** of ``Key: value`` lines, ended by the first
  blank line. ``Stage`` is required and names what is asked (``idea_generation``,
  ``implementation``, ...). ``Environment`` (the variant id) and ``Language`` tell the
  proposer which mutation operators apply; any further keys (e.g. ``Ideas requested: 3``) are
  stage parameters.
* The body is split into **sections** by ``## Title`` lines.
* Programs are in **fenced code blocks** (three or more backticks, the fence longer than any
  backtick run inside the program).

Real models read the same prompts; the header costs them a few tokens and tells them the stage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_HEADER_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9 _-]{0,40}):[ \t]*(.*?)\s*$")
_SECTION = re.compile(r"^##[ \t]+(.+?)\s*$")
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,})[ \t]*([A-Za-z0-9_+.-]*)[ \t]*$")


def code_fence(text: str) -> str:
    """A backtick fence longer than every backtick run in ``text`` (at least three)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def fenced(text: str, language: str = "") -> str:
    """Wrap ``text`` in a code fence that cannot be closed early by its content."""
    fence = code_fence(text)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{language}\n{body}{fence}"


def code_blocks(text: str) -> list[tuple[str, str]]:
    """All fenced code blocks of a text as ``(language tag, content)``, in order.

    A block is closed by a line holding only a fence of the same length; an unclosed block runs
    to the end of the text.

    Args:
        text: Markdown-like text.

    Returns:
        The blocks; the content keeps its final newline.
    """
    out: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2)
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        out.append((lang, "\n".join(body) + ("\n" if body else "")))
        i += 1
    return out


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # list of parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


@dataclass(frozen=True)
class OfflinePrompt:
    """A parsed request to the offline proposer."""

    stage: str
    """Value of the ``Stage`` header ("" when missing)."""
    header: dict[str, str]
    """All header fields of the last user message, keys lower-cased."""
    sections: dict[str, str]
    """Sections of the last user message by lower-cased title."""
    first_sections: dict[str, str]
    """Sections of the first user message (the original task of a repair conversation)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The raw chat messages."""
    temperature: float | None = None
    """The request's sampling temperature (None: not given); proposers may read it as a setting."""

    @property
    def env_id(self) -> str:
        """The ``Environment`` header ("" when missing)."""
        return self.header.get("environment", "")

    @property
    def language(self) -> str:
        """The ``Language`` header (``python`` when missing)."""
        return self.header.get("language", "python") or "python"

    def number(self, key: str, default: int) -> int:
        """An integer header field, or ``default`` when missing or not a number."""
        try:
            return int(self.header.get(key.lower(), ""))
        except ValueError:
            return default

    def section(self, *titles: str) -> str:
        """The first present section among ``titles`` (last message first, then the first message)."""
        for source in (self.sections, self.first_sections):
            for t in titles:
                if t.lower() in source:
                    return source[t.lower()]
        return ""

    def program(self, *titles: str) -> str | None:
        """The first fenced code block of the first present section among ``titles``."""
        text = self.section(*titles)
        blocks = code_blocks(text)
        return blocks[0][1] if blocks else None


def _split(text: str) -> tuple[dict[str, str], dict[str, str]]:
    header: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines) and lines[i].strip():
        m = _HEADER_LINE.match(lines[i])
        if not m:
            break
        header[m.group(1).strip().lower()] = m.group(2)
        i += 1
    sections: dict[str, str] = {}
    title: str | None = None
    buf: list[str] = []
    fence: str | None = None
    for line in lines[i:]:
        m = _FENCE_OPEN.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None and (s := _SECTION.match(line)):
            if title is not None:
                sections[title] = "\n".join(buf).strip("\n")
            title, buf = s.group(1).lower(), []
            continue
        buf.append(line)
    if title is not None:
        sections[title] = "\n".join(buf).strip("\n")
    return header, sections


def parse_offline_prompt(messages: Sequence[Mapping[str, Any]]) -> OfflinePrompt:
    """Read the header, sections and programs out of chat messages.

    Args:
        messages: The chat messages of the request.

    Returns:
        The parsed prompt (``stage`` is "" when the last user message has no header).
    """
    users = [_content(m) for m in messages if m.get("role") == "user"]
    if not users:
        return OfflinePrompt("", {}, {}, {}, [dict(m) for m in messages])
    header, sections = _split(users[-1])
    _, first_sections = _split(users[0])
    raw = [dict(m) for m in messages]
    return OfflinePrompt(header.get("stage", ""), header, sections, first_sections, raw)
