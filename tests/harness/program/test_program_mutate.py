from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.program.blocks import parse_program
from harness.program.lexer import scan
from harness.program.mutate import (
    FunctionMutation,
    Mutation,
    ReplaceSnippet,
    generic_operators,
    mutate,
    perturb_numeric_literal,
    swap_comparison,
)
from harness.program.patch import apply_edit, make_diff

# Valid top-level Python statements full of literals and comparisons, some hidden in strings,
# comments and identifiers.
STATEMENTS = [
    "x = 1",
    "y = 2.5 * x",
    "z = x < y",
    "w = [i for i in range(3) if i >= 1]",
    "s = 'a < 3'  # 5 > 4",
    "v = 1e-3 + .5 + 7.",
    "k = 0",
    "name2 = 10 // 3",
    "t = x > 0 and y <= 3.0",
    "u = 1_000",
    "d = {'k1': 0x1F, 'k2': 0b101, 'k3': 0o17, 'c': 2j}",
    'q = f"{x + 1}" if x != 2 else """3 < 4"""',
    "def h(a: int) -> bool:\n    return a >= 12",
]
REPO = Path(__file__).resolve().parents[3]


@st.composite
def python_programs(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(STATEMENTS), max_size=3))
    for _ in range(draw(st.integers(0, 2))):
        parts.append("# EVOLVE-BLOCK-START")
        parts += draw(st.lists(st.sampled_from(STATEMENTS), max_size=4))
        parts.append("# EVOLVE-BLOCK-END")
        parts += draw(st.lists(st.sampled_from(STATEMENTS), max_size=3))
    return "\n".join(parts) + "\n"


