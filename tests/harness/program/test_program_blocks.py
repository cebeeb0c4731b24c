from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.envs.manifest import Language
from harness.program.blocks import (
    ProgramFormatError,
    comment_prefix,
    marker_kind,
    parse_program,
    split_lines,
)

LINES = [
    "x = 1",
    "y = x + 2",
    "",
    "    return y",
    "pass",
    "if a < b:",
    "z = 3.5",
    "x = 1  ",
    "\tq = 'EVOLVE'",
]
line_st = st.one_of(st.sampled_from(LINES), st.text(alphabet="abxy =+1().\t", max_size=8))


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, str, list[str], list[str | None]]:
    language = draw(st.sampled_from(["python", "cpp"]))
    prefix = comment_prefix(language)
    n = draw(st.integers(0, 3))
    lines = draw(st.lists(line_st, max_size=3))
    bodies: list[str] = []
    names: list[str | None] = []
    for i in range(n):
        name = draw(st.sampled_from([None, f"blk{i}"]))
        indent = draw(st.sampled_from(["", "    "]))
        lines.append(f"{indent}{prefix} EVOLVE-BLOCK-START" + (f" {name}" if name else ""))
        body = draw(st.lists(line_st, max_size=4))
        lines += body
        bodies.append("".join(b + "\n" for b in body))
        names.append(name)
        lines.append(f"{indent}{prefix} EVOLVE-BLOCK-END")
        lines += draw(st.lists(line_st, max_size=3))
    text = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    return language, text, bodies, names


@settings(max_examples=150, deadline=None)
@given(programs())
def test_parse_recovers_generated_structure(case: tuple[str, str, list[str], list[str | None]]) -> None:
    language, text, bodies, names = case
    parsed = parse_program(text, language)
    assert parsed.text == text
    assert [b.text for b in parsed.blocks] == bodies
    assert [b.name for b in parsed.blocks] == names
    assert [b.block for b in parsed.blocks] == list(range(len(bodies)))
    assert len(parsed.fixed) == len(bodies) + 1
    for seg in parsed.segments:
        assert text[seg.start : seg.end] == seg.text
        assert text.count("\n", 0, seg.start) + 1 == seg.line
    if bodies:
        assert all(f.text for f in parsed.fixed)
    assert parsed.with_bodies([b.text for b in parsed.blocks]) == text


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab\n\r \t", max_size=30))
def test_split_lines_round_trips(text: str) -> None:
    lines = split_lines(text)
    assert "".join(lines) == text
    assert all(line.count("\n") == (1 if line.endswith("\n") else 0) for line in lines)


def test_python_and_cpp_markers() -> None:
    py = "import os\n# EVOLVE-BLOCK-START rebalance\nx = 1\n# EVOLVE-BLOCK-END\nprint(x)\n"
    parsed = parse_program(py, "python")
    (body,) = parsed.blocks
    assert (body.text, body.name, body.line, body.block) == ("x = 1\n", "rebalance", 3, 0)
    assert parsed.fixed_texts == (
        "import os\n# EVOLVE-BLOCK-START rebalance\n",
        "# EVOLVE-BLOCK-END\nprint(x)\n",
    )

    cpp = "#include <vector>\n  // EVOLVE-BLOCK-START\nint f() { return 1; }\n  // EVOLVE-BLOCK-END\n"
    parsed = parse_program(cpp, Language.CPP)
    assert [b.text for b in parsed.blocks] == ["int f() { return 1; }\n"]
    assert parsed.blocks[0].name is None
    # Comment syntax of the other language is ordinary text.
    assert parse_program(cpp.replace("//", "#"), "cpp").blocks == ()
    assert parse_program(py.replace("#", "//"), "python").blocks == ()


def test_marker_mentions_that_are_not_comment_lines_are_text() -> None:
    text = (
        '"""Code between EVOLVE-BLOCK-START and EVOLVE-BLOCK-END evolves."""\nx = 1  # EVOLVE-BLOCK-START\n'
    )
    assert parse_program(text, "python").blocks == ()
    assert marker_kind("#EVOLVE-BLOCK-START  b1 extra words\n", "python") == ("start", "b1")
    assert marker_kind("## EVOLVE-BLOCK-END\r\n", "python") == ("end", None)
    assert marker_kind("# EVOLVE-BLOCK-STARTED\n", "python") is None


def test_empty_blocks_and_missing_trailing_newline() -> None:
    text = "# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\nx\n# EVOLVE-BLOCK-END"
    parsed = parse_program(text, "python")
    assert [b.text for b in parsed.blocks] == ["", "x\n"]
    assert [b.line for b in parsed.blocks] == [2, 4]
    assert parsed.fixed_texts[-1] == "# EVOLVE-BLOCK-END"


def test_no_markers_means_zero_blocks() -> None:
    parsed = parse_program("x = 1\n", "python")
    assert parsed.blocks == ()
    assert parsed.fixed_texts == ("x = 1\n",)
    assert parse_program("", "python").fixed_texts == ("",)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            "a\n# EVOLVE-BLOCK-START\nb\n# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n",
            4,
            "EVOLVE-BLOCK-START inside the block opened at line 2 (blocks cannot nest)",
        ),
        ("a\n# EVOLVE-BLOCK-END\n", 2, "EVOLVE-BLOCK-END without a matching EVOLVE-BLOCK-START"),
        ("a\n\n# EVOLVE-BLOCK-START\nb\n", 3, "EVOLVE-BLOCK-START is never closed by EVOLVE-BLOCK-END"),
        (
            "# EVOLVE-BLOCK-START x\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START x\n# EVOLVE-BLOCK-END\n",
            3,
            "duplicate EVOLVE-BLOCK name 'x' (first used at line 1)",
        ),
    ],
)
def test_malformed_markers_name_the_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(ProgramFormatError) as info:
        parse_program(text, "python")
    assert info.value.line == line
    assert info.value.reason == reason
    assert str(info.value) == f"line {line}: {reason}"
    assert isinstance(info.value, ValueError)


def test_cpp_malformed_markers() -> None:
    with pytest.raises(ProgramFormatError, match="line 1: EVOLVE-BLOCK-END without"):
        parse_program("// EVOLVE-BLOCK-END\n", "cpp")


def test_block_lookup() -> None:
    text = "# EVOLVE-BLOCK-START\na\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START two\nb\n# EVOLVE-BLOCK-END\n"
    parsed = parse_program(text, "python")
    assert parsed.block(0).text == "a\n"
    assert parsed.block(-1).text == "b\n"
    assert parsed.block("two").text == "b\n"
    with pytest.raises(KeyError, match="no EVOLVE-BLOCK with index 2 \\(program has 2\\)"):
        parsed.block(2)
    with pytest.raises(KeyError, match="no EVOLVE-BLOCK named 'one'"):
        parsed.block("one")
    with pytest.raises(ValueError, match="expected 2 block bodies, got 1"):
        parsed.with_bodies(["x\n"])
    assert parsed.block_at(parsed.block(1).start) == parsed.block(1)
    assert parsed.block_at(0) is None


def test_unsupported_language() -> None:
    with pytest.raises(ValueError, match="unsupported language 'rust'"):
        parse_program("x\n", "rust")
    assert comment_prefix(Language.PYTHON) == "#"
