"""Regex-constrained decoding with xgrammar (the library vLLM's structured outputs use).

A constraint is a regular expression over the completion's text (xgrammar's regex dialect).
:func:`constrainer_for` returns one :class:`Constrainer` per tokenizer and vocabulary size (the
``TokenizerInfo`` and ``GrammarCompiler`` are built once; compiled grammars are cached per
regex). A :class:`Matcher` follows one completion while it is sampled: :meth:`Matcher.allowed`
is the boolean mask of tokens the grammar allows next, and EOS is in it only when the text so
far is a complete match. :meth:`Constrainer.replay` rebuilds the per-position masks of a
finished token sequence, so the learner masks exactly the logits the sampler masked and both
sides compute ``log_softmax(mask(logits) / T)``.

The mask has the model's vocabulary size (rows of ``lm_head``), which may exceed the
tokenizer's: tokens the tokenizer does not know are never allowed under a constraint.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

_BITS = torch.arange(32, dtype=torch.int32)


class ConstraintError(ValueError):
    """A token sequence leaves its constraint, or a regex does not compile."""


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Xgrammar's packed int32 bitmask ``[B, ceil(V / 32)]`` as a bool tensor ``[B, V]``."""
    bits = (bitmask[:, :, None] >> _BITS) & 1
    return bits.bool().reshape(bitmask.shape[0], -1)[:, :vocab_size]


class Matcher:
    """The grammar state of one completion being sampled."""

    def __init__(self, constrainer: Constrainer, regex: str) -> None:
        """Start matching ``regex`` from the empty string.

        Raises:
            ConstraintError: If the regex does not compile.
        """
        import xgrammar as xgr

        self._xgr = xgr
        self.vocab_size = constrainer.vocab_size
        self._matcher = xgr.GrammarMatcher(constrainer.compiled(regex))
        self._bitmask = xgr.allocate_token_bitmask(1, self.vocab_size)

    def allowed(self) -> torch.Tensor:
        """Bool mask ``[V]`` of the tokens the grammar allows next (EOS only on a complete match)."""
        self._matcher.fill_next_token_bitmask(self._bitmask, 0)
        return unpack_bitmask(self._bitmask, self.vocab_size)[0]

    def accept(self, token: int) -> None:
        """Advance by one token.

        Raises:
            ConstraintError: If the grammar does not allow ``token`` here.
        """
        if not self._matcher.accept_token(int(token)):
            raise ConstraintError(f"token {token} is not allowed by the constraint here")

    @property
    def terminated(self) -> bool:
        """Whether the grammar has consumed its stop token (no further token is allowed)."""
        return bool(self._matcher.is_terminated())


class Constrainer:
    """Compiles regex constraints for one tokenizer (see the module docstring).

    Args:
        tokenizer: A Hugging Face tokenizer.
        vocab_size: The model's vocabulary size (``lm_head`` rows); at least the tokenizer's.
        stop_token_ids: Ids that end a completion (default: the tokenizer's EOS).

    Raises:
        ImportError: If xgrammar is not installed (``pip install 'evobench[rl]'``).
    """

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: Sequence[int] | None = None) -> None:
        """Build the tokenizer info and the compiler."""
        import xgrammar as xgr

        self.vocab_size = int(vocab_size)
        stops = list(stop_token_ids) if stop_token_ids is not None else None
        self.info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=self.vocab_size, stop_token_ids=stops
        )
        self._compiler = xgr.GrammarCompiler(self.info, max_threads=1)
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    def compiled(self, regex: str) -> Any:
        """The compiled grammar of ``regex`` (cached).

        Raises:
            ConstraintError: If the regex does not compile.
        """
        with self._lock:
            found = self._compiled.get(regex)
            if found is None:
                try:
                    found = self._compiler.compile_regex(regex)
                except (RuntimeError, ValueError) as e:
                    raise ConstraintError(f"cannot compile constraint {regex[:80]!r}: {e}") from None
                self._compiled[regex] = found
            return found

    def matcher(self, regex: str) -> Matcher:
        """A fresh matcher for ``regex``.

        Raises:
            ConstraintError: If the regex does not compile.
        """
        return Matcher(self, regex)

    def replay(self, regex: str, tokens: Sequence[int]) -> torch.Tensor:
        """Masks ``[len(tokens), V]`` the sampler applied before drawing each token.

        Raises:
            ConstraintError: If a token was not allowed where it stands (the sampler did not use
                this constraint, or the two sides disagree about the grammar).
        """
        m = self.matcher(regex)
        out = torch.zeros(len(tokens), self.vocab_size, dtype=torch.bool)
        for j, t in enumerate(tokens):
            out[j] = m.allowed()
            if not bool(out[j, int(t)]):
                raise ConstraintError(f"completion token {j} ({t}) leaves the constraint {regex[:80]!r}")
            m.accept(int(t))
        return out


_CACHE: dict[tuple[int, int], tuple[Any, Constrainer]] = {}
_CACHE_LOCK = threading.Lock()


def constrainer_for(tokenizer: Any, vocab_size: int) -> Constrainer:
    """The shared :class:`Constrainer` of a tokenizer object and vocabulary size.

    Raises:
        ImportError: If xgrammar is not installed.
    """
    key = (id(tokenizer), int(vocab_size))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] is tokenizer:
            return hit[1]
        made = Constrainer(tokenizer, vocab_size)
        _CACHE[key] = (tokenizer, made)  # the tokenizer is kept alive so its id is not reused
        return made