@settings(max_examples=150, deadline=None)
@given(python_programs(), st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_mutations_keep_fixed_text_and_valid_python(program: str, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    fixed = parse_program(program, "python").fixed_texts
    operators: list[Mutation] = [*generic_operators(), ReplaceSnippet("mul", "*", ["+", "-"])]
    current = program
    for _ in range(steps):
        for op in operators:
            result = op.apply(current, rng, "python")
            if result is None:
                continue
            assert parse_program(result, "python").fixed_texts == fixed
            compile(result, "<mutant>", "exec")
            # Mutants are reachable through ordinary diff edits as well.
            assert apply_edit(current, make_diff(current, result, "python"), "python") == result
            current = result


def test_operators_return_none_without_blocks_or_sites() -> None:
    rng = random.Random(0)
    no_blocks = "x = 1 < 2\n"
    nothing = "x = 1 < 2\n# EVOLVE-BLOCK-START\nname2 = 's 3 < 4'  # 5 > 6\n# EVOLVE-BLOCK-END\ny = 3\n"
    for program in (no_blocks, nothing):
        for op in generic_operators():
            assert op.apply(program, rng, "python") is None
        assert ReplaceSnippet("r", "x = 1", ["x = 2"]).apply(program, rng, "python") is None
    assert mutate(nothing, rng, "python", generic_operators()) is None
    assert mutate(nothing, rng, "python", []) is None


def _block(program: str, language: str = "python") -> str:
    return parse_program(program, language).blocks[0].text


def test_perturb_numeric_literal_rules() -> None:
    ints = "# EVOLVE-BLOCK-START\nn = 7\n# EVOLVE-BLOCK-END\n"
    seen = {_block(perturb_numeric_literal(ints, random.Random(s), "python") or "") for s in range(40)}
    assert seen == {"n = 6\n", "n = 8\n", "n = 14\n", "n = 3\n"}
    zero = ints.replace("7", "0")
    assert {_block(perturb_numeric_literal(zero, random.Random(s), "python") or "") for s in range(10)} == {
        "n = 1\n"
    }
    floats = "# EVOLVE-BLOCK-START\nn = -2.5\n# EVOLVE-BLOCK-END\n"
    for s in range(20):
        body = _block(perturb_numeric_literal(floats, random.Random(s), "python") or "")
        literal = body.removeprefix("n = -").strip()
        assert float(literal) > 0 and ("." in literal or "e" in literal)
    untouched = "# EVOLVE-BLOCK-START\nd = {0x1F: 2j, 'k': 0.0}\n# EVOLVE-BLOCK-END\n"
    assert perturb_numeric_literal(untouched, random.Random(0), "python") is None


def test_cpp_mutations() -> None:
    program = (
        "#include <vector>\n// EVOLVE-BLOCK-START\n"
        "std::vector<int> f(int n) { std::vector<int> v; for (int i = 0; i < n; ++i) v.push_back(i >> 1);"
        " float s = 1.5f; unsigned u = 10u; return v; } // 3 < 4\n"
        "// EVOLVE-BLOCK-END\nint main() { return 0 > 1; }\n"
    )
    rng = random.Random(1)
    swapped = {swap_comparison(program, rng, "cpp") for _ in range(20)}
    assert swapped == {program.replace("i < n", "i <= n")}
    literals = [t.text for t in scan(_block(program, "cpp"), "cpp") if t.kind == "number"]
    assert literals == ["0", "1", "1.5f", "10u"]
    for s in range(30):
        result = perturb_numeric_literal(program, random.Random(s), "cpp")
        assert result is not None
        assert parse_program(result, "cpp").fixed_texts == parse_program(program, "cpp").fixed_texts
        body = _block(result, "cpp")
        assert "f;" in body and "u;" in body


def test_swap_comparison_pairs() -> None:
    for op, new in (("<", "<="), ("<=", "<"), (">", ">="), (">=", ">")):
        program = f"# EVOLVE-BLOCK-START\nok = a {op} b\n# EVOLVE-BLOCK-END\n"
        assert _block(swap_comparison(program, random.Random(0), "python") or "") == f"ok = a {new} b\n"
    arrows = "# EVOLVE-BLOCK-START\ndef f() -> int:\n    return 1 << 2 >> 1\n# EVOLVE-BLOCK-END\n"
    assert swap_comparison(arrows, random.Random(0), "python") is None


def test_replace_snippet_only_inside_blocks() -> None:
    program = "key = 'load'\n# EVOLVE-BLOCK-START\norder = sorted(xs, key='load')\n# EVOLVE-BLOCK-END\n"
    op = ReplaceSnippet("sort_key", "'load'", ("'count'", "'load'", "'ratio'"))
    results = {op.apply(program, random.Random(s), "python") for s in range(20)}
    assert results == {
        program.replace("key='load'", "key='count'"),
        program.replace("key='load'", "key='ratio'"),
    }
    breaking = ReplaceSnippet("bad", "order", ["# EVOLVE-BLOCK-END\norder"])
    assert breaking.apply(program, random.Random(0), "python") is None
    with pytest.raises(ValueError, match="search text is empty"):
        ReplaceSnippet("empty", "", ["x"])
    with pytest.raises(ValueError, match="no replacement differs"):
        ReplaceSnippet("same", "x", ["x"])


def test_operator_objects_and_determinism() -> None:
    ops = generic_operators()
    assert [op.name for op in ops] == ["perturb_numeric_literal", "swap_comparison"]
    assert all(isinstance(op, Mutation) for op in [*ops, ReplaceSnippet("r", "a", ["b"])])
    assert isinstance(ops[0], FunctionMutation)
    program = (REPO / "environments" / "eplb" / "initial_program.py").read_text()
    first = mutate(program, random.Random(7), "python", ops)
    assert first is not None and first == mutate(program, random.Random(7), "python", ops)
    name, mutant = first
    assert name in {"perturb_numeric_literal", "swap_comparison"}
    assert parse_program(mutant, "python").fixed_texts == parse_program(program, "python").fixed_texts
    compile(mutant, "initial_program.py", "exec")
