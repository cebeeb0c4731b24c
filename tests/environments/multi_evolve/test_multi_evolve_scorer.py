"""MultiEvolveScorer with an in-process fake runtime: metrics, validity rules, what the candidate sees."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import random
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from environments.multi_evolve.data import synthetic_assays, write_synthetic_csv
from environments.multi_evolve.mutations import operators
from environments.multi_evolve.scorer import (
    ENTRY,
    MultiEvolveScorer,
    pearson_r,
    top_k,
    top_precision,
    validate_predictions,
)
from harness.envs.data import DataMissingError, require_data
from harness.envs.registry import Variant, default_registry
from harness.evaluation.errors import CandidateInvalid
from harness.scoring.api import CallResult, ExecResult

REPO = Path(__file__).resolve().parents[3]
INITIAL = REPO / "environments" / "multi_evolve" / "initial_program.py"
BENCH = [sys.executable, "-m", "evobench.cli.main"]


def _load_program(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 - trusted test programs
    return module


def _load_initial() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("multi_evolve_initial_for_scorer", INITIAL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INITIAL_MODULE = _load_initial()


DRIVER = _load_program(
    (REPO / "environments" / "multi_evolve" / "inside" / "driver.py").read_text(), "multi_evolve_driver"
)


class FakeRuntime:
    """Runs the real sandbox driver in-process on a ``fit_and_predict``, recording every call."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.candidate = types.SimpleNamespace(fit_and_predict=fn)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def transport_seconds(self, *args: Any, repeats: int = 5) -> float:
        return 0.0

    @property
    def source(self) -> str:
        return ""

    def call(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        raise AssertionError("the scorer must go through the sandbox driver")

    def call_driver(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        self.calls.append((function, args))
        return CallResult(value=getattr(DRIVER, function)(self.candidate, *args), seconds=0.01)

    def run(self, argv: list[str], stdin: bytes = b"", **_: Any) -> ExecResult:
        raise NotImplementedError

    @property
    def workdir(self) -> Path:
        return Path(".")

    def remaining(self) -> float:
        return 60.0


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("multi-evolve-tiny")


@pytest.fixture(scope="module")
def scorer(tiny: Variant) -> MultiEvolveScorer:
    # The public draw the bounds were measured on (the secret-keyed one: test_multi_evolve_heldout).
    public = dataclasses.replace(tiny, scorer_params={**tiny.scorer_params, "heldout": "public"})
    s = MultiEvolveScorer(public, Path("/nonexistent"))
    s.prepare()
    return s


# -- metric definitions -------------------------------------------------------------------------


def test_top_k_is_five_percent_rounded_up() -> None:
    expected = {0: 0, 1: 1, 19: 1, 20: 1, 21: 2, 40: 2, 41: 3, 60: 3, 200: 10, 201: 11}
    assert {n: top_k(n, 0.05) for n in expected} == expected
    assert top_k(10, 0.25) == 3


def test_pearson_matches_numpy_and_handles_degenerate_inputs() -> None:
    rng = np.random.default_rng(0)
    t, p = rng.normal(size=50), rng.normal(size=50)
    assert pearson_r(t, p) == pytest.approx(np.corrcoef(t, p)[0, 1], abs=1e-12)
    assert pearson_r(t, 3 * t + 1) == pytest.approx(1.0)
    assert pearson_r(t, -t) == pytest.approx(-1.0)
    # Constant predictions (or a constant truth): r is undefined and defined as 0, deterministically.
    assert pearson_r(t, np.full(50, 7.0)) == 0.0
    assert pearson_r(t, np.full(50, 1e300)) == 0.0
    assert pearson_r(t, np.full(50, 0.3) + 1e-14 * rng.normal(size=50)) == 0.0
    assert pearson_r(np.ones(50), p) == 0.0
    assert pearson_r(t[:1], p[:1]) == 0.0
    # Huge but finite predictions do not overflow into NaN.
    assert pearson_r(t, t * 1e300) == pytest.approx(1.0)
    # The constant threshold is absolute (as in the reference): a spread below 1e-12 counts as flat.
    assert pearson_r(t, t * 1e-9) == pytest.approx(1.0)
    assert pearson_r(t, t * 1e-300) == 0.0


def test_top_precision_counts_overlap_and_breaks_ties_by_row() -> None:
    truth = np.arange(40, dtype=float)  # k = 2: rows 39 and 38 are the best
    assert top_precision(truth, truth) == 1.0
    assert top_precision(truth, -truth) == 0.0
    pred = np.zeros(40)
    pred[39] = 1.0
    assert top_precision(truth, pred) == 0.5  # row 39, then the tie among the rest goes to row 0
    assert top_precision(truth, np.zeros(40)) == 0.0  # all tied: rows 0 and 1
    flat = np.zeros(40)
    assert top_precision(flat, flat) == 1.0  # both pick rows 0 and 1


def test_validate_predictions_rules() -> None:
    assert validate_predictions([1, 2.5, -3], 3).tolist() == [1.0, 2.5, -3.0]
    assert validate_predictions(np.arange(3, dtype=np.int32), 3).dtype == np.float64
    cases: list[tuple[Any, str]] = [
        (np.array([1.0, np.nan, 2.0]), "finite"),
        ([1.0, float("inf"), 2.0], "finite"),
        ([1.0, 10**400, 2.0], "finite"),
        (np.ones(2), "length"),
        (np.ones(4), "length"),
        (np.ones((3, 1)), "shape"),
        (np.array([True, False, True]), "types"),
        ([1.0, True, 2.0], "types"),
        ([1.0, "2", 3.0], "types"),
        ([1.0, None, 3.0], "types"),
        ([[1.0], [2.0], [3.0]], "types"),
        ({"a": 1}, "types"),
        ("1,2,3", "types"),
        (None, "types"),
    ]
    for value, rule in cases:
        with pytest.raises(CandidateInvalid, match=f"rule '{rule}'"):
            validate_predictions(value, 3)
    torch = pytest.importorskip("torch")
    assert validate_predictions(torch.tensor([1.0, 2.0, 3.0]), 3).tolist() == [1.0, 2.0, 3.0]


# -- the scorer end to end (fake runtime) -------------------------------------------------------


def test_candidate_receives_no_labels_and_no_dataset_id(scorer: MultiEvolveScorer) -> None:
    rt = FakeRuntime(INITIAL_MODULE.fit_and_predict)
    scorer.score(rt)
    assert len(rt.calls) == len(scorer.assays) == 2
    for (function, args), assay in zip(rt.calls, scorer.assays, strict=True):
        assert function == ENTRY == "predict"
        train, test, context = args
        assert set(test) == {"mutant", "num_mutations"}  # no fitness, no bin, no id
        assert set(train) == {"mutant", "num_mutations", "fitness"}
        assert set(context) == {
            "target_seq",
            "seq_len",
            "max_train_mutations",
            "min_test_mutations",
            "max_test_mutations",
        }
        assert assay.name not in json.dumps(context) and "synthetic" not in json.dumps(context)
        # No number sent anywhere equals a test label's bit pattern.
        sent = np.concatenate([np.asarray(train["fitness"], dtype=float)])
        assert not np.isin(assay.truth, sent).any()
        assert len(test["mutant"]) == assay.truth.size


def test_initial_program_extrapolates_on_the_synthetic_landscape(scorer: MultiEvolveScorer) -> None:
    out = scorer.score(FakeRuntime(INITIAL_MODULE.fit_and_predict))
    assert out.metrics["pearson_r"] > 0.7
    for i in range(len(scorer.assays)):
        assert out.metrics[f"pearson_r_{i}"] > 0.7
    assert out.score == pytest.approx(0.7 * out.metrics["pearson_r"] + 0.3 * out.metrics["precision_top5"])
    assert out.score == out.metrics["combined"]
    assert [c.name for c in out.cases] == [f"assay{i}" for i in range(len(scorer.assays))]
    assert sum(c.score or 0.0 for c in out.cases) / len(out.cases) == pytest.approx(out.score)
    # The manifest's tiny y_init is this score (update both together).
    assert out.score == pytest.approx(default_registry().get("multi-evolve-tiny").progress.y_init, abs=5e-4)


def test_initial_program_r_above_0_7_on_other_seeds() -> None:
    for seed in (1, 2, 3):
        for assay in synthetic_assays({"seed": seed, "assays": 2}):
            pred = DRIVER.predict(INITIAL_MODULE, assay.train, assay.test, assay.context)
            assert pearson_r(assay.truth, pred) > 0.7, seed


def test_perfect_and_constant_predictions(scorer: MultiEvolveScorer) -> None:
    it = iter([a.truth.copy() for a in scorer.assays])
    out = scorer.score(FakeRuntime(lambda *a: next(it)))  # an oracle (impossible in the sandbox)
    assert out.score == pytest.approx(1.0)
    out = scorer.score(FakeRuntime(lambda tr, te, ctx: np.zeros(len(te["mutant"]))))
    assert out.metrics["pearson_r"] == 0.0 and out.score == pytest.approx(0.3 * out.metrics["precision_top5"])


@pytest.mark.parametrize(
    ("fn", "rule"),
    [
        (lambda tr, te, ctx: np.full(len(te["mutant"]), np.nan), "finite"),
        (lambda tr, te, ctx: np.zeros(len(te["mutant"]) - 1), "length"),
        (lambda tr, te, ctx: np.zeros(len(te["mutant"]) + 1), "length"),
        (lambda tr, te, ctx: [str(x) for x in range(len(te["mutant"]))], "types"),
        (lambda tr, te, ctx: None, "types"),
    ],
)
def test_invalid_outputs_are_rejected(scorer: MultiEvolveScorer, fn: Callable[..., Any], rule: str) -> None:
    with pytest.raises(CandidateInvalid, match=f"rule '{rule}'"):
        scorer.score(FakeRuntime(fn))


def test_mutation_operators_apply_and_keep_the_program_working(scorer: MultiEvolveScorer) -> None:
    source = INITIAL.read_text()
    rng = random.Random(0)
    for op in operators():
        for _ in range(3):
            mutated = op.apply(source, rng, "python")
            assert mutated is not None and mutated != source, op.name
            module = _load_program(mutated, f"mutated_{op.name}")
            out = scorer.score(FakeRuntime(module.fit_and_predict))
            assert out.metrics["pearson_r"] > 0.5, op.name


# -- manifest, data sources, real variants without and with data --------------------------------


def test_manifest_ids_prefix_and_data_sources() -> None:
    reg = default_registry()
    lite, full, tiny = (reg.get(f"multi-evolve-{s}") for s in ("lite", "full", "tiny"))
    assert lite.family == full.family == tiny.family == "multi_evolve"
    assert [v.id for v in reg.family_of("multi-evolve")] == [v.id for v in reg.family_of("multi_evolve")]
    assert tiny.tiny and not tiny.data and not lite.tiny
    assert len(lite.data) == 5 and len(full.data) == 12
    assert {k for k, _ in lite.data} <= {k for k, _ in full.data}
    for key, src in full.data:
        assert src.filename == f"{key}.csv" and not src.files
        assert src.sha256 == ""  # unpinned on purpose (see env.toml)
        assert "zenodo.org/records/17620759/files/" in src.url and src.license
    assert lite.entry_point == "fit_and_predict" and lite.signature.startswith("fit_and_predict(")
    assert "_entry" not in lite.signature and "def predict(" in lite.sandbox_driver
    assert "pandas" in tiny.preload  # the driver's import is paid once per sandbox, not per call


def test_real_variants_without_data_name_the_fetch_command(tmp_path: Path) -> None:
    for vid in ("multi-evolve-lite", "multi-evolve-full"):
        v = default_registry().get(vid)
        s = MultiEvolveScorer(v, tmp_path)
        with pytest.raises(DataMissingError, match="bench data fetch multi_evolve"):
            s.prepare()


def test_bench_eval_without_data_fails_naming_fetch(tmp_path: Path) -> None:
    env = {**os.environ, "EVOBENCH_DATA": str(tmp_path / "empty-cache")}
    for vid in ("multi-evolve-lite", "multi-evolve-full"):
        r = subprocess.run(
            [*BENCH, "eval", "--env", vid, str(INITIAL)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert r.returncode == 2, r.stdout + r.stderr
        assert "bench data fetch multi_evolve" in r.stderr.replace("\n", "")
    r = subprocess.run(
        [*BENCH, "data", "status", "multi-evolve"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    assert "multi_evolve/GFP_AEQVI_Sarkisyan_2016" in r.stdout and "unpinned" in r.stdout


def test_data_fetch_by_prefix_then_lite_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench data fetch multi-evolve` resolves the family; a fake download serves synthetic CSVs."""
    from evobench.cli import commands_info
    from harness.envs import data as envdata

    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    urls: list[str] = []

    def fake_download(url: str, dest: Path) -> None:
        urls.append(url)
        write_synthetic_csv(dest, {"seed": len(urls), "sites": 12, "test_size": 60})

    real_fetch = envdata.fetch_source
    monkeypatch.setattr(
        commands_info, "fetch_source", lambda fam, src: real_fetch(fam, src, download=fake_download)
    )
    assert commands_info.data("fetch", "multi-evolve") == 0
    assert len(urls) == 12  # every assay of every variant, each once
    recorded = json.loads((tmp_path / "cache" / "multi_evolve" / "recorded_sha256.json").read_text())
    assert len(recorded) == 12 and all(len(h) == 64 for h in recorded.values())

    lite = default_registry().get("multi-evolve-lite")
    cache = require_data(lite)
    s = MultiEvolveScorer(lite, cache)
    s.prepare()
    assert len(s.assays) == 5 and [a.name for a in s.assays] == [k for k, _ in lite.data]
    out = s.score(FakeRuntime(INITIAL_MODULE.fit_and_predict))
    assert out.metrics["pearson_r"] > 0.5 and set(out.metrics) >= {"combined", "precision_top5_4"}
