"""Keys never reach the ledger, logs, errors or run files; the masking itself."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
import pytest

from harness.llm import REDACTED, Ledger, LLMCallFailed, LLMClient, LLMSettings, RedactingFilter, redact

# Collected everywhere (also by `-m gpu` on GPU images without litellm): skip there, but never in
# CI, where litellm is a dependency and a missing one must fail.
if os.environ.get("CI", "").lower() == "true":
    import litellm
else:
    litellm = pytest.importorskip("litellm")

FAKE = {
    "OPENAI_API_KEY": "sk-fakeopenai0123456789abcdef",
    "GEMINI_API_KEY": "AIzaFakeGeminiKey_0123456789abcdefghijk",
    "ANTHROPIC_API_KEY": "fake-anthropic-key-9876543210",
}


@pytest.fixture
def fake_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in FAKE.items():
        monkeypatch.setenv(k, v)
    return FAKE


def test_redact_masks_env_secrets_and_key_shapes(fake_keys: dict[str, str]) -> None:
    text = (
        f"bad key {fake_keys['ANTHROPIC_API_KEY']}; sk-ABCDEFGHIJKLMNOPQRSTUV; Bearer abcdefghijklmnopqrstu"
    )
    out = redact(text)
    assert (
        fake_keys["ANTHROPIC_API_KEY"] not in out and "sk-ABCDEF" not in out and "abcdefghijklmnop" not in out
    )
    assert out.count(REDACTED) == 3
    env = {"HOME": "/root/very-long-home-dir", "MY_TOKEN": "short", "HF_TOKEN": "hf-token-value-123"}
    assert (
        redact("/root/very-long-home-dir short hf-token-value-123", env)
        == f"/root/very-long-home-dir short {REDACTED}"
    )


def test_filter_masks_message_args_and_traceback(fake_keys: dict[str, str]) -> None:
    key = fake_keys["OPENAI_API_KEY"]
    try:
        raise RuntimeError(f"rejected {key}")
    except RuntimeError:
        import sys

        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "call with %s failed", (key,), sys.exc_info()
        )
    RedactingFilter().filter(record)
    assert key not in record.getMessage() and key not in (record.exc_text or "")
    assert record.exc_info is None and "RuntimeError" in (record.exc_text or "")


def test_a_failing_call_quoting_the_key_leaks_it_nowhere(
    fake_keys: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    key = fake_keys["GEMINI_API_KEY"]
    errors = [
        litellm.AuthenticationError(message=f"API key not valid: {key}", llm_provider="gemini", model="m"),
        Exception(f"upstream said: key={key} is revoked"),  # becomes a (transient) 500 MockException
    ]
    for n, error in enumerate(errors):
        c = LLMClient(
            {"advisor": "gemini/gemini-2.5-pro"},
            LLMSettings(max_retries=1, backoff_s=0, params={"mock_response": error}),
            ledger=Ledger(tmp_path / f"run{n}"),
        )
        with pytest.raises(LLMCallFailed) as info:
            c.complete("advisor", [{"role": "user", "content": "hi"}])
        assert key not in str(info.value) and "REDACTED" in str(info.value)  # litellm masks some itself
        rows = c.ledger.rows()
        assert rows and all(key not in r.model_dump_json() for r in rows) and "REDACTED" in rows[0].error
        c.ledger.flush()
        df = pd.read_parquet(tmp_path / f"run{n}" / "llm_calls.parquet")
        assert not df.astype(str).apply(lambda col: col.str.contains(key, regex=False)).any().any()
    for record in caplog.records:
        assert key not in record.getMessage() and key not in (record.exc_text or "")
    captured = capsys.readouterr()
    assert key not in captured.out and key not in captured.err
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
