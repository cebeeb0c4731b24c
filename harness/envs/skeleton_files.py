"""Templates of the files ``bench new-env`` writes (see :mod:`harness.envs.skeleton`).

``string.Template`` placeholders: ``$name`` (family, a package name), ``$prefix`` (variant id
prefix), ``$cls`` (CamelCase of the name), ``$y_init`` / ``$y_init_tiny`` (the initial program's
measured scores) and ``$y_target``. The toy task: ``predict(xs)`` approximates a function the
scorer keeps to itself, scored by mean squared error on a grid.
"""

from __future__ import annotations

INIT_PY = '''"""The `$name` environment family (evobench). Written by `bench new-env $name`."""
'''

ENV_TOML = """# The manifest of the `$name` environment family (schema: harness/envs/manifest.py in evobench;
# an unknown key is an error, `bench envs` names the file and key of any mistake).
# Written by `bench new-env $name`: a working toy task (fit a function the scorer keeps to itself).
# Change the task, then measure the initial program again and update [progress].
# Every value here (not the comments) is part of each variant's content hash, as are the files
# it names: change one and the hashes change, so old and new scores are never mixed.

[family]
# Family id: a Python package name, equal to this directory's name.
name = "$name"
# Every variant id starts with this (default: `name`; ids read better with hyphens).
id_prefix = "$prefix"
# Semantic version: bump it when scores are no longer comparable with older ones.
version = "0.1.0"
# What the task is, in one or two sentences (`bench envs` shows it).
description = "Toy task from bench new-env: approximate a hidden function on a grid (edit me)."
# The task as agents see it (a file of this directory).
prompt = "prompt.md"
# The starting program; agents change only what lies between the EVOLVE-BLOCK-START / -END lines.
initial_program = "initial_program.py"
# Optional: "module:function" deriving each variant's starting program from its data (it gets the
# Variant and returns the program text, or None to keep initial_program).
# initial_program_from = "programs:initial_program"
# Language of candidate programs: "python" or "cpp".
language = "python"
# The function (Python) or executable contract (C++) the scorer calls in the candidate.
entry_point = "predict"
# Its signature in words, shown to agents.
signature = "predict(xs: list[float]) -> list[float]"
# The trusted scorer: "module:Class" of this package, a harness.scoring.api.Scorer subclass. It runs
# in a trusted process, never in the sandbox, and candidates cannot read this directory.
scorer = "scorer:${cls}Scorer"
# Mutation operators of the offline baselines (random-search): "module:function" returning
# harness.program.mutate operators. Optional: without it random-search uses only its generic
# operators (perturb a number, swap a comparison).
mutations = "mutations:operators"
# Which way the combined score is better: "maximize" or "minimize".
direction = "minimize"
# The metric (one of [[metrics]] below) that is the combined score: the number runs are ranked by.
combined = "mse"
# Wall-clock limit of one evaluation, in seconds (a variant may set its own timeout_s).
timeout_s = 10.0
# Modules the sandbox imports before loading a Python candidate (default ["numpy", "torch"]);
# [] starts fastest when candidates need neither.
preload = []
# Docker base recipe for `--backend docker`: "cpu" or "cuda".
image = "cpu"
# Other files of this directory that change scores (helpers the scorer imports, data recipes).
# Already hashed: env.toml, prompt, initial program, the scorer / mutations / initial_program_from
# modules and the sandbox driver.
hashed_files = []
# Optional: a trusted, non-secret Python file loaded next to the candidate in its sandbox (an
# adapter between wire values and the entry point; the scorer calls it with candidate.call_driver).
sandbox_driver = ""
# Optional: what the scorer can score a random subset of, in words ("test cases"); "" for none.
subset_unit = ""

# Resources of one evaluation (a variant's [variants.<id>.hardware] replaces this table whole).
[family.hardware]
cpus = 1              # CPU cores
memory_mb = 1024      # memory limit of the candidate, MiB
gpu = ""              # exact GPU model and form factor (e.g. "H100 SXM"); "" for CPU only
gpu_count = 0         # GPUs per evaluation
# gpu_memory_gib = 40.0  # GPU memory one evaluation needs, GiB (unset: any GPU of that model has enough)
pids = 16             # processes the candidate may have at once
output_kb = 16        # stdout / stderr kept per stream, KiB
file_mb = 1           # largest file the candidate may write, MiB
disk_mb = 64          # quota of each place it can write (a tmpfs: counts in memory_mb too)

# Scorer parameters (the scorer's self.params); a variant's [variants.<id>.scorer] is merged over them.
[family.scorer_params]
x_max = 3.0      # the grid spans [0, x_max]
n_points = 256   # grid points

# Every metric the scorer reports; `combined` must be one of them.
[[metrics]]
name = "mse"
direction = "minimize"
meaning = "Mean squared error of predict(xs) against the hidden function on the grid."

[[metrics]]
name = "max_error"
direction = "minimize"
meaning = "Largest absolute error on the grid (informational)."

# Progress u = clamp((y - y_floor) / (y_target - y_floor), 0, 1), y_floor = y_init - headroom *
# (y_target - y_init): comparable across variants and families. Measure y_init with
# `bench eval initial_program.py --env <id> --json` whenever the task or initial program changes.
[progress]
y_init = $y_init       # combined score of the initial program
y_target = $y_target   # the score regarded as solved (u = 1)
headroom = 0.25        # floor below y_init, in units of the span (default 0.25; wider for noisy scores)

# Optional downloadable data: [data.<key>] tables, fetched by `bench data fetch <family>` into a
# cache and sha256-checked; a variant lists the keys it needs in `data = [...]`.
# [data.example]
# url = "https://example.org/points.csv"
# filename = "points.csv"
# sha256 = ""            # "" : recorded at the first fetch, then enforced
# license = "CC-BY-4.0"

# Variants: [variants.<id>], each id starting with id_prefix. Keys: description, timeout_s,
# hardware, scorer (parameters merged over scorer_params), data, image, progress (bounds when they
# differ from [progress]) and tiny. At least one variant is tiny = true: the CPU smoke test that
# runs in seconds.
[variants.$prefix]
description = "256 grid points."

[variants.${prefix}-tiny]
description = "16 grid points (the smoke test)."
tiny = true

[variants.${prefix}-tiny.scorer]
n_points = 16

[variants.${prefix}-tiny.progress]
y_init = $y_init_tiny
y_target = $y_target
"""

