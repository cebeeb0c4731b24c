"""Task-specific offline mutation operators of the Multi-Evolve family (for the random-search baseline).

Every operator is a :class:`~harness.program.mutate.ReplaceSnippet`: a snippet that occurs exactly
once inside the EVOLVE-BLOCK of ``initial_program.py`` and a few alternatives for it. Each keeps the
program valid and its predictions finite; they move the baseline along its modelling choices
(regularisation, how much epistasis is trusted, weighting of mutation orders, a monotone output
link) rather than breaking it. Generic operators (numeric literals, comparisons) are added by the
agent itself, not here.
"""

from __future__ import annotations

from harness.program.mutate import ReplaceSnippet


def operators() -> list[ReplaceSnippet]:
    """The family's snippet-replacement operators on the initial program."""
    specs = [
        {
            "name": "single-penalty",
            "search": "SINGLE_PENALTY = 1.0",
            "replacements": ["SINGLE_PENALTY = 0.1", "SINGLE_PENALTY = 0.3", "SINGLE_PENALTY = 3.0"],
        },
        {
            "name": "pair-penalty",
            "search": "PAIR_PENALTY = 4.0",
            "replacements": ["PAIR_PENALTY = 1.0", "PAIR_PENALTY = 16.0", "PAIR_PENALTY = 1e6"],
        },
        {
            "name": "pair-scale",
            "search": "PAIR_SCALE = 0.5",
            "replacements": ["PAIR_SCALE = 0.0", "PAIR_SCALE = 0.25", "PAIR_SCALE = 1.0"],
        },
        {
            "name": "order-weighting",
            "search": "ORDER_WEIGHT_POWER = 0.5",
            "replacements": ["ORDER_WEIGHT_POWER = 0.0", "ORDER_WEIGHT_POWER = 1.0"],
        },
        {
            "name": "output-link",
            "search": "return np.nan_to_num(pred, nan=center, posinf=center, neginf=center)",
            "replacements": [
                # Rank-preserving squash: keeps the order, compresses the extrapolated tail.
                "pred = center + np.tanh((pred - center) / (np.std(pred) + 1e-9)) * np.std(pred)\n"
                "    return np.nan_to_num(pred, nan=center, posinf=center, neginf=center)",
                # Penalise long mutation paths a little (fitness usually drops with load).
                "pred = pred - 0.01 * test_df['num_mutations'].to_numpy(dtype=float)\n"
                "    return np.nan_to_num(pred, nan=center, posinf=center, neginf=center)",
            ],
        },
    ]
    return [
        ReplaceSnippet(name=spec["name"], search=spec["search"], replacements=spec["replacements"])
        for spec in specs
    ]
