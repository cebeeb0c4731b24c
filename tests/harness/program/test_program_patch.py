from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.program.blocks import ProgramFormatError, comment_prefix, parse_program, split_lines
from harness.program.patch import (
    BlockRewrite,
    DiffEdit,
    Edit,
    FullRewrite,
    Hunk,
    PatchError,
    apply_edit,
    make_diff,
    parse_diff,
    render_diff,
)

# A small vocabulary makes repeated lines (and so ambiguous SEARCH texts) common.
VOCAB = ["x = 1", "y = x + 2", "", "    return y", "pass", "if a < b:", "x = 1  ", "z = 3.5"]
line_st = st.one_of(st.sampled_from(VOCAB), st.text(alphabet="abxy =+1().", max_size=6))
lines_st = st.lists(line_st, max_size=4)


def build(language: str, fixed: list[list[str]], bodies: list[list[str]], final_newline: bool = True) -> str:
    prefix = comment_prefix(language)
    lines = list(fixed[0])
    for body, after in zip(bodies, fixed[1:], strict=True):
        lines += [f"{prefix} EVOLVE-BLOCK-START", *body, f"{prefix} EVOLVE-BLOCK-END", *after]
    return "\n".join(lines) + ("\n" if final_newline else "")


@st.composite
def programs(draw: st.DrawFn, min_blocks: int = 0, final_newline: bool | None = None) -> tuple[str, str]:
    language = draw(st.sampled_from(["python", "cpp"]))
    n = draw(st.integers(min_blocks, 3))
    fixed = [draw(lines_st) for _ in range(n + 1)]
    bodies = [draw(lines_st) for _ in range(n)]
    newline = draw(st.booleans()) if final_newline is None else final_newline
    return language, build(language, fixed, bodies, newline)


def bodies_of(text: str) -> list[str]:
    return [b.text for b in parse_program(text, "python").blocks]


PROGRAM = build(
    "python", [["import math"], ["", "def g():", "    return f(1)"]], [["def f(a):", "    return a + 1"]]
)


# ---------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(programs(min_blocks=1), st.data())
def test_make_diff_turns_a_into_b(case: tuple[str, str], data: st.DataObject) -> None:
    language, a = case
    parsed = parse_program(a, language)
    new_bodies = [
        data.draw(st.one_of(st.just(seg.text), lines_st.map(lambda ls: "".join(x + "\n" for x in ls))))
        for seg in parsed.blocks
    ]
    b = parsed.with_bodies(new_bodies)
    diff = make_diff(a, b, language)
    assert apply_edit(a, diff, language) == b
    if a.endswith("\n"):
        assert parse_diff(render_diff(diff)) == diff
    if a == b:
        assert diff == DiffEdit([])


@st.composite
def edits(draw: st.DrawFn, program: str, language: str) -> Edit:
    lines = split_lines(program)
    kind = draw(st.sampled_from(["diff", "diff", "diff", "block", "full"]))
    if kind == "full":
        keep = draw(st.booleans())
        changed = [line if keep or draw(st.booleans()) else draw(line_st) + "\n" for line in lines]
        return FullRewrite("".join(changed))
    if kind == "block":
        return BlockRewrite(draw(st.integers(-1, 3)), "".join(x + "\n" for x in draw(lines_st)))
    bodies = [b for b in parse_program(program, language).blocks if b.text]
    hunks = []
    for _ in range(draw(st.integers(1, 2))):
        if bodies and draw(st.integers(0, 3)) > 0:
            # Mostly-valid hunk: a slice of one body, sometimes with a line of context around it.
            body = draw(st.sampled_from(bodies))
            first = body.line - 1 - draw(st.integers(0, 1))
            last = body.line - 1 + len(split_lines(body.text)) + draw(st.integers(0, 1))
            i = draw(st.integers(max(first, 0), last - 1))
            j = draw(st.integers(i + 1, min(last, len(lines))))
            search = "".join(lines[i:j])
        elif lines:
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(i + 1, min(len(lines), i + 3)))
            search = "".join(lines[i:j])
        else:
            search = draw(line_st) + "\n"
        replace = "".join(x + "\n" for x in draw(lines_st))
        hunks.append(Hunk(search, replace))
    return DiffEdit(hunks)