SCORER_PY = '''"""Trusted scorer of the `$name` family: mean squared error of ``predict(xs)`` on a grid.

It runs in the trusted worker process and sees the candidate only through ``CandidateRuntime``
(harness/scoring/api.py): ``candidate.call`` runs the candidate's function in its sandbox and
returns plain decoded values. Never import or run candidate code here, and reject NaN / inf.
"""

from __future__ import annotations

import math

from harness.evaluation.errors import CandidateInvalid
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer


def target(x: float) -> float:
    """The function candidates approximate (not in the prompt; the sandbox cannot read this file)."""
    return math.sin(x)


def grid(n_points: int, x_max: float) -> list[float]:
    """``n_points`` evenly spaced points on [0, ``x_max``].

    Raises:
        ValueError: If ``n_points`` < 2.
    """
    if n_points < 2:
        raise ValueError("n_points must be at least 2")
    return [x_max * i / (n_points - 1) for i in range(n_points)]


def errors(xs: list[float], ys: object) -> list[float]:
    """Signed errors of the predictions ``ys`` at ``xs``.

    Raises:
        CandidateInvalid: If ``ys`` is not a list of ``len(xs)`` finite numbers.
    """
    if not isinstance(ys, list | tuple) or len(ys) != len(xs):
        raise CandidateInvalid(f"predict(xs) must return a list of {len(xs)} numbers")
    out = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if isinstance(y, bool) or not isinstance(y, int | float) or not math.isfinite(y):
            raise CandidateInvalid(f"predict(xs)[{i}] is not a finite number: {y!r}"[:200])
        out.append(float(y) - target(x))
    return out


class ${cls}Scorer(Scorer):
    """Calls ``predict(xs)`` once on the grid and reports its mean squared error."""

    def prepare(self) -> None:
        """Build the grid from the variant's parameters (once per worker process)."""
        self.xs = grid(int(self.params["n_points"]), float(self.params["x_max"]))

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Call the candidate and score its predictions.

        Raises:
            CandidateInvalid: If the predictions are not ``len(xs)`` finite numbers.
            CandidateError: Propagated from the runtime (the call raised or crashed).
            CandidateTimeout: Propagated from the runtime.
        """
        res = candidate.call("predict", list(self.xs))
        err = errors(self.xs, res.value)
        mse = sum(e * e for e in err) / len(err)
        metrics = {"mse": mse, "max_error": max(abs(e) for e in err)}
        return ScoreOutcome(score=mse, metrics=metrics, candidate_seconds=res.seconds)
'''

INITIAL_PROGRAM_PY = '''# Starting program of the `$name` family: agents change what lies between the markers.
# EVOLVE-BLOCK-START
def predict(xs: list[float]) -> list[float]:
    """One guess of the hidden function per point."""
    return [0.5 * x + 0.1 for x in xs]


# EVOLVE-BLOCK-END
'''

PROMPT_MD = """Write `predict(xs: list[float]) -> list[float]`: for each point x of a grid on [0, 3], a
guess of an unknown smooth function f(x). The score is the mean squared error of your guesses on
the grid (lower is better). Return one finite number per point, in the same order.
"""

MUTATIONS_PY = '''"""Offline mutation operators of the `$name` family (for random-search, not LLM agents).

Each operator edits only the EVOLVE-BLOCK bodies; see harness/program/mutate.py for the protocol
and the generic operators random-search adds (perturb a number, swap a comparison).
"""

from __future__ import annotations

from harness.program.mutate import Mutation, ReplaceSnippet


def operators() -> list[Mutation]:
    """Task-specific moves: bend the straight line into a curve."""
    return [
        ReplaceSnippet(
            name="add-curvature",
            search="0.5 * x + 0.1",
            replacements=("x - x * x * x / 6", "x * (1.0 - x / 4)"),
        ),
    ]
'''

TEST_PY = '''"""Tiny test of the `$name` family: the initial program scores y_init through a real sandbox,
and a broken answer is the candidate's `invalid`. Run: python -m pytest <this file> (with evobench's
Python; seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.envs.registry import Registry
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend

ROOT = Path(__file__).resolve().parent.parent
"""The directory holding this family folder."""


def test_initial_program_scores_y_init_and_a_wrong_answer_is_invalid() -> None:
    variant = Registry(ROOT, strict=False).get("${prefix}-tiny")  # a broken sibling does not matter
    wrong = "def predict(xs):\\n    return [0.0]\\n"
    with LocalBackend(workers=1, env_root=str(ROOT)) as backend:
        ok, bad = backend.evaluate_many(variant, [variant.initial_program, wrong])
    assert ok.status is Status.OK, ok.reason
    assert ok.score == pytest.approx(variant.progress.y_init, rel=1e-9)
    assert bad.status is Status.INVALID, bad.reason
'''
