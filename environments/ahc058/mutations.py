"""Task-specific offline mutation operators of AHC058 (for the random-search baseline).

Each operator replaces a snippet that occurs exactly once inside the EVOLVE-BLOCK of
``initial_program.cpp``. The replacements keep the program compiling and its plan valid (every
purchase is still checked against the apples held): they only change how eagerly the greedy
buys and how much it trusts level-1 upgrades.
"""

from __future__ import annotations

from harness.program.mutate import ReplaceSnippet


def operators() -> list[ReplaceSnippet]:
    """The family's snippet-replacement operators on the initial program."""
    return [
        ReplaceSnippet(
            name="return-threshold",
            search="constexpr double MIN_RETURN = 1.0;",
            replacements=[
                "constexpr double MIN_RETURN = 0.5;",
                "constexpr double MIN_RETURN = 2.0;",
                "constexpr double MIN_RETURN = 4.0;",
            ],
        ),
        ReplaceSnippet(
            name="level1-discount",
            search="constexpr double LEVEL1_DISCOUNT = 0.5;",
            replacements=[
                "constexpr double LEVEL1_DISCOUNT = 0.0;",
                "constexpr double LEVEL1_DISCOUNT = 0.25;",
                "constexpr double LEVEL1_DISCOUNT = 1.0;",
            ],
        ),
    ]
