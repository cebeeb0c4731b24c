"""Task-specific mutation operators of the LLM-SR family, for the offline (non-LLM) baseline.

Each operator swaps one piece of the initial linear skeleton for a nonlinear alternative: a
different basis function per input column, an interaction term in the intercept, or cubic
corrections. All alternatives stay within the 10 fitted parameters (indices 7 to 9 are free in
the starting program for every variant, which has at most 4 inputs plus an intercept).
"""

from __future__ import annotations

from harness.program.mutate import ReplaceSnippet


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
    ]
    return [
        ReplaceSnippet(name=spec["name"], search=spec["search"], replacements=spec["replacements"])
        for spec in specs
    ]
