"""The one way to write a family's reward-hack tests: a folder of hostile candidates.

``tests/environments/hacks/<variant-id>/<name>.<ext>`` is a complete candidate program whose
header comment states what must happen to it::

    # hack: what it tries (one line, for humans)
    # expect: invalid | error | timeout | no-gain   (one; or several joined by "|", any of them)
    # reason: a substring the result's reason must contain (optional)
    # base: initial-program   (optional: the variant's initial program is placed before this
    #                          file, so a hack only overrides what it attacks)
    # idle: yes               (optional: it waits out its budget without using CPU; the module
    #                          starts it first, so that its wait overlaps the other hacks)

``no-gain`` means the evaluation is ``ok`` but scores no better than the variant's honest initial
program (within ``# tolerance:``, default 1e-9 relative); a status other than ``ok`` also fails it,
so a hack whose own positive control breaks (it raises) cannot pass vacuously. ``invalid | no-gain``
is for attacks whose success depends on the machine (e.g. the allocator reusing an address): when
the attack lands it must fail, when it does not it must gain nothing; ``# reason:`` then applies to
the failure. Every file runs
through the real local sandbox backend, exactly as an agent's program would.

A candidate that applies to several variants is kept once, in ``hacks/_shared/<name>.<ext>``, and
declares them (a variant that does not exist is an error)::

    # variants: mla-decode-tiny, trimul-tiny
    # tolerance@mla-decode-tiny: 0.6   (optional: this variant's own no-gain tolerance)

It runs once per declared variant, with the same test id as a copy in ``hacks/<variant-id>/``.
A file in a variant's folder applies to that variant only and declares no ``# variants:``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status
from harness.sandbox.local import LocalBackend

HACKS = Path(__file__).resolve().parent / "hacks"
SHARED = "_shared"
VERDICTS = ("invalid", "error", "timeout", "no-gain")


@dataclass(frozen=True)
class Hack:
    """One hostile candidate, as it runs against one variant, and its expected verdict."""

    variant_id: str
    path: Path
    expect: str
    reason: str
    tolerance: float
    base: str
    idle: bool = False

    def source(self, v: Variant) -> str:
        text = self.path.read_text(encoding="utf-8")
        return f"{v.initial_program}\n\n# --- hack ---\n{text}" if self.base == "initial-program" else text

    @property
    def id(self) -> str:
        return f"{self.variant_id}/{self.path.stem}"


def _header(text: str, key: str) -> str:
    m = re.search(rf"^(?:#|//)\s*{re.escape(key)}:\s*(.+?)\s*$", text, re.M)
    return m.group(1) if m else ""


def _candidates(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith((".", "_")))


def _parse(f: Path, variant_ids: list[str]) -> list[Hack]:
    """The hack ``f`` once per variant it applies to (``variant_ids``: already checked to exist)."""
    text = f.read_text(encoding="utf-8")
    expect = _header(text, "expect")
    expects = [e.strip() for e in expect.split("|")]
    assert expects and all(e in VERDICTS for e in expects), (
        f"{f}: '# expect:' must be one or more of {VERDICTS} joined by '|', got {expect!r}"
    )
    assert _header(text, "hack"), f"{f}: a '# hack:' line says what it tries"
    base = _header(text, "base")
    assert base in ("", "initial-program"), f"{f}: '# base:' may only be initial-program"
    for m in re.finditer(r"^(?:#|//)\s*tolerance@([\w.-]+):", text, re.M):
        if m.group(1) not in variant_ids:
            raise ValueError(f"{f}: '# tolerance@{m.group(1)}:' names a variant the file does not apply to")
    out = []
    for vid in variant_ids:
        tol = float(_header(text, f"tolerance@{vid}") or _header(text, "tolerance") or 1e-9)
        idle = _header(text, "idle")
        assert idle in ("", "yes"), f"{f}: '# idle:' may only be yes"
        out.append(Hack(vid, f, " | ".join(expects), _header(text, "reason"), tol, base, idle == "yes"))
    return out


def discover(root: Path = HACKS, known: set[str] | None = None) -> list[Hack]:
    """Every (variant, hack) pair under ``root``, ordered by test id.

    Raises:
        ValueError: If a folder or a ``# variants:`` line names a variant that does not exist, a
            shared file declares no variants, or a variant's own file declares some.
    """
    known = set(default_registry().ids()) if known is None else known
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name != SHARED):
        if d.name not in known:
            raise ValueError(f"{d} is not a variant id")
        for f in _candidates(d):
            if _header(f.read_text(encoding="utf-8"), "variants"):
                raise ValueError(f"{f}: '# variants:' belongs to files in {root / SHARED}")
            out += _parse(f, [d.name])
    if (root / SHARED).is_dir():
        for f in _candidates(root / SHARED):
            ids = [v.strip() for v in _header(f.read_text(encoding="utf-8"), "variants").split(",")]
            if ids == [""] or len(set(ids)) != len(ids):
                raise ValueError(f"{f}: a shared hack declares its variants once each: '# variants: a, b'")
            if unknown := [v for v in ids if v not in known]:
                raise ValueError(f"{f}: '# variants:' names {unknown}, not variant ids")
            out += _parse(f, ids)
    ids = [h.id for h in out]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"a hack is both shared and in a variant's folder: {sorted({i for i in ids if ids.count(i) > 1})}"
        )
    return sorted(out, key=lambda h: h.id)


ALL = discover()


_started: dict[str, Future[EvalResult]] = {}
"""Idle hacks' evaluations, started with the backend (each holds one of its two workers)."""


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> Iterator[LocalBackend]:
    selected = {getattr(i, "callspec", None) and i.callspec.params.get("hack") for i in request.session.items}
    with LocalBackend(workers=2, mode="warm") as b:
        for h in ALL:
            if h.idle and h in selected:  # waits on one worker while the corpus runs on the other
                v = default_registry().get(h.variant_id)
                _started[h.id] = b.submit(v, h.source(v))
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


