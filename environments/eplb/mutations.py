"""Task-specific offline mutation operators of the EPLB family (for the random-search baseline).

Every operator is a :class:`~harness.program.mutate.ReplaceSnippet`: a snippet that occurs
exactly once inside the EVOLVE-BLOCK of ``initial_program.py`` and a few alternatives for it.
Each replacement keeps the program syntactically valid and keeps the placement valid (it changes
heuristics, never the slot bookkeeping), so a random search over these edits explores
balance/speed trade-offs rather than crashes. The generic operators (numeric literals,
comparisons) are added by the agent itself, not here.
"""

from __future__ import annotations

from harness.program.mutate import ReplaceSnippet


def operators() -> list[ReplaceSnippet]:
    """The family's snippet-replacement operators on the initial program."""
    specs = [
        {
            "name": "replication-criterion",
            "search": "busiest = torch.argmax(weight / count, dim=-1)",
            "replacements": [
                # Largest drop of per-replica load from adding one more replica.
                "busiest = torch.argmax(weight / count - weight / (count + 1), dim=-1)",
                # Softer preference for hot experts.
                "busiest = torch.argmax(weight / count.float().sqrt(), dim=-1)",
                # Per-replica load after the new replica is added.
                "busiest = torch.argmax(weight / (count + 1), dim=-1)",
            ],
        },
        {
            "name": "packing-order",
            "search": (
                "order = torch.sort(weight.float(), dim=-1, descending=True, stable=True).indices.tolist()"
            ),
            "replacements": [
                "order = torch.argsort(weight.float(), dim=-1, descending=True).tolist()",
                "order = torch.sort(weight.float(), dim=-1, descending=False, stable=True).indices.tolist()",
                # A fixed shuffle (seeded): an unseeded one made the same program score differently.
                "order = torch.randperm(weight.size(-1), generator=torch.Generator().manual_seed(0))"
                ".expand(weight.size(0), -1).tolist()",
            ],
        },
        {
            "name": "packing-tie-break",
            "search": "if used[p] < capacity and (best < 0 or load[p] < load[best]):",
            "replacements": [
                "if used[p] < capacity and (best < 0 or load[p] <= load[best]):",
                "if used[p] < capacity and (best < 0 or (load[p], used[p]) < (load[best], used[best])):",
            ],
        },
        {
            "name": "placement-policy",
            "search": "if num_groups % num_nodes == 0:",
            "replacements": [
                "if False:  # always place globally",
                "if num_groups % num_nodes == 0 and num_nodes > 1:",
            ],
        },
        {
            "name": "load-smoothing",
            "search": "weight = weight.float().cpu()",
            "replacements": [
                "weight = weight.float().cpu() + 1.0",
                "weight = weight.float().cpu(); weight = weight + 0.1 * weight.mean(dim=-1, keepdim=True)",
                "weight = weight.float().cpu().sqrt()",
            ],
        },
    ]
    return [
        ReplaceSnippet(name=spec["name"], search=spec["search"], replacements=spec["replacements"])
        for spec in specs
    ]