@settings(max_examples=300, deadline=None)
@given(st.one_of(programs(), programs(min_blocks=1)), st.data())
def test_successful_edits_never_change_fixed_text(case: tuple[str, str], data: st.DataObject) -> None:
    language, program = case
    edit = data.draw(edits(program, language))
    before = parse_program(program, language)
    try:
        result = apply_edit(program, edit, language)
    except PatchError:
        return
    after = parse_program(result, language)
    if before.blocks or not isinstance(edit, FullRewrite):
        assert after.fixed_texts == before.fixed_texts
    if isinstance(edit, DiffEdit) and len(edit.hunks) == 1:
        changed = [a.block for a, b in zip(before.blocks, after.blocks, strict=True) if a.text != b.text]
        assert len(changed) <= 1


@settings(max_examples=100, deadline=None)
@given(programs())
def test_empty_diff_is_identity(case: tuple[str, str]) -> None:
    language, program = case
    assert apply_edit(program, DiffEdit([]), language) == program
    assert apply_edit(program, parse_diff("no hunks here"), language) == program


def _not_marker(line: str) -> bool:
    return line.strip() not in ("<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE")


text_line = st.text(alphabet=st.characters(blacklist_characters="\n", codec="utf-8"), max_size=12).filter(
    _not_marker
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(text_line, min_size=1, max_size=4), st.lists(text_line, max_size=4)), max_size=4
    ),
    st.sampled_from(["", "Here is the change:\n```python\n", "Sure.\n\n```\n"]),
)
def test_render_parse_round_trip(pairs: list[tuple[list[str], list[str]]], preamble: str) -> None:
    edit = DiffEdit([Hunk("".join(s + "\n" for s in se), "".join(r + "\n" for r in re)) for se, re in pairs])
    text = render_diff(edit)
    assert parse_diff(text) == edit
    assert parse_diff(preamble + text + "```\nThat should help.") == edit


# ---------------------------------------------------------------- diff edits


def test_diff_edit_applies_hunks_in_order() -> None:
    diff = parse_diff(
        "I will change f.\n```\n"
        "<<<<<<< SEARCH\n    return a + 1\n=======\n    return a + 2\n>>>>>>> REPLACE\n"
        "\n<<<<<<< SEARCH\n    return a + 2\n=======\n    b = a * 2\n    return b\n>>>>>>> REPLACE\n```\n"
    )
    assert len(diff.hunks) == 2
    result = apply_edit(PROGRAM, diff, "python")
    assert bodies_of(result) == ["def f(a):\n    b = a * 2\n    return b\n"]


def test_marker_lines_may_be_unchanged_context() -> None:
    edit = DiffEdit(
        [Hunk("# EVOLVE-BLOCK-START\ndef f(a):\n", "# EVOLVE-BLOCK-START\nimport os\ndef f(a):\n")]
    )
    assert bodies_of(apply_edit(PROGRAM, edit, "python")) == ["import os\ndef f(a):\n    return a + 1\n"]


def test_trailing_whitespace_is_ignored_when_no_exact_match() -> None:
    program = PROGRAM.replace("    return a + 1\n", "    return a + 1   \r\n")
    edit = DiffEdit([Hunk("def f(a):\n    return a + 1\n", "def f(a):\n    return a - 1\n")])
    assert bodies_of(apply_edit(program, edit, "python")) == ["def f(a):\n    return a - 1\n"]
    # Without a final newline the match covers the whole line except its line break.
    edit = DiffEdit([Hunk("    return a + 1    ", "    return 0")])
    assert bodies_of(apply_edit(program, edit, "python")) == ["def f(a):\n    return 0\n"]


def test_cpp_program_edits() -> None:
    program = "#include <cstdio>\n// EVOLVE-BLOCK-START\nint f() { return 1; }\n"
    program += "// EVOLVE-BLOCK-END\nint main() {}\n"
    result = apply_edit(program, DiffEdit([Hunk("return 1;", "return 2;")]), "cpp")
    assert "return 2;" in result
    with pytest.raises(PatchError, match="hunk 1: touches fixed text outside EVOLVE-BLOCK at line 5"):
        apply_edit(program, DiffEdit([Hunk("int main() {}", "int main() { return 0; }")]), "cpp")
    target = program.replace("return 1;", "return 3;")
    assert apply_edit(program, make_diff(program, target, "cpp"), "cpp") == target


