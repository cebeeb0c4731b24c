"""KuaiRec through the real sandbox: the initial program, determinism, signal, full-variant errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from environments.kuairec.data import split, synthetic_sequences
from environments.kuairec.metrics import ranking_metrics, ranks
from harness.envs.registry import default_registry
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend

REPO = Path(__file__).resolve().parents[3]


def test_popularity_beats_random_on_the_tiny_data() -> None:
    p = default_registry().get("kuairec-tiny").scorer_params
    seqs = synthetic_sequences(
        users=p["users"], items=p["items"], factors=p["factors"], min_len=p["min_len"], max_len=p["max_len"],
        drift=p["drift"], temperature=p["data_temperature"], seed=p["data_seed"],
    )  # fmt: skip
    s = split(seqs)
    n = s.train.num_items
    counts = np.bincount(s.train.items, minlength=n + 1).astype(float)
    angle = counts / counts.max() * (np.pi / 2)  # cosine with (1, 0) is monotone in popularity
    emb = np.stack([np.sin(angle), np.cos(angle)], 1)
    reps = np.tile([1.0, 0.0], (s.train.num_users, 1))
    th = s.test_history
    pop = ranking_metrics(ranks(reps, emb, th.offsets, th.items, s.test_target))["combined"]
    rng = np.random.default_rng(0)
    rand = np.mean([
        ranking_metrics(ranks(rng.normal(size=(s.train.num_users, 8)), rng.normal(size=(n + 1, 8)),
                              th.offsets, th.items, s.test_target))["combined"]
        for _ in range(5)
    ])  # fmt: skip
    assert pop > 2 * rand, (pop, rand)


@pytest.fixture(scope="module")
def results() -> list:
    v = default_registry().get("kuairec-tiny")
    with LocalBackend(workers=2, mode="warm") as b:
        return b.evaluate_many(v, [v.initial_program, v.initial_program])


def test_initial_program_is_scored_with_all_metrics(results: list) -> None:
    r = results[0]
    assert r.status is Status.OK, r.reason
    for k in ("combined", "ndcg@10", "hr@10", "mrr", "ndcg@50", "hr@50", "val_combined", "epoch"):
        assert k in r.metrics and np.isfinite(r.metrics[k])
    assert r.score == pytest.approx(r.metrics["combined"])
    assert 1 <= r.metrics["epoch"] <= 2
    # It learns: clearly above random ranking (about 0.012 here).
    assert r.score > 0.02


def test_deterministic_on_cpu(results: list) -> None:
    a, b = results
    keys = [k for k in a.metrics if not k.endswith("_seconds")]
    assert {k: a.metrics[k] for k in keys} == {k: b.metrics[k] for k in keys}


def test_full_variant_fails_fast_without_data(tmp_path: Path) -> None:
    prog = tmp_path / "p.py"
    prog.write_text(default_registry().get("kuairec").initial_program)
    env = {"EVOBENCH_DATA": str(tmp_path / "empty"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, "-m", "evobench.cli.main", "eval", "--env", "kuairec", str(prog)],
        capture_output=True, text=True, timeout=120, env=env, cwd=REPO,
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert "bench data fetch kuairec" in p.stderr + p.stdout


@pytest.mark.docker
def test_tiny_initial_program_in_docker() -> None:
    from tests.harness.sandbox.docker_support import docker_client_or_skip, require_image

    v = default_registry().get("kuairec-tiny")
    require_image(docker_client_or_skip(), v)
    from harness.sandbox.docker_backend import DockerBackend

    with DockerBackend(workers=1, mode="warm") as b:
        r = b.evaluate(v, v.initial_program)
    assert r.status is Status.OK, r.reason
    assert {"ndcg@10", "hr@10", "mrr"} <= set(r.metrics)
    json.dumps(r.metrics)


def test_full_variant_refuses_a_machine_without_its_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from environments.kuairec.scorer import KuaiRecScorer
    from harness.evaluation.errors import InfraError

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv("EVOBENCH_GPU_OVERRIDE", raising=False)
    scorer = KuaiRecScorer(default_registry().get("kuairec"), tmp_path)
    with pytest.raises(InfraError, match="needs an NVIDIA H100 SXM GPU; no CUDA GPU is visible"):
        scorer.prepare()  # before any data is read


BATCH_NORM = """
_Base = Recommender


class Recommender(_Base):
    def __init__(self, num_items, dim, max_seq_len):
        super().__init__(num_items, dim, max_seq_len)
        self.norm = nn.BatchNorm1d(dim)
"""


def test_batch_norm_running_statistics_may_change_in_training() -> None:
    """Buffers are constants (issue 30): the trusted trainer restores their build-time values before
    every step, so batch norm's running statistics never accumulate; the driver's in-process check
    leaves torch's own batch-norm statistics alone, so such a model still trains and is scored."""
    v = default_registry().get("kuairec-tiny")
    with LocalBackend(workers=1, mode="warm") as b:
        r = b.evaluate(v, v.initial_program + BATCH_NORM)
    assert r.status is Status.OK, r.reason
    assert r.score is not None and r.score > 0.0
