"""API keys reach no ledger row, log record, console line, run file or sandboxed candidate."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import litellm
import pytest

from agents.pacevolve import PACEvolveAgent, PACEvolveConfig
from harness.envs.registry import default_registry
from harness.llm import litellm_module
from harness.sandbox.factory import make_backend

FAKE = {
    "OPENAI_API_KEY": "sk-test-openai-0123456789abcdefABCDEF",
    "GEMINI_API_KEY": "AIzaTestGeminiKey-0123456789abcdefghijkl",
    "ANTHROPIC_API_KEY": "test-anthropic-key-0123456789",
    "EVOBENCH_PRIVATE_TOKEN": "private-token-value-0123456789",
}


class KeyQuotingProvider(litellm.CustomLLM):  # type: ignore[misc]
    """A provider whose every error message quotes the API keys it was given."""

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        quoted = ", ".join(os.environ[k] for k in FAKE)
        raise litellm.llms.custom_llm.CustomLLMError(
            status_code=401, message=f"Incorrect API keys provided: {quoted}"
        )


@pytest.fixture
def fake_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in FAKE.items():
        monkeypatch.setenv(k, v)
    litellm_module()
    if not any(e["provider"] == "keyquote" for e in litellm.custom_provider_map):
        entry = {"provider": "keyquote", "custom_handler": KeyQuotingProvider()}
        litellm.custom_provider_map = [*litellm.custom_provider_map, entry]
    return FAKE


def test_keys_appear_in_no_record_of_a_run(
    fake_keys: dict[str, str],
    run_agent: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    config = PACEvolveConfig(
        model="keyquote/any", islands=1, max_empty_steps=2, max_retries=1, retry_backoff_s=0.0
    )
    out, run_dir = run_agent(PACEvolveAgent(config), "selftest-tiny", 5)
    assert out.info.status == "finished" and out.info.n_evaluations == 1  # every proposal failed
    ledger = (run_dir / "llm_calls.jsonl").read_text()
    assert ledger.count('"ok":false') >= 2 and "REDACTED" in ledger
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.name == "pacevolve_iterations.parquet" for p in files)
    records = [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    assert any("Incorrect API keys" in m for m in records)  # the errors were logged ...
    console = capsys.readouterr()
    for secret in fake_keys.values():  # ... but no secret anywhere
        assert not any(secret in m for m in records), secret
        assert secret not in console.out and secret not in console.err
        for p in files:
            assert secret.encode() not in p.read_bytes(), (secret, p)


PROBE = """import os

# EVOLVE-BLOCK-START
def probe():
    names = [k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN"))]
    values = set(os.environ.values())
    return {"secret_names": float(len(names)), "secret_values": float(sum(v in values for v in %r))}


# EVOLVE-BLOCK-END
"""


def test_sandboxed_candidates_see_no_key(fake_keys: dict[str, str]) -> None:
    variant = default_registry().get("selftest-tiny")
    with make_backend("local", workers=1, mode="cold") as backend:
        result = backend.evaluate(variant, PROBE % (list(fake_keys.values()),))
    assert result.status.value == "ok", result.reason
    assert result.metrics["secret_names"] == 0.0 and result.metrics["secret_values"] == 0.0