def _corpus(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_an_idle_hack_is_declared_so() -> None:
    """The corpus's idle waits are started early (``# idle: yes``); any other value is an error."""
    assert [h.id for h in ALL if h.idle] == ["kuairec-tiny/sleep_out_budget"]
    with pytest.raises(AssertionError, match="may only be yes"):
        _parse_text("# hack: h\n# expect: timeout\n# idle: maybe\n")


def _parse_text(text: str) -> list[Hack]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "h.py"
        f.write_text(text, encoding="utf-8")
        return _parse(f, ["a"])


def test_a_shared_hack_runs_once_per_declared_variant(tmp_path: Path) -> None:
    shared = "# hack: h\n# variants: b, a\n# expect: no-gain\n# tolerance: 0.5\n# tolerance@b: 0.6\n"
    root = _corpus(tmp_path, {"_shared/s.py": shared, "a/own.py": "# hack: h\n# expect: error\n"})
    got = [(h.id, h.tolerance, h.path.parent.name) for h in discover(root, known={"a", "b"})]
    assert got == [("a/own", 1e-9, "a"), ("a/s", 0.5, "_shared"), ("b/s", 0.6, "_shared")]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"_shared/s.py": "# hack: h\n# variants: a, nope\n# expect: error\n"}, "names ['nope']"),
        ({"nope/x.py": "# hack: h\n# expect: error\n"}, "is not a variant id"),
        ({"_shared/s.py": "# hack: h\n# expect: error\n"}, "declares its variants"),
        ({"a/x.py": "# hack: h\n# variants: a\n# expect: error\n"}, "belongs to files in"),
        ({"_shared/s.py": "# hack: h\n# variants: a\n# expect: error\n# tolerance@b: 1\n"}, "tolerance@b"),
        (
            {
                "_shared/x.py": "# hack: h\n# variants: a\n# expect: error\n",
                "a/x.py": "# hack: h\n# expect: error\n",
            },
            "both shared and",
        ),
    ],
    ids=["unknown-declared", "unknown-folder", "undeclared", "own-declares", "stray-tolerance", "twice"],
)
def test_a_corpus_naming_no_real_variant_is_an_error(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        discover(_corpus(tmp_path, files), known={"a", "b"})


def test_the_shared_corpus_declares_real_variants() -> None:
    """Every shared file ran once per declared variant (the module-level ``discover`` saw it)."""
    shared = [h for h in ALL if h.path.parent.name == SHARED]
    assert shared, f"{HACKS / SHARED} holds no shared hack"
    ids = set(default_registry().ids())
    assert {h.variant_id for h in shared} <= ids


@pytest.mark.parametrize("hack", ALL, ids=[h.id for h in ALL])
def test_hack_fails_or_gains_nothing(backend: LocalBackend, hack: Hack) -> None:
    v = default_registry().get(hack.variant_id)
    started = _started.pop(hack.id, None)
    res = started.result() if started is not None else backend.evaluate(v, hack.source(v))
    assert_verdict(hack, v, res, lambda: honest(backend, v))


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
