"""A family whose code does not import is a deterministic environment error: reported at once with
the file named, never the candidate's failure and never retried as an infrastructure failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.envs.registry import Registry, Variant
from harness.envs.skeleton import write_skeleton
from harness.evaluation.result import EvalResult, Status
from harness.sandbox import remote_pool
from harness.sandbox.local import LocalBackend
from harness.sandbox.remote_pool import RemotePoolBackend, Session


def _broken_family(tmp_path: Path) -> tuple[Path, Variant]:
    """A skeleton whose scorer passes the registry's static checks but fails when imported."""
    write_skeleton("broken_fam", tmp_path)
    scorer = tmp_path / "broken_fam" / "scorer.py"
    text = scorer.read_text()
    scorer.write_text(text.replace("import math\n", "import math\n\nimport no_such_module_evobench\n", 1))
    return scorer, Registry(tmp_path, strict=True).get("broken-fam-tiny")


def test_a_scorer_that_does_not_import_is_an_environment_error_tried_once(tmp_path: Path) -> None:
    scorer, variant = _broken_family(tmp_path)
    # prewarm: the worker's initializer meets the error first and must not break the pool over it
    with LocalBackend(workers=1, infra_retries=2, env_root=str(tmp_path), prewarm=(variant.id,)) as b:
        r = b.evaluate(variant, variant.initial_program)
    assert r.status is Status.INFRA_ERROR and not r.counts_against_candidate
    assert r.attempts == 1 and r.retryable is False
    assert r.reason.startswith("environment error: family broken_fam") and str(scorer) in r.reason
    assert "no_such_module_evobench" in r.reason


class _Canned(RemotePoolBackend):
    """A remote pool whose sessions answer with a fixed result (no container or Modal needed)."""

    name = "canned"

    def __init__(self, result: EvalResult) -> None:
        super().__init__(workers=1, mode="cold", infra_retries=2)
        self.result, self.calls = result, 0

    def _start(self, variant: Variant, slot: int) -> Session:  # pragma: no cover - _once is replaced
        raise NotImplementedError

    def _once(self, variant: Variant, source: str, slot: int) -> EvalResult:
        self.calls += 1
        return self.result


@pytest.mark.sandbox  # the remote pool evaluates (through a fake client): not in the fast tier
def test_remote_pools_do_not_retry_an_environment_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, variant = _broken_family(tmp_path)
    env_error = EvalResult(
        status=Status.INFRA_ERROR,
        reason="environment error: x",
        retryable=False,
        env_id=variant.id,
        env_version=variant.version,
        env_hash=variant.hash,
        program_sha256="0",
    )
    once = _Canned(env_error)
    with once:
        assert once.evaluate(variant, "").reason == "environment error: x"
    assert once.calls == 1
    monkeypatch.setattr(remote_pool.time, "sleep", lambda _s: None)  # the backoff between retries
    transient = env_error.model_copy(update={"retryable": True, "reason": "worker died"})
    retried = _Canned(transient)
    with retried:
        assert retried.evaluate(variant, "").status is Status.INFRA_ERROR
    assert retried.calls == 3  # the check can fail: a transient infra error is still retried twice
