"""The canonical form of LLM-SR programs and rule 'size' (canonical.py), on honest and hostile text."""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from environments.llm_sr.canonical import canonicalise, check_size, compressed_size
from environments.llm_sr.mutations import operators
from environments.llm_sr.plausibility import PlausibilityLimits
from environments.llm_sr.scorer import LlmSrScorer
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateError, CandidateInvalid

LIMITS = PlausibilityLimits()
INITIAL = default_registry().get("llm-sr-tiny").initial_program
TRUE_LAW = """
import numpy as np


def equation(x, v, params):
    return (params[0] * np.sin(x) + params[1] * v**3 + params[2] * x**3 + params[3] * x * v
            + params[4] * x * np.cos(x))
"""


def canonical(source: str) -> str:
    return canonicalise(source, LIMITS.max_source_chars)


def honest_programs() -> dict[str, str]:
    """The initial program, every replacement of every family operator, seeded chains of up to 20."""
    out = {"initial": INITIAL, "true-law": TRUE_LAW}
    ops = operators()
    for op in ops:
        for i, rep in enumerate(op.replacements):
            out[f"{op.name}[{i}]"] = INITIAL.replace(op.search, rep, 1)
    for seed in range(100):
        rng, program = random.Random(seed), INITIAL
        for _ in range(rng.randint(1, 20)):
            program = rng.choice(ops).apply(program, rng, "python") or program
        out[f"chain{seed}"] = program
    return out


def _equation(source: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate.py", "exec"), namespace)  # noqa: S102 - the family's own programs
    return namespace["equation"]


def test_formatting_comments_and_docstrings_are_gone() -> None:
    a = (
        '"""Module doc."""\nimport numpy as np  # a comment\n\n\ndef equation(x, v, params):\n'
        '    """Doc."""\n    return params[0]*x   +  params[1] * v  # trailing\n\t\n \n'
    )
    b = "import numpy as np\ndef equation(x, v, params): return (params[0] * x) + params[1] * v\n"
    text = canonical(a)
    assert text == canonical(b) == canonical(text)
    assert "#" not in text and "doc" not in text.lower() and "\t" not in text
    assert canonical('def f():\n    """only a docstring"""\n') == "def f():\n    pass\n"


def test_honest_programs_keep_their_meaning_and_stay_far_below_the_caps() -> None:
    rng = np.random.default_rng(0)
    x, v = rng.normal(size=(2, 64))
    params = rng.normal(size=10)
    sizes = []
    for name, source in honest_programs().items():
        text = canonical(source)
        with np.errstate(all="ignore"):
            want, got = _equation(source)(x, v, params.copy()), _equation(text)(x, v, params.copy())
        np.testing.assert_array_equal(got, want, err_msg=name)
        check_size(text, LIMITS.max_canonical_chars, LIMITS.max_compressed_bytes)
        sizes.append((compressed_size(text), len(text), name))
    # Measured when the caps were set: at most 306 bytes and 1,148 characters; the caps keep a
    # 4x margin over the honest programs (the family's largest test program, a sandbox probe, is 1,030).
    assert max(sizes)[0] * 4 <= LIMITS.max_compressed_bytes, max(sizes)
    assert max(s[1] for s in sizes) * 6 <= LIMITS.max_canonical_chars


def test_hostile_shapes_fail_as_the_candidates() -> None:
    with pytest.raises(CandidateInvalid, match="rule 'size'.*characters"):
        canonicalise("x = 1\n" + " " * LIMITS.max_source_chars, LIMITS.max_source_chars)
    with pytest.raises(CandidateInvalid, match="rule 'size'.*too deep"):
        canonical("y = " + " + ".join(["a"] * 1500) + "\n")  # parses, too deep to unparse
    with pytest.raises(CandidateError, match="does not parse"):
        canonical("y = " + "+".join(["a"] * 100_000) + "\n")  # too deep to parse
    with pytest.raises(CandidateError, match="does not parse"):
        canonical("def equation(x, v, params:\n")
    with pytest.raises(CandidateInvalid, match="rule 'size'.*characters without comments"):
        check_size("pass\n" * 2000, LIMITS.max_canonical_chars, LIMITS.max_compressed_bytes)
    # 1.5 kB of random bytes in one short string literal: under rule 'literals', over the cap.
    blob = base64.b85encode(random.Random(1).randbytes(1500)).decode()
    with pytest.raises(CandidateInvalid, match="rule 'size'.*compresses to"):
        check_size(canonical(f"T = {blob!r}\n"), LIMITS.max_canonical_chars, LIMITS.max_compressed_bytes)


def test_the_fresh_process_sees_only_the_canonical_text(fake_runtime: Any) -> None:
    """A program that prints its own file in the prediction process finds no comment or docstring."""
    scorer = LlmSrScorer(default_registry().get("llm-sr-tiny"), Path("/nonexistent"))
    scorer.prepare()
    probe = (
        'import sys\n\n\ndef _f():\n    """DOCSTRING-MARKER"""\n\n\n# COMMENT-MARKER\n'
        'if "__file__" in globals():\n    sys.stdout.write(open(__file__).read())\n    sys.stdout.flush()\n'
    )
    rt = fake_runtime(INITIAL + "\n" + probe)
    out = scorer.score(rt)
    assert out.score == pytest.approx(-1.014, abs=1e-3)
    seen = rt.run_results[0].stdout.decode("utf-8", errors="replace")
    assert "def equation" in seen and "open(__file__)" in seen
    assert "MARKER" not in seen and "EVOLVE-BLOCK" not in seen
