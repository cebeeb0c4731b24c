"""De-quantised GGUF policies kept as safetensors: the slow conversion once, then plain loads.

transformers de-quantises a GGUF file in Python on every load (SmolLM2-135M's Q4_1 file: ~20-30 s
of CPU on the 2-core machine), and every ``bench run`` with a GGUF policy loads it again. The
first load writes the fp32 weights (safetensors, no pickle), the config and the tokenizer under
``$EVOBENCH_MODEL_CACHE`` (default ``~/.cache/evobench/models``), in a directory named by the GGUF
file's sha256 and the transformers version that converted it; later loads read that directory.
It is written to a temporary name and renamed when complete, so an interrupted write is never
read; an unusable cache entry is converted again.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.envs.data import sha256_file

log = logging.getLogger(__name__)

CACHE_ENV = "EVOBENCH_MODEL_CACHE"
Loader = Callable[[str, "str | None"], tuple[Any, Any]]
"""``(source, gguf_file or None) -> (model, tokenizer)``."""


def cache_root() -> Path:
    """``$EVOBENCH_MODEL_CACHE`` or ``~/.cache/evobench/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "evobench" / "models"


def cache_dir(gguf: Path) -> Path:
    """Where the de-quantised copy of ``gguf`` lives (content and converter in the name)."""
    import transformers

    return cache_root() / f"{gguf.stem}-{sha256_file(gguf)[:16]}-transformers{transformers.__version__}"


def load_gguf(gguf: Path, load: Loader) -> tuple[Any, Any]:
    """The model and tokenizer of ``gguf``, from the cache when a complete copy is there.

    Args:
        gguf: The ``.gguf`` file.
        load: Loads ``(source, gguf_file)``; called with the cache directory and None for a copy.

    Raises:
        Whatever ``load`` raises for the GGUF file itself (a broken cache entry is not an error).
    """
    d = cache_dir(gguf)
    if (d / "complete").is_file():
        try:
            return load(str(d), None)
        except Exception as e:  # any unusable copy is converted again
            log.warning("model cache %s is unusable (%s); converting %s again", d, e, gguf.name)
    model, tok = load(str(gguf.parent), gguf.name)
    _store(d, model, tok)
    return model, tok


def _save_plain(model: Any, d: Path) -> None:
    """The de-quantised weights as ``model.safetensors`` and the config without its GGUF record.

    ``save_pretrained`` refuses a GGUF-loaded model (its quantizer is "not serializable") although
    its weights are plain fp32 by then; tied weights are written once (``save_model``).
    """
    import copy

    from safetensors.torch import save_model

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(d)
    save_model(model, str(d / "model.safetensors"))


def _store(d: Path, model: Any, tok: Any) -> None:
    """Write ``model`` and ``tok`` to ``d`` atomically; a failure only costs the next load time."""
    tmp = d.parent / f".{d.name}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        tmp.mkdir(parents=True)
        _save_plain(model, tmp)
        tok.save_pretrained(tmp)
        (tmp / "complete").write_text("ok\n", encoding="ascii")
        if d.exists():  # an unusable copy, or one a concurrent first load just finished
            old = d.parent / f".{d.name}.old.{os.getpid()}.{secrets.token_hex(4)}"
            os.rename(d, old)  # readers that opened its files keep them
            shutil.rmtree(old, ignore_errors=True)
        os.rename(tmp, d)
    except OSError as e:
        log.warning("could not cache the de-quantised model in %s: %s", d, e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
