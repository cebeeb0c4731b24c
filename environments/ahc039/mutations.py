"""Task-specific offline mutation operators of AHC039 (for the random-search baseline).

Each operator replaces a snippet that occurs exactly once inside the EVOLVE-BLOCK of
``initial_program.cpp``. The replacements keep the program compiling and its rectangle valid: the
grid resolution changes the search granularity, the mackerel weight changes the objective the
rectangle search maximises.
"""

from __future__ import annotations

from harness.program.mutate import ReplaceSnippet


def operators() -> list[ReplaceSnippet]:
    """The family's snippet-replacement operators on the initial program."""
    return [
        ReplaceSnippet(
            name="grid-resolution",
            search="constexpr int GRID = 25;",
            replacements=[
                "constexpr int GRID = 16;",
                "constexpr int GRID = 20;",
                "constexpr int GRID = 32;",
                "constexpr int GRID = 40;",
            ],
        ),
        ReplaceSnippet(
            name="mackerel-weight",
            search="constexpr int MACKEREL_WEIGHT = 1;",
            replacements=["constexpr int MACKEREL_WEIGHT = 2;", "constexpr int MACKEREL_WEIGHT = 3;"],
        ),
    ]
