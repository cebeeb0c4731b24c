"""SmolLM2's parse rate per stage with and without constrained decoding, and batched vs one-by-one calls.

For one step's worth of islands on eplb-tiny (``--islands`` views, each with its own seed), the
PACEvolve advisor prompts (idea generation, classification, selection, repetition check,
pruning) and the end-to-end implementation prompt are encoded as the learning agent does
(chat template, middle cut at ``--max-prompt-tokens``) and answered by the policy at the
configured ``policy_max_new_tokens`` (64; the edit gets 4x). Printed per stage: the parse
rate (answers the stage's parser accepts / answers) unconstrained and constrained, and the
tokens the constrained answers used (mean / max). Then the idea-generation calls of one step
are timed one at a time and as one batch (wall seconds and the ratio). Nothing is asserted.

Run: ``nice -n 15 python benchmarks/bench_policy_formats.py [--policy smollm2-135m] [--islands 8]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import agents.pacevolve  # noqa: E402,F401 - registers offline/exact
from agents.learning import answer_formats as af  # noqa: E402
from agents.learning.policy_roles import encode_messages  # noqa: E402
from agents.pacevolve import parsing, prompting  # noqa: E402
from agents.pacevolve.roles import IslandView, Selection  # noqa: E402
from agents.pacevolve.state import Idea, PrunedIdea  # noqa: E402
from agents.rl.backends.base import SampleRequest  # noqa: E402
from agents.rl.backends.hf import HFBackend, LoraSettings  # noqa: E402
from agents.rl.policy import load_policy  # noqa: E402
from harness.envs.registry import default_registry  # noqa: E402
from harness.llm.offline import register_operators  # noqa: E402
from harness.runner.runner import task_spec  # noqa: E402


def views(env: str, n: int) -> list[IslandView]:
    """``n`` island views of the variant's initial program with a two-idea pool and one pruned idea."""
    task = task_spec(default_registry().get(env))
    register_operators(task.env_id, list(task.mutations))
    ideas = (
        Idea(id=1, description="edit scale-literal 1 more replicas for hot experts"),
        Idea(id=2, description="Balance load across GPUs greedily."),
    )
    pruned = (
        PrunedIdea(id=3, description="Random placement.", experiments=2, best=None, findings="-", step=1),
    )
    return [
        IslandView(
            task=task,
            island=i,
            step=1,
            seed=100 + i,
            program=task.initial_program,
            program_score=0.5,
            best_score=0.5,
            ideas=ideas,
            pruned=pruned,
            log=(),
        )  # fmt: skip
        for i in range(n)
    ]


def stages(view: IslandView) -> dict[str, tuple[list[Any], str | None, Any, int]]:
    """Stage -> (messages, constraint, parser, token factor) as the policy roles use them."""
    pool, pruned = {i.id for i in view.ideas}, {p.id for p in view.pruned}
    edit = af.view_edits(view)
    lang = view.task.language.value
    sel = Selection(1, "edit scale-literal 1 more replicas")
    ideas = lambda t: parsing.parse_ideas(t, 1)  # noqa: E731
    select = lambda t: parsing.parse_selection(t, pool)  # noqa: E731
    drop = lambda t: parsing.parse_drop(t, pool, 1)  # noqa: E731
    return {
        "idea_generation": (
            prompting.idea_generation(view, 1, 0), af.idea_generation(edit), ideas, 1
        ),
        "idea_classification": (
            prompting.idea_classification(view, "edit scale-literal 2 fewer replicas"),
            af.classification(pool, pruned, edit), lambda t: parsing.parse_classification(t, pool, pruned), 1,
        ),
        "idea_selection": (
            prompting.idea_selection(view), af.selection(pool, edit), select, 1
        ),
        "repetition_check": (
            prompting.repetition_check(view, view.ideas[0], sel), af.repetition(), parsing.parse_repeat, 1
        ),
        "idea_pruning": (
            prompting.idea_pruning(view, 1, 1), af.pruning(pool, 1), drop, 1
        ),
        "implementation (end-to-end)": (
            prompting.implementation(view, view.ideas[0], sel), af.edit_block(view.program, lang),
            lambda t: parsing.parse_edit(t, view.program, lang), 4,
        ),
    }  # fmt: skip


def parses(parser: Any, text: str) -> bool:
    """Whether the stage's parser accepts ``text``."""
    try:
        parser(text)
    except parsing.ParseError:
        return False
    return True


def main() -> None:
    """Print parse rates and batching timings (see the module docstring)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="smollm2-135m")
    ap.add_argument("--env", default="eplb-tiny")
    ap.add_argument("--islands", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-prompt-tokens", type=int, default=512)
    args = ap.parse_args()
    policy = load_policy(args.policy)
    backend = HFBackend(policy, lora=LoraSettings())
    vs = views(args.env, args.islands)
    print(f"policy {args.policy}, {args.env}, {args.islands} islands, {args.max_new_tokens} new tokens")
    print(f"{'stage':30s} {'free':>6s} {'constr':>7s} {'tokens mean/max':>16s} {'finished':>9s}")
    for name in stages(vs[0]):
        rows = {}
        for constrained in (False, True):
            reqs, parsers = [], []
            for v in vs:
                msgs, fmt, parser, factor = stages(v)[name]
                ids = encode_messages(policy, msgs, args.max_prompt_tokens)
                reqs.append(
                    SampleRequest(
                        tuple(ids), factor * args.max_new_tokens, v.seed, fmt if constrained else None
                    )
                )
                parsers.append(parser)
            comps = backend.sample_requests(reqs, 1.0)
            ok = [parses(p, c.text) for p, c in zip(parsers, comps, strict=True)]
            rows[constrained] = (sum(ok) / len(ok), comps)
        lens = [len(c.token_ids) for c in rows[True][1]]
        fin = sum(c.finished for c in rows[True][1])
        print(
            f"{name:30s} {rows[False][0]:6.2f} {rows[True][0]:7.2f} "
            f"{statistics.mean(lens):8.1f} / {max(lens):4d} {fin:5d}/{len(lens)}"
        )
        print(f"    e.g. {rows[True][1][0].text[:150]!r}")
    reqs = []
    for v in vs:
        msgs, fmt, _, _ = stages(v)["idea_generation"]
        reqs.append(
            SampleRequest(
                tuple(encode_messages(policy, msgs, args.max_prompt_tokens)), args.max_new_tokens, v.seed, fmt
            )
        )
    t0 = time.perf_counter()
    for r in reqs:
        backend.sample_requests([r], 1.0)
    alone = time.perf_counter() - t0
    t0 = time.perf_counter()
    backend.sample_requests(reqs, 1.0)
    batched = time.perf_counter() - t0
    print(f"idea generation, {len(reqs)} calls: one at a time {alone:.1f} s, one batch {batched:.1f} s, "
          f"ratio {alone / batched:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
