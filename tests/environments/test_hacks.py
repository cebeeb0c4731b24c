"""The one way to write a family's reward-hack tests: a folder of hostile candidates.

``tests/environments/hacks/<variant-id>/<name>.<ext>`` is a complete candidate program whose
header comment states what must happen to it::

    # hack: what it tries (one line, for humans)
    # expect: invalid | error | timeout | no-gain   (one; or several joined by "|", any of them)
    # reason: a substring the result's reason must contain (optional)
    # base: initial-program   (optional: the variant's initial program is placed before this
    #                          file, so a hack only overrides what it attacks)

``no-gain`` means the evaluation is ``ok`` but scores no better than the variant's honest initial
program (within ``# tolerance:``, default 1e-9 relative); a status other than ``ok`` also fails it,
so a hack whose own positive control breaks (it raises) cannot pass vacuously. ``invalid | no-gain``
is for attacks whose success depends on the machine (e.g. the allocator reusing an address): when
the attack lands it must fail, when it does not it must gain nothing; ``# reason:`` then applies to
the failure. Every file runs
through the real local sandbox backend, exactly as an agent's program would.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status
from harness.sandbox.local import LocalBackend

HACKS = Path(__file__).resolve().parent / "hacks"
VERDICTS = ("invalid", "error", "timeout", "no-gain")


@dataclass(frozen=True)
class Hack:
    """One hostile candidate and its expected verdict."""

    variant_id: str
    path: Path
    expect: str
    reason: str
    tolerance: float
    base: str

    def source(self, v: Variant) -> str:
        text = self.path.read_text(encoding="utf-8")
        return f"{v.initial_program}\n\n# --- hack ---\n{text}" if self.base == "initial-program" else text

    @property
    def id(self) -> str:
        return f"{self.variant_id}/{self.path.stem}"


def _header(text: str, key: str) -> str:
    m = re.search(rf"^(?:#|//)\s*{key}:\s*(.+?)\s*$", text, re.M)
    return m.group(1) if m else ""


def discover() -> list[Hack]:
    out = []
    for d in sorted(p for p in HACKS.iterdir() if p.is_dir()):
        for f in sorted(d.iterdir()):
            if f.name.startswith((".", "_")) or not f.is_file():
                continue
            text = f.read_text(encoding="utf-8")
            expect = _header(text, "expect")
            expects = [e.strip() for e in expect.split("|")]
            assert expects and all(e in VERDICTS for e in expects), (
                f"{f}: '# expect:' must be one or more of {VERDICTS} joined by '|', got {expect!r}"
            )
            expect = " | ".join(expects)
            assert _header(text, "hack"), f"{f}: a '# hack:' line says what it tries"
            tol = float(_header(text, "tolerance") or 1e-9)
            base = _header(text, "base")
            assert base in ("", "initial-program"), f"{f}: '# base:' may only be initial-program"
            out.append(Hack(d.name, f, expect, _header(text, "reason"), tol, base))
    return out


ALL = discover()


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    with LocalBackend(workers=2, mode="warm") as b:
        yield b


_honest: dict[str, EvalResult] = {}


def honest(backend: LocalBackend, v: Variant) -> EvalResult:
    if v.id not in _honest:
        res = backend.evaluate(v, v.initial_program)
        assert res.status is Status.OK, f"honest initial program of {v.id}: {res.status} {res.reason}"
        _honest[v.id] = res
    return _honest[v.id]


def test_every_family_with_hacks_is_a_real_variant() -> None:
    ids = set(default_registry().ids())
    assert ALL, "no hack candidates found"
    for h in ALL:
        assert h.variant_id in ids, f"{h.path.parent} is not a variant id"


@pytest.mark.parametrize("hack", ALL, ids=[h.id for h in ALL])
def test_hack_fails_or_gains_nothing(backend: LocalBackend, hack: Hack) -> None:
    v = default_registry().get(hack.variant_id)
    assert_verdict(hack, v, backend.evaluate(v, hack.source(v)), lambda: honest(backend, v))


def assert_verdict(hack: Hack, v: Variant, res: EvalResult, ref_of: Callable[[], EvalResult]) -> None:
    """Check ``res`` against the hack's header (``ref_of``: the honest result, for ``no-gain``).

    Shared with the Docker runs of hostile candidates (tests/environments/test_kernels_docker.py).
    """
    assert res.status is not Status.INFRA_ERROR, f"harness failed, not the hack: {res.reason}"
    expects = hack.expect.split(" | ")
    failures = [e for e in expects if e != "no-gain"]
    if "no-gain" in expects and (res.status is Status.OK or not failures):
        assert res.status is Status.OK, f"expected ok and no gain, got {res.status}: {res.reason[:500]}"
        ref = ref_of()
        assert res.score is not None and ref.score is not None
        margin = hack.tolerance * max(1.0, abs(ref.score))
        better = res.score > ref.score + margin if v.maximize else res.score < ref.score - margin
        assert math.isfinite(res.score) and not better, f"hack scored {res.score} vs honest {ref.score}"
    else:
        got = f"expected {hack.expect}, got {res.status}: {res.reason[:500]}"
        assert res.status in {Status(e) for e in failures}, got
    if hack.reason and res.status is not Status.OK:
        assert hack.reason in res.reason, f"reason {res.reason[:500]!r} lacks {hack.reason!r}"