@pytest.mark.parametrize(
    ("hunks", "message"),
    [
        ([Hunk("return 7\n", "x")], "hunk 1: SEARCH text not found (its first line is 'return 7')"),
        ([Hunk("    return", "    yield")], "hunk 1: SEARCH text found 2 times; add surrounding lines"),
        ([Hunk("", "x\n")], "hunk 1: SEARCH text is empty"),
        (
            [Hunk("import math\n", "import cmath\n")],
            "hunk 1: touches fixed text outside EVOLVE-BLOCK at line 1",
        ),
        (
            [Hunk("a + 1\n", "a + 2\n"), Hunk("def g():\n", "def h():\n")],
            "hunk 2: touches fixed text outside EVOLVE-BLOCK at line 7",
        ),
        (
            [Hunk("    return a + 1\n# EVOLVE-BLOCK-END\n", "    return a\n")],
            "hunk 1: touches fixed text outside EVOLVE-BLOCK at line 5",
        ),
        (
            [Hunk("def f(a):\n", "def f(a):\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\n")],
            "hunk 1: touches fixed text outside EVOLVE-BLOCK: the new text adds an EVOLVE-BLOCK marker "
            "(result line 5)",
        ),
        (
            [Hunk("    return a + 1\n", "    return a + 1")],
            "hunk 1: touches fixed text outside EVOLVE-BLOCK: the new text breaks the EVOLVE-BLOCK markers",
        ),
    ],
)
def test_diff_errors_name_hunk_and_reason(hunks: list[Hunk], message: str) -> None:
    with pytest.raises(PatchError) as info:
        apply_edit(PROGRAM, DiffEdit(hunks), "python")
    assert str(info.value).startswith(message)
    assert info.value.hunk == int(message.split()[1].rstrip(":"))


def test_ambiguity_when_ignoring_trailing_whitespace() -> None:
    program = build("python", [[], []], [["x = 1 ", "y = 2", "x = 1\t"]])
    with pytest.raises(
        PatchError, match="hunk 1: SEARCH text not found exactly, and found 2 times when ignoring"
    ):
        apply_edit(program, DiffEdit([Hunk("x = 1  \n", "x = 3\n")]), "python")


def test_hunk_changing_two_blocks() -> None:
    program = build("python", [[], ["sep"], []], [["a"], ["b"]])
    edit = DiffEdit(
        [
            Hunk(
                "a\n# EVOLVE-BLOCK-END\nsep\n# EVOLVE-BLOCK-START\nb\n",
                "A\n# EVOLVE-BLOCK-END\nsep\n# EVOLVE-BLOCK-START\nB\n",
            )
        ]
    )
    with pytest.raises(PatchError, match=r"hunk 1: changes more than one EVOLVE-BLOCK \(blocks 0, 1\)"):
        apply_edit(program, edit, "python")


def test_program_without_blocks_only_accepts_full_rewrite() -> None:
    program = "x = 1\n"
    for edit in (DiffEdit([Hunk("x = 1\n", "x = 2\n")]), BlockRewrite(0, "x = 2\n")):
        with pytest.raises(PatchError, match="program has no EVOLVE-BLOCKs; only a full rewrite can edit it"):
            apply_edit(program, edit, "python")
    assert apply_edit(program, FullRewrite("y = 2\n"), "python") == "y = 2\n"
    with pytest.raises(PatchError, match="full rewrite has malformed EVOLVE-BLOCK markers: line 1"):
        apply_edit(program, FullRewrite("# EVOLVE-BLOCK-START\n"), "python")


def test_malformed_program_is_reported_as_format_error() -> None:
    with pytest.raises(ProgramFormatError):
        apply_edit("# EVOLVE-BLOCK-END\n", DiffEdit([]), "python")


# ---------------------------------------------------------------- full and block rewrites


def test_full_rewrite_must_keep_fixed_text() -> None:
    new = PROGRAM.replace("return a + 1", "return a * 3")
    assert apply_edit(PROGRAM, FullRewrite(new), "python") == new
    with pytest.raises(PatchError, match="^full rewrite changed text outside EVOLVE-BLOCKs at line 7$"):
        apply_edit(PROGRAM, FullRewrite(PROGRAM.replace("def g", "def h")), "python")
    dropped = PROGRAM.replace("# EVOLVE-BLOCK-END\n", "")
    with pytest.raises(PatchError, match="full rewrite has malformed EVOLVE-BLOCK markers"):
        apply_edit(PROGRAM, FullRewrite(dropped), "python")


