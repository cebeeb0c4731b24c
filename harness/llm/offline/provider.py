"""The offline proposer: model strings ``offline/<name>``. NOT an LLM.

``LLMClient`` answers these directly (:func:`offline_completion`, no litellm import: ~7 s per
process); litellm also knows them as a custom provider, for callers that go through litellm.

``offline/<name>`` routes a chat request to the responder registered under ``<name>`` with
:func:`register_offline_proposer`. The responder reads the prompt through the convention of
:mod:`harness.llm.offline.prompt` and answers the stage in the format it asks for, with code
edits drawn from the environment's mutation operators (:mod:`harness.llm.offline.tools`).

Answers are deterministic: the random generator of each request is seeded from the responder
name, the request's ``seed`` parameter and the messages, so the same request always gets the
same answer and a resumed run repeats its interrupted step exactly.

Every response is labelled: its ``model`` is ``offline/<name>``, its ``system_fingerprint`` is
``offline-proposer-not-an-llm`` and its hidden parameters carry ``not_an_llm=True`` (the ledger
then records ``kind = offline-proposer (not an LLM)``). Token counts are estimates (characters /
4) and the cost is 0.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import threading
from collections.abc import Callable
from typing import Any

from .prompt import OfflinePrompt, parse_offline_prompt

Responder = Callable[[OfflinePrompt, random.Random], str]
"""``responder(prompt, rng) -> response text`` for one named offline proposer."""
FINGERPRINT = "offline-proposer-not-an-llm"
"""``system_fingerprint`` of every offline response."""
PROVIDER = "offline"
"""litellm provider name (the part of the model string before the slash)."""

_lock = threading.Lock()
_RESPONDERS: dict[str, Responder] = {}


def register_offline_proposer(name: str, responder: Responder) -> None:
    """Serve ``offline/<name>`` with ``responder`` (replacing an earlier one of that name).

    Args:
        name: The part of the model string after ``offline/``.
        responder: Function answering a parsed prompt.

    Raises:
        ValueError: If the name is empty or contains a slash.
    """
    if not name or "/" in name:
        raise ValueError(f"invalid offline proposer name {name!r}")
    with _lock:
        _RESPONDERS[name] = responder


def offline_proposers() -> list[str]:
    """Names of the registered offline proposers."""
    with _lock:
        return sorted(_RESPONDERS)


def request_rng(name: str, seed: Any, messages: list[Any]) -> random.Random:
    """The generator of one request: a function of the proposer name, the seed and the messages."""
    blob = json.dumps([name, seed, messages], sort_keys=True, default=str, ensure_ascii=False)
    return random.Random(int.from_bytes(hashlib.sha256(blob.encode("utf-8")).digest()[:8], "big"))


def answer(name: str, messages: list[Any], seed: Any = None, temperature: float | None = None) -> str:
    """Answer a request without litellm (the provider's core, also handy in tests).

    Args:
        name: Registered proposer name.
        messages: Chat messages.
        seed: The request's seed.
        temperature: The request's sampling temperature, handed to the proposer on the parsed
            prompt (it does not enter the generator's seed, so earlier answers stay the same).

    Returns:
        The response text.

    Raises:
        KeyError: If no proposer of that name is registered.
    """
    with _lock:
        responder = _RESPONDERS.get(name)
    if responder is None:
        known = ", ".join(offline_proposers()) or "none"
        raise KeyError(f"no offline proposer named {name!r} (registered: {known})")
    prompt = dataclasses.replace(parse_offline_prompt(messages), temperature=_float_or_none(temperature))
    return responder(prompt, request_rng(name, seed, messages))


def token_estimates(messages: list[Any], text: str) -> tuple[int, int]:
    """Estimated ``(prompt, completion)`` tokens of an offline answer: characters / 4, at least 1."""
    prompt_chars = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict))
    return max(1, prompt_chars // 4), max(1, len(text) // 4)


@dataclasses.dataclass(frozen=True)
class OfflineMessage:
    """The answer's message (the ``choices[0].message`` of a chat response)."""

    content: str
    """The response text."""


@dataclasses.dataclass(frozen=True)
class OfflineChoice:
    """One choice of an offline response."""

    message: OfflineMessage
    """Its message."""


@dataclasses.dataclass(frozen=True)
class OfflineUsage:
    """Token estimates of an offline response (:func:`token_estimates`)."""

    prompt_tokens: int
    """Estimated prompt tokens."""
    completion_tokens: int
    """Estimated completion tokens."""


@dataclasses.dataclass(frozen=True)
class OfflineResponse:
    """An offline answer shaped like the parts of a litellm chat response that ``LLMClient`` reads."""

    choices: list[OfflineChoice]
    """One choice."""
    usage: OfflineUsage
    """Token estimates."""
    model: str
    """``offline/<name>``."""
    _hidden_params: dict[str, Any]
    """``not_an_llm = True`` and the proposer's name, as the litellm provider sets them."""
    system_fingerprint: str = FINGERPRINT
    """``offline-proposer-not-an-llm``."""


def offline_completion(
    model: str, messages: list[Any], seed: Any = None, temperature: float | None = None
) -> OfflineResponse:
    """Answer ``offline/<name>`` directly, exactly as the litellm provider would.

    Raises:
        KeyError: If no proposer of that name is registered.
    """
    name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
    text = answer(name, messages, seed, temperature)
    tokens_in, tokens_out = token_estimates(messages, text)
    return OfflineResponse(
        choices=[OfflineChoice(OfflineMessage(text))],
        usage=OfflineUsage(tokens_in, tokens_out),
        model=f"{PROVIDER}/{name}",
        _hidden_params={"not_an_llm": True, "offline_proposer": name},
    )


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _handler_class(litellm: Any) -> type:
    from litellm import CustomLLM
    from litellm.llms.custom_llm import CustomLLMError
    from litellm.types.utils import Usage

    class OfflineProvider(CustomLLM):
        """litellm handler of ``offline/<name>`` (deterministic proposer, not an LLM)."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            """Answer a chat request with the named offline proposer.

            Raises:
                CustomLLMError: 404 when no proposer of that name is registered.
            """
            model: str = kwargs.get("model", args[0] if args else "")
            messages: list[Any] = kwargs.get("messages", args[1] if len(args) > 1 else [])
            response = kwargs["model_response"]
            params: dict[str, Any] = kwargs.get("optional_params") or {}
            name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
            try:
                text = answer(name, messages, params.get("seed"), params.get("temperature"))
            except KeyError as e:
                raise CustomLLMError(status_code=404, message=str(e.args[0])) from None
            response.choices[0].message.content = text
            response.model = f"{PROVIDER}/{name}"
            response.system_fingerprint = FINGERPRINT
            tokens_in, tokens_out = token_estimates(messages, text)
            response.usage = Usage(
                prompt_tokens=tokens_in, completion_tokens=tokens_out, total_tokens=tokens_in + tokens_out
            )
            response._hidden_params["not_an_llm"] = True
            response._hidden_params["offline_proposer"] = name
            return response

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            """Async variant of :meth:`completion`."""
            return self.completion(*args, **kwargs)

    return OfflineProvider


def register_offline_provider(litellm: Any) -> None:
    """Add the ``offline`` provider to litellm's custom provider map (idempotent).

    Args:
        litellm: The imported litellm module.
    """
    if any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map):
        return
    handler = _handler_class(litellm)()
    entry = {"provider": PROVIDER, "custom_handler": handler}
    litellm.custom_provider_map = [*litellm.custom_provider_map, entry]
