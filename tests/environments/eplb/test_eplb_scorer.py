"""EplbScorer with an in-process fake runtime: scoring, trusted clock, validity rules, data recipe."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from environments.eplb.data import load_windows, synthetic_windows
from environments.eplb.scorer import EplbScorer
from harness.envs.data import DataMissingError
from harness.envs.registry import Variant, default_registry
from harness.evaluation.errors import CandidateInvalid
from harness.scoring.api import CallResult, ExecResult

_clock = time.perf_counter  # bound at import: candidates patching time.* cannot reach it
INITIAL = Path(__file__).resolve().parents[3] / "environments" / "eplb" / "initial_program.py"


def _load_initial() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("eplb_initial_for_scorer", INITIAL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HONEST = _load_initial().rebalance_experts


class FakeRuntime:
    """Calls a Python function directly and times it with the test's own clock."""

    def __init__(self, fn: Callable[..., Any], seconds: float | None = None, transport: float = 0.0) -> None:
        self.fn = fn
        self.fixed_seconds = seconds
        self.transport = transport
        self.calls: list[tuple[Any, ...]] = []

    def transport_seconds(self, *args: Any, repeats: int = 5) -> float:
        assert not self.calls, "transport must be measured before any candidate call"
        return self.transport

    @property
    def source(self) -> str:
        return ""

    def call(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        assert function == "rebalance_experts"
        self.calls.append(tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
        t0 = _clock()
        value = self.fn(*args)
        seconds = _clock() - t0
        return CallResult(value=value, seconds=seconds if self.fixed_seconds is None else self.fixed_seconds)

    def run(self, argv: list[str], stdin: bytes = b"", **_: Any) -> ExecResult:
        raise NotImplementedError

    @property
    def workdir(self) -> Path:
        return Path(".")

    def remaining(self) -> float:
        return 60.0


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("eplb-tiny")


@pytest.fixture(scope="module")
def scorer(tiny: Variant, tmp_path_factory: pytest.TempPathFactory) -> EplbScorer:
    """The public draw (heldout = "public"): the one the manifest's y_init was measured on."""
    variant = dataclasses.replace(tiny, scorer_params={**tiny.scorer_params, "heldout": "public"})
    s = variant.load_attr(variant.scorer_ref)(variant, tmp_path_factory.mktemp("eplb-data"))
    assert isinstance(s, EplbScorer)
    s.prepare()
    return s


@pytest.fixture(scope="module")
def timed(tiny: Variant, tmp_path_factory: pytest.TempPathFactory) -> EplbScorer:
    """The tiny workload with the family's measured speed credit (what the full variant scores)."""
    variant = dataclasses.replace(tiny, scorer_params={**tiny.scorer_params, "speed_credit": "measured"})
    s = variant.load_attr(variant.scorer_ref)(variant, tmp_path_factory.mktemp("eplb-timed"))
    assert isinstance(s, EplbScorer)
    s.prepare()
    return s


def test_tiny_windows_come_from_the_heldout_key(tiny: Variant, scorer: EplbScorer, tmp_path: Path) -> None:
    """Issue 20: the manifest's seed alone no longer gives the windows a candidate is scored on."""
    assert tiny.scorer_params["heldout"] == "secret"
    s = tiny.load_attr(tiny.scorer_ref)(tiny, tmp_path)
    assert isinstance(s, EplbScorer)
    s.prepare()
    assert s.key_id is not None and scorer.key_id is None
    assert not all(torch.equal(a, b) for a, b in zip(s.windows, scorer.windows, strict=True))


# -- scoring ------------------------------------------------------------------------------------


def test_tiny_score_is_the_same_under_any_machine_load(scorer: EplbScorer) -> None:
    """Issue 22 item 6: a loaded machine once moved the same program from 0.70 to 0.24."""
    scores = {scorer.score(FakeRuntime(HONEST, seconds=t)).score for t in (0.0, 0.001, 0.04, 0.4, 5.0)}
    assert len(scores) == 1
    (score,) = scores
    assert score == pytest.approx(0.7137, abs=5e-5)  # the manifest's y_init
    slow = scorer.score(FakeRuntime(HONEST, seconds=5.0))
    assert slow.metrics["rebalance_seconds"] == pytest.approx(5.0)  # still measured and reported


def test_unknown_speed_credit_is_rejected(tiny: Variant, tmp_path: Path) -> None:
    variant = dataclasses.replace(tiny, scorer_params={**tiny.scorer_params, "speed_credit": "maybe"})
    with pytest.raises(ValueError, match="speed_credit"):
        variant.load_attr(variant.scorer_ref)(variant, tmp_path).prepare()


def test_variant_resolves(tiny: Variant) -> None:
    assert tiny.tiny and tiny.family == "eplb" and tiny.entry_point == "rebalance_experts"
    assert tiny.hardware.memory_mb == 2048 and tiny.timeout_s == 60
    full = default_registry().get("eplb")
    assert full.scorer_params["num_replicas"] == 288 and full.scorer_params["window"] == 100
    assert [k for k, _ in full.data] == ["expert-load"]
    assert {m.name for m in tiny.metrics} == {
        "combined",
        "balancedness_expert",
        "balancedness_gpu",
        "rebalance_seconds",
        "transport_seconds",
        "heldout_key",
    }


def test_initial_program_scores_ok(tiny: Variant, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    s = tiny.load_attr(tiny.scorer_ref)(tiny, tmp_path)
    s.prepare()
    rt = FakeRuntime(HONEST)
    out = s.score(rt)
    scorer_compute = time.perf_counter() - t0 - out.candidate_seconds
    assert scorer_compute < 1.0
    assert len(out.cases) == len(s.windows) - 1 and all(c.status == "ok" for c in out.cases)  # per window
    mean = sum(c.score or 0.0 for c in out.cases) / len(out.cases)
    assert mean == pytest.approx(out.metrics["balancedness_expert"])
    m = out.metrics
    assert set(m) == {
        "combined",
        "balancedness_expert",
        "balancedness_gpu",
        "rebalance_seconds",
        "transport_seconds",
        "heldout_key",
    }
    assert 0.2 < m["balancedness_expert"] < 1.0
    assert m["balancedness_expert"] <= m["balancedness_gpu"] <= 1.0
    assert m["rebalance_seconds"] > 0
    assert out.score == m["combined"]
    # eplb-tiny's speed credit is saturated (deterministic instrument): the score ignores the clock.
    assert m["combined"] == pytest.approx((m["balancedness_expert"] + 1.0) / 2)
    assert out.candidate_seconds == pytest.approx(m["rebalance_seconds"] * (len(s.windows) - 1))


def test_candidate_sees_only_current_window_as_float_copy(scorer: EplbScorer) -> None:
    rt = FakeRuntime(HONEST)
    scorer.score(rt)
    k = len(scorer.windows)
    assert len(rt.calls) == k - 1
    for i, args in enumerate(rt.calls):
        weight, *rest = args
        assert weight.dtype == torch.float32
        assert torch.equal(weight, scorer.windows[i].float())
        assert rest == [scorer.num_replicas, scorer.num_groups, scorer.num_nodes, scorer.num_gpus]
    assert not any(torch.equal(a[0], scorer.windows[-1].float()) for a in rt.calls)


def test_input_mutation_does_not_touch_windows(scorer: EplbScorer) -> None:
    before = [w.clone() for w in scorer.windows]

    def vandal(weight: torch.Tensor, *args: Any) -> Any:
        out = HONEST(weight, *args)
        weight.zero_()
        return out

    a = scorer.score(FakeRuntime(vandal, seconds=0.01))
    b = scorer.score(FakeRuntime(HONEST, seconds=0.01))
    assert all(torch.equal(x, y) for x, y in zip(before, scorer.windows, strict=True))
    assert a.metrics["balancedness_expert"] == b.metrics["balancedness_expert"]


def test_time_comes_from_the_runtime_and_is_floored(timed: EplbScorer) -> None:
    scorer = timed
    out = scorer.score(FakeRuntime(HONEST, seconds=0.04))
    assert out.metrics["rebalance_seconds"] == pytest.approx(0.04)
    assert out.score == pytest.approx((out.metrics["balancedness_expert"] + 0.5) / 2)
    zero = scorer.score(FakeRuntime(HONEST, seconds=0.0))
    assert zero.metrics["rebalance_seconds"] == 0.0
    # The speed credit saturates at the 20 ms floor: an instant plan gains at most 1.
    assert zero.score == pytest.approx((zero.metrics["balancedness_expert"] + 1.0) / 2)


def test_transport_is_subtracted_from_call_time(timed: EplbScorer) -> None:
    scorer = timed
    out = scorer.score(FakeRuntime(HONEST, seconds=0.05, transport=0.01))
    assert out.metrics["rebalance_seconds"] == pytest.approx(0.04)
    assert out.metrics["transport_seconds"] == pytest.approx(0.01)
    assert out.score == pytest.approx((out.metrics["balancedness_expert"] + 0.5) / 2)
    # Transport larger than the call cannot make time negative.
    neg = scorer.score(FakeRuntime(HONEST, seconds=0.001, transport=0.01))
    assert neg.metrics["rebalance_seconds"] == 0.0


def test_numpy_and_list_results_are_accepted(scorer: EplbScorer) -> None:
    def as_numpy(*args: Any) -> Any:
        return [x.numpy().astype(np.int32) for x in HONEST(*args)]

    a = scorer.score(FakeRuntime(as_numpy, seconds=0.01))
    b = scorer.score(FakeRuntime(HONEST, seconds=0.01))
    assert a.metrics == b.metrics


# -- validity rules ---------------------------------------------------------------------------


def _overclaim(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    # The classic hack: claim extra imaginary replicas of the hottest experts.
    c = c.clone()
    c[:, 0] += 4
    l2p = torch.cat([l2p, torch.full((*l2p.shape[:2], 4), -1, dtype=l2p.dtype)], dim=2)
    return p, l2p, c


def _underclaim(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    c = c.clone()
    e = int(c[0].argmax())
    c[0, e] -= 1
    return p, l2p, c


def _drop(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    # Give the only replica of a single-replica expert to another expert, consistently, so that
    # the replica count still adds up and only the dropped-expert rule fires.
    p, l2p, c = p.clone(), l2p.clone(), c.clone()
    victim = int((c[0] == 1).nonzero()[0])
    heir = int(c[0].argmax())
    slot = int(l2p[0, victim, 0])
    p[0, slot] = heir
    l2p[0, heir, int(c[0, heir])] = slot
    l2p[0, victim, 0] = -1
    c[0, heir] += 1
    c[0, victim] = 0
    return p, l2p, c


def _duplicate_slot(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    # List one slot twice for a replicated expert: the load of the second replica would vanish.
    l2p = l2p.clone()
    layer, e = (int(x) for x in (c >= 2).nonzero()[0])
    l2p[layer, e, 1] = l2p[layer, e, 0]
    return p, l2p, c


def _foreign_slot(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    # Swap the slots of two experts in log2phy only: counts fine, but phy2log disagrees.
    l2p = l2p.clone()
    a, b = int(l2p[0, 0, 0]), int(l2p[0, 1, 0])
    l2p[0, 0, 0], l2p[0, 1, 0] = b, a
    return p, l2p, c


def _bad_expert_id(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    p = p.clone()
    p[0, 0] = c.shape[1]
    return p, l2p, c


def _bad_slot_id(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    l2p = l2p.clone()
    l2p[0, 0, 0] = p.shape[1]
    return p, l2p, c


def _negative_slot_id(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    l2p = l2p.clone()
    l2p[0, 0, 0] = -1
    return p, l2p, c


def _bad_padding(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    l2p = l2p.clone()
    e = int((c[0] < l2p.shape[2]).nonzero()[0])
    l2p[0, e, -1] = 0
    return p, l2p, c


def _negative_count(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    c = c.clone()
    c[0, 0] = -1
    c[0, 1] += int(c[0, 0].abs()) + 1
    return p, l2p, c


def _nan_float(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    p = p.float()
    p[0, 0] = float("nan")
    return p, l2p, c


def _float_counts(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p, l2p, c.double()


def _bool_counts(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p, l2p, c > 0


def _short_phy2log(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p[:, :-1], l2p, c


def _flat_log2phy(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p, l2p[:, :, 0], c


def _narrow_log2phy(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p, l2p[:, :, :1], c


def _wrong_layer_count(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p, l2p, c[:-1]


def _two_items(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p, c


def _nested_lists(p: torch.Tensor, l2p: torch.Tensor, c: torch.Tensor) -> Any:
    return p.tolist(), l2p.tolist(), c.tolist()


HACKS: list[tuple[str, Callable[..., Any], str]] = [
    ("overclaim", _overclaim, "replica-count"),
    ("underclaim", _underclaim, "replica-count"),
    ("drop", _drop, "dropped-expert"),
    ("duplicate-slot", _duplicate_slot, "log2phy-consistency"),
    ("foreign-slot", _foreign_slot, "log2phy-consistency"),
    ("phy2log-out-of-range", _bad_expert_id, "phy2log-range"),
    ("log2phy-out-of-range", _bad_slot_id, "log2phy-range"),
    ("log2phy-negative", _negative_slot_id, "log2phy-range"),
    ("log2phy-padding", _bad_padding, "log2phy-padding"),
    ("negative-count", _negative_count, "logcnt-nonnegative"),
    ("nan", _nan_float, "finite"),
    ("float", _float_counts, "dtype"),
    ("bool", _bool_counts, "dtype"),
    ("short-phy2log", _short_phy2log, "shape"),
    ("flat-log2phy", _flat_log2phy, "shape"),
    ("narrow-log2phy", _narrow_log2phy, "shape"),
    ("wrong-layers", _wrong_layer_count, "shape"),
    ("two-items", _two_items, "tuple"),
    ("nested-lists", _nested_lists, "types"),
]


@pytest.mark.parametrize(("name", "corrupt", "rule"), HACKS, ids=[h[0] for h in HACKS])
def test_hack_is_rejected_naming_the_rule(
    scorer: EplbScorer, name: str, corrupt: Callable[..., Any], rule: str
) -> None:
    def candidate(*args: Any) -> Any:
        return corrupt(*HONEST(*args))

    with pytest.raises(CandidateInvalid, match=f"rule '{rule}'"):
        scorer.score(FakeRuntime(candidate))


def test_non_tuple_result_is_rejected(scorer: EplbScorer) -> None:
    with pytest.raises(CandidateInvalid, match="rule 'tuple'"):
        scorer.score(FakeRuntime(lambda *a: HONEST(*a)[0]))
    with pytest.raises(CandidateInvalid, match="rule 'tuple'"):
        scorer.score(FakeRuntime(lambda *a: None))


# -- data recipe --------------------------------------------------------------------------------


def _write_trace(path: Path, entries: list[list[list[int]]]) -> None:
    doc = {
        "meta": {"note": "extra keys are ignored"},
        "load_history": [{"step": i, "logical_expert_load": e} for i, e in enumerate(entries)],
    }
    path.write_text(json.dumps(doc, indent=1))


def test_load_windows_sums_consecutive_chunks(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    entries = rng.integers(0, 50, size=(7, 3, 4)).tolist()  # 7 entries of [L=3, E=4]
    _write_trace(tmp_path / "expert-load.json", entries)
    windows = load_windows(tmp_path, {"window": 3})
    assert len(windows) == 2  # the trailing single entry is dropped
    arr = np.array(entries)
    assert windows[0].tolist() == arr[0:3].sum(0).tolist()
    assert windows[1].tolist() == arr[3:6].sum(0).tolist()
    assert windows[0].dtype == torch.int64


def test_load_windows_needs_two_windows(tmp_path: Path) -> None:
    _write_trace(tmp_path / "expert-load.json", [[[1, 2]]] * 3)
    with pytest.raises(ValueError, match="need >= 2"):
        load_windows(tmp_path, {"window": 2})


def test_missing_trace_names_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError, match="bench data fetch eplb"):
        load_windows(tmp_path, {"window": 100})
    full = default_registry().get("eplb")
    s = full.load_attr(full.scorer_ref)(full, tmp_path)
    with pytest.raises(DataMissingError, match="bench data fetch eplb"):
        s.prepare()


def test_real_variant_prepares_from_a_small_trace(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    # 3 windows of 100 entries, 2 layers x 256 experts (288 slots need E <= 288, E % 8 == 0).
    entries = rng.integers(0, 20, size=(300, 2, 256)).tolist()
    _write_trace(tmp_path / "expert-load.json", entries)
    full = default_registry().get("eplb")
    s = full.load_attr(full.scorer_ref)(full, tmp_path)
    s.prepare()
    assert len(s.windows) == 3 and tuple(s.windows[0].shape) == (2, 256)
    out = s.score(FakeRuntime(HONEST, seconds=0.05))
    assert 0 < out.metrics["balancedness_expert"] <= 1


def test_synthetic_windows_are_seeded_and_drift() -> None:
    params = {"layers": 4, "experts": 32, "windows": 6, "seed": 11}
    a = synthetic_windows(params)
    b = synthetic_windows(params)
    c = synthetic_windows({**params, "seed": 12})
    assert len(a) == 6 and all(tuple(w.shape) == (4, 32) and w.dtype == torch.int64 for w in a)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    assert all(int(w.min()) >= 0 for w in a)
    assert all(int(w[layer].sum()) == 20_000 for w in a for layer in range(4))
    assert any(int((w == 0).sum()) > 0 for w in a)  # some experts idle in some windows
    assert not torch.equal(a[0].argsort(dim=1), a[-1].argsort(dim=1))  # popularity drifts