def test_block_rewrite_by_index_and_name() -> None:
    program = build("python", [[], ["mid"], []], [["a"], ["b"]]).replace("START\nb", "START second\nb")
    assert bodies_of(apply_edit(program, BlockRewrite(0, "A"), "python")) == ["A\n", "b\n"]
    assert bodies_of(apply_edit(program, BlockRewrite("second", ""), "python")) == ["a\n", ""]
    with pytest.raises(PatchError, match="^no EVOLVE-BLOCK named 'third'"):
        apply_edit(program, BlockRewrite("third", "x"), "python")
    with pytest.raises(PatchError, match=r"^no EVOLVE-BLOCK with index 2 \(program has 2\)"):
        apply_edit(program, BlockRewrite(2, "x"), "python")
    with pytest.raises(PatchError, match="new body of block 0 adds an EVOLVE-BLOCK marker at line 4"):
        apply_edit(program, BlockRewrite(0, "x\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\n"), "python")


# ---------------------------------------------------------------- make_diff


def test_make_diff_handles_empty_and_duplicate_blocks() -> None:
    a = build("python", [["x"], ["x"], ["x"]], [[], []])
    b = build("python", [["x"], ["x"], ["x"]], [[], ["y"]])
    diff = make_diff(a, b, "python")
    assert apply_edit(a, diff, "python") == b
    assert "EVOLVE-BLOCK" in diff.hunks[0].search  # context had to reach the markers

    a = build("python", [[], [], []], [["d"], ["q"]])
    assert make_diff(a, a, "python") == DiffEdit([])


def test_make_diff_keeps_hunks_small_when_possible() -> None:
    target = PROGRAM.replace("return a + 1", "return a + 5")
    diff = make_diff(PROGRAM, target, "python")
    assert diff == DiffEdit([Hunk("    return a + 1\n", "    return a + 5\n")])


def test_make_diff_rejects_fixed_text_changes() -> None:
    with pytest.raises(PatchError, match="the target program changes text outside EVOLVE-BLOCKs at line 1"):
        make_diff(PROGRAM, PROGRAM.replace("import math", "import cmath"), "python")


# ---------------------------------------------------------------- diff text format


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n",
            "hunk 1: missing ======= divider before >>>>>>> REPLACE at line 3",
        ),
        ("<<<<<<< SEARCH\na\n=======\nb\n", "hunk 1: missing >>>>>>> REPLACE: the text ends inside the hunk"),
        ("<<<<<<< SEARCH\na\n", "hunk 1: missing =======: the text ends inside the hunk opened at line 1"),
        ("<<<<<<< SEARCH\n=======\nb\n>>>>>>> REPLACE\n", "hunk 1: SEARCH section is empty"),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE\n",
            "hunk 1: second ======= divider at line 5",
        ),
        (">>>>>>> REPLACE\n", "hunk 1: >>>>>>> REPLACE at line 1 without an opening <<<<<<< SEARCH"),
        (
            "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH\n",
            "hunk 2: missing >>>>>>> REPLACE before the next <<<<<<< SEARCH at line 10",
        ),
    ],
)
def test_parse_diff_errors(text: str, message: str) -> None:
    with pytest.raises(PatchError) as info:
        parse_diff(text)
    assert str(info.value).startswith(message)


def test_parse_diff_keeps_blank_lines_and_deletions() -> None:
    diff = parse_diff("<<<<<<< SEARCH\na\n\nb\n=======\n>>>>>>> REPLACE")
    assert diff == DiffEdit([Hunk("a\n\nb\n", "")])


@pytest.mark.parametrize(
    ("hunk", "message"),
    [
        (Hunk("", "x\n"), "hunk 1: cannot render: SEARCH text is empty"),
        (Hunk("a", "x\n"), "hunk 1: cannot render: SEARCH text does not end with a newline"),
        (Hunk("a\n", "x"), "hunk 1: cannot render: REPLACE text does not end with a newline"),
        (
            Hunk("a\n", "=======\n"),
            "hunk 1: cannot render: REPLACE text contains the diff marker line '======='",
        ),
    ],
)
def test_render_diff_errors(hunk: Hunk, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        render_diff(DiffEdit([hunk]))


def test_unknown_edit_type() -> None:
    with pytest.raises(TypeError, match="expected FullRewrite, BlockRewrite or DiffEdit, got Hunk"):
        apply_edit(PROGRAM, Hunk("a", "b"), "python")  # type: ignore[arg-type]
