"""Task-specific mutation operators of the LLM-SR family, for the offline (non-LLM) baseline.

Each operator swaps one piece of the initial linear skeleton for a nonlinear alternative: a
different basis function per input column, an interaction term in the intercept, or cubic
corrections. All alternatives stay within the 10 fitted parameters (indices 7 to 9 are free in
the starting program for every variant, which has at most 4 inputs plus an intercept).

``add-term`` adds one fitted term before the return and keeps the return line, so it applies
again to its own output: equations grow term by term (the published vocabulary's only edit that
chains). Its terms are built from the first, second and last input column; each uses the constant
of :data:`ADD_TERMS`. On two- and three-input variants slots 3 to 9 are free until another edit
takes one; on wider variants a slot may also weigh an input, and two terms on one slot share their
constant: still valid skeletons, only less expressive.
"""

from __future__ import annotations

from harness.program.mutate import ReplaceSnippet

ADD_TERMS: list[tuple[int, str]] = [
    (3, "np.sin(columns[0])"),
    (4, "columns[-1] ** 3"),
    (5, "columns[0] ** 3"),
    (6, "columns[0] * columns[-1]"),
    (7, "columns[0] * np.cos(columns[0])"),
    (8, "np.sin(columns[-1])"),
    (9, "columns[0] * np.exp(-np.abs(columns[0]))"),
    (3, "np.cos(columns[-1])"),
    (4, "columns[0] ** 2"),
    (5, "columns[-1] ** 2"),
    (6, "np.exp(columns[0])"),
    (7, "np.sin(columns[1])"),
]
"""``add-term`` options: (index into ``params``, term)."""


def operators() -> list[ReplaceSnippet]:
    """The family's snippet-replacement operators on the initial program."""
    specs = [
        {
            "name": "column-basis",
            "search": "prediction = prediction + weight * column",
            "replacements": [
                "prediction = prediction + weight * np.sin(column)",
                "prediction = prediction + weight * column**3",
                "prediction = prediction + weight * column * np.abs(column)",
                "prediction = prediction + weight * np.tanh(column)",
                "prediction = prediction + weight * column * np.cos(column)",
            ],
        },
        {
            "name": "intercept-interaction",
            "search": "prediction = np.full_like(columns[0], params[len(columns)])",
            "replacements": [
                "prediction = params[len(columns)] + params[9] * np.prod(columns, axis=0)",
                "prediction = params[len(columns)] + params[9] * columns[0] * columns[-1]",
                "prediction = np.full_like(columns[0], params[len(columns)]) + params[9] * columns[-1] ** 3",
            ],
        },
        {
            "name": "cubic-correction",
            "search": "return prediction",
            "replacements": [
                "return prediction + params[8] * columns[0] ** 3 + params[7] * columns[-1] ** 3",
                "return prediction + params[8] * columns[0] * np.exp(-np.abs(columns[0]))",
                "return prediction * (1.0 + params[8] * columns[-1])",
            ],
        },
        {
            "name": "add-term",
            "search": "    return prediction",
            "replacements": [
                f"    prediction = prediction + params[{slot}] * {term}\n    return prediction"
                for slot, term in ADD_TERMS
            ],
        },
    ]
    return [
        ReplaceSnippet(name=spec["name"], search=spec["search"], replacements=spec["replacements"])
        for spec in specs
    ]
