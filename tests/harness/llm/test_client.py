"""LLMClient on litellm's mock responses: ledger rows, retries, cost cap, cache, key checks."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from harness.llm import (
    KIND_LLM,
    Ledger,
    LLMCallFailed,
    LLMClient,
    LLMConfigError,
    LLMSettings,
    litellm_module,
)
from harness.runner.context import BudgetExhausted

# Collected everywhere (also by `-m gpu` on GPU images without litellm): skip there, but never in
# CI, where litellm is a dependency and a missing one must fail.
if os.environ.get("CI", "").lower() == "true":
    import litellm
else:
    litellm = pytest.importorskip("litellm")

MODEL = "gemini/gemini-2.5-pro"
MSGS = [{"role": "user", "content": "hello"}]
# litellm's bundled price of gemini-2.5-pro; mock responses report 10 prompt and 20 completion tokens
COST = 10 * 1.25e-6 + 20 * 1e-5


def client(tmp_path: Path | None, sleeps: list[float] | None = None, **settings: object) -> LLMClient:
    s = LLMSettings(**settings)  # type: ignore[arg-type]
    sink = sleeps if sleeps is not None else []
    return LLMClient({"advisor": MODEL}, s, ledger=Ledger(tmp_path), sleep=sink.append)


def test_successful_call_is_one_ledger_row_with_cost_from_the_local_cost_map(tmp_path: Path) -> None:
    c = client(tmp_path, params={"mock_response": "an answer"})
    seen = []
    c.add_listener(seen.append)
    r = c.complete("advisor", MSGS, seed=3, stage="idea_generation", step=2, thread=1)
    assert (r.text, r.tokens_in, r.tokens_out, r.cache_hit, r.offline, r.attempts) == (
        "an answer",
        10,
        20,
        False,
        False,
        1,
    )
    assert r.cost_usd == pytest.approx(COST)
    assert c.ledger.flush() == 1
    df = pd.read_parquet(tmp_path / "llm_calls.parquet")
    row = df.iloc[0]
    assert (row.role, row.model, row.kind, row.stage, row.step, row.thread) == (
        "advisor", MODEL, KIND_LLM, "idea_generation", 2, 1,
    )  # fmt: skip
    assert (row.tokens_in, row.tokens_out, bool(row.ok), bool(row.cache_hit), row.error) == (
        10,
        20,
        True,
        False,
        "",
    )
    assert row.cost_usd == pytest.approx(COST) and bool(row.cost_known) and row.latency_s >= 0
    assert len(row.request_sha256) == 64 and row.response_chars == len("an answer")
    assert [s.call_id for s in seen] == [row.call_id]
    assert c.ledger.cost_usd == pytest.approx(COST) and c.ledger.calls == 1


def test_transient_errors_are_retried_with_backoff_then_fail(tmp_path: Path) -> None:
    sleeps: list[float] = []
    c = client(
        tmp_path, sleeps, max_retries=3, backoff_s=1.0, params={"mock_response": "litellm.RateLimitError"}
    )
    with pytest.raises(LLMCallFailed) as info:
        c.complete("advisor", MSGS, seed=1)
    assert info.value.transient and info.value.error_type == "RateLimitError"
    rows = c.ledger.rows()
    assert [r.attempt for r in rows] == [0, 1, 2, 3]
    assert all(not r.ok and r.transient and r.error_type == "RateLimitError" for r in rows)
    assert len(sleeps) == 3
    for k, s in enumerate(sleeps):
        assert 0.75 * 2**k <= s <= 1.25 * 2**k


def test_permanent_errors_are_not_retried(tmp_path: Path) -> None:
    error = litellm.AuthenticationError(message="invalid key", llm_provider="gemini", model=MODEL)
    sleeps: list[float] = []
    c = client(tmp_path, sleeps, params={"mock_response": error})
    with pytest.raises(LLMCallFailed) as info:
        c.complete("advisor", MSGS)
    assert not info.value.transient and info.value.__context__ is None and info.value.__cause__ is None
    assert len(c.ledger.rows()) == 1 and sleeps == []


class _Flaky(litellm.CustomLLM):  # type: ignore[misc]
    """Fails with a 503 twice, then answers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def completion(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        if self.calls <= 2:
            raise litellm.llms.custom_llm.CustomLLMError(status_code=503, message="overloaded")
        response = kwargs["model_response"]
        response.choices[0].message.content = "finally"  # type: ignore[attr-defined]
        return response


def test_a_transient_failure_then_success(tmp_path: Path) -> None:
    litellm_module()
    flaky = _Flaky()
    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": "flakytest", "custom_handler": flaky},
    ]
    sleeps: list[float] = []
    c = LLMClient(
        {"advisor": "flakytest/x"}, LLMSettings(max_retries=3), ledger=Ledger(None), sleep=sleeps.append
    )
    r = c.complete("advisor", MSGS)
    assert r.text == "finally" and r.attempts == 3 and len(sleeps) == 2
    assert [row.ok for row in c.ledger.rows()] == [False, False, True]


def test_cost_cap_stops_cleanly_and_survives_a_restart(tmp_path: Path) -> None:
    c = client(tmp_path, max_cost_usd=1.5 * COST, params={"mock_response": "x"})
    c.complete("advisor", MSGS)
    c.complete("advisor", MSGS)  # 1 x COST < cap before the call
    with pytest.raises(BudgetExhausted, match="cost cap"):
        c.complete("advisor", MSGS)
    assert len(c.ledger.rows()) == 2
    again = client(tmp_path, max_cost_usd=1.5 * COST, params={"mock_response": "x"})
    assert again.ledger.cost_usd == pytest.approx(2 * COST)
    with pytest.raises(BudgetExhausted):
        again.complete("advisor", MSGS)


def test_cache_answers_identical_requests_for_free(tmp_path: Path) -> None:
    c = client(None, cache_dir=tmp_path / "cache", params={"mock_response": "cached text"})
    first = c.complete("advisor", MSGS, seed=4)
    second = c.complete("advisor", MSGS, seed=4)
    third = c.complete("advisor", MSGS, seed=5)
    assert (first.cache_hit, second.cache_hit, third.cache_hit) == (False, True, False)
    assert second.text == "cached text" and second.cost_usd == 0.0 and second.tokens_in == 10
    rows = c.ledger.rows()
    assert [r.cache_hit for r in rows] == [False, True, False] and rows[1].cost_usd == 0.0
    assert rows[0].request_sha256 == rows[1].request_sha256 != rows[2].request_sha256


def test_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LLMConfigError, match="credential"):
        LLMClient({"advisor": MODEL}, LLMSettings(params={"api_key": "sk-x"}))
    with pytest.raises(LLMConfigError, match="no model"):
        LLMClient({"advisor": ""})
    c = LLMClient({"advisor": MODEL, "implementer": "offline/pacevolve"})
    with pytest.raises(LLMConfigError, match="role 'critic'"):
        c.complete("critic", MSGS)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="GEMINI_API_KEY"):
        c.check_environment()
    monkeypatch.setenv("GEMINI_API_KEY", "fake-gemini-key-123456")
    c.check_environment()
    LLMClient({"advisor": "offline/pacevolve"}).check_environment()
