"""Role-based LLM calls on litellm: timeouts, retries on transient errors, ledger, cost cap, cache.

An agent names *roles* (``advisor``, ``implementer``, ``summariser``, ...) and maps each to a
litellm model string; :class:`LLMClient` does the rest:

* **Keys** come only from the environment, read by litellm. A parameter that looks like a
  credential is refused, and every error message is masked before it is stored or raised.
* **Retries**: rate limits, timeouts, connection and 5xx errors are retried with exponential
  backoff and jitter (``max_retries`` times); anything else fails at once with
  :class:`~harness.llm.errors.LLMCallFailed`.
* **Ledger**: every attempt becomes one :class:`~harness.llm.ledger.LLMCallRow`.
* **Cost cap**: before each attempt the run's total spend (the ledger, earlier sessions
  included) is compared with the cap; at or above it the call raises the runner's
  :class:`~harness.budget.BudgetExhausted`, which ends the run cleanly.
* **Cache**: with a cache directory, a request identical in model, messages, parameters and
  seed is answered from the cache at no cost (``cache_hit`` in the ledger). Answers of the
  offline proposer are not cached: it recomputes them exactly.

Costs come from litellm's model cost map, which is loaded from the copy bundled with litellm
(``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before litellm is imported unless already set),
so no price list is fetched over the network.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from harness.budget import BudgetExhausted

from .cache import CachedResponse, ResponseCache, request_key
from .errors import LLMCallFailed, LLMConfigError
from .ledger import KIND_LLM, KIND_OFFLINE, Ledger, LLMCallRow, utc_now
from .offline.provider import offline_completion
from .redact import is_secret_name, redact
from .settings import LLMResponse, LLMSettings, Message
from .transport import is_offline, is_transient, litellm_module

log = logging.getLogger("harness.llm")
_MAX_ERROR_CHARS = 2000


def _check_params(params: Mapping[str, Any]) -> None:
    for name in params:
        if is_secret_name(name) or name.lower() in {"api_key", "token", "aws_secret_access_key", "password"}:
            raise LLMConfigError(
                f"parameter {name!r} looks like a credential; keys come only from the environment"
            )


class LLMClient:
    """Calls models by role; see the module docstring for retries, ledger, cap and cache."""

    def __init__(
        self,
        models: Mapping[str, str],
        settings: LLMSettings | None = None,
        *,
        ledger: Ledger | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Bind roles to models.

        Args:
            models: Role -> litellm model string.
            settings: Transport settings (defaults when None).
            ledger: Where attempts are recorded (an in-memory ledger when None).
            sleep: Function used to wait between retries (tests pass a fake).

        Raises:
            LLMConfigError: If a model string is empty or ``settings.params`` holds a credential.
        """
        self.models = dict(models)
        for role, model in self.models.items():
            if not model:
                raise LLMConfigError(f"role {role!r} has no model")
        self.settings = settings or LLMSettings()
        _check_params(self.settings.params)
        self.ledger = ledger or Ledger(None)
        self.cache = ResponseCache(self.settings.cache_dir) if self.settings.cache_dir else None
        self._sleep = sleep
        self._listeners: list[Callable[[LLMCallRow], None]] = []

    def add_listener(self, fn: Callable[[LLMCallRow], None]) -> None:
        """Call ``fn`` with every ledger row right after it is recorded (e.g. to attribute spend)."""
        self._listeners.append(fn)

    def model_for(self, role: str) -> str:
        """The model string of a role.

        Raises:
            LLMConfigError: If the role is unknown.
        """
        try:
            return self.models[role]
        except KeyError:
            raise LLMConfigError(f"no model configured for role {role!r}") from None

    def check_environment(self) -> None:
        """Fail early when a real model's provider key is missing from the environment.

        The offline proposer and requests answered by ``mock_response`` need no key.

        Raises:
            LLMConfigError: Naming the model and the environment variables it needs (never values).
        """
        models = sorted(m for m in set(self.models.values()) if not is_offline(m))
        if "mock_response" in self.settings.params or not models:
            return
        litellm = litellm_module()
        for model in models:
            try:
                found = litellm.validate_environment(model=model)
            except Exception:  # an unknown provider: let the first call report it
                continue
            if not found.get("keys_in_environment", True):
                need = " or ".join(found.get("missing_keys") or ["its provider key"])
                raise LLMConfigError(
                    f"model {model!r} needs {need} in the environment "
                    f"(or use the offline proposer, e.g. --model offline/pacevolve)"
                )

    def _params(self) -> dict[str, Any]:
        s = self.settings
        params: dict[str, Any] = {}
        if s.temperature is not None:
            params["temperature"] = s.temperature
        if s.max_tokens is not None:
            params["max_tokens"] = s.max_tokens
        params.update(s.params)
        return params

    def _check_cap(self) -> None:
        cap = self.settings.max_cost_usd
        if cap is not None and self.ledger.cost_usd >= cap:
            raise BudgetExhausted(f"LLM cost cap reached: ${self.ledger.cost_usd:.4f} of ${cap:.4f}")

    def _record(self, row: LLMCallRow) -> None:
        self.ledger.record(row)
        for fn in self._listeners:
            fn(row)

    def _delay(self, key: str, attempt: int) -> float:
        s = self.settings
        jitter = 0.75 + 0.5 * random.Random(f"{key}:{attempt}").random()
        return min(s.backoff_max_s, s.backoff_s * 2**attempt) * jitter

    def complete(
        self,
        role: str,
        messages: list[Message],
        *,
        seed: int | None = None,
        stage: str = "",
        step: int = -1,
        thread: int = -1,
        temperature: float | None = None,
    ) -> LLMResponse:
        """Send a chat request for ``role`` and return the response text.

        Args:
            role: A configured role.
            messages: Chat messages.
            seed: Sampling seed (passed to providers that accept one; always to the offline proposer).
            stage: Label recorded in the ledger.
            step: Agent step recorded in the ledger.
            thread: Island / thread recorded in the ledger.
            temperature: Sampling temperature of this request (None: the settings' temperature).

        Returns:
            The response.

        Raises:
            LLMConfigError: If the role is unknown.
            BudgetExhausted: If the run's LLM cost cap is reached.
            LLMCallFailed: On a permanent error or when transient errors outlast the retries;
                the message is masked.
        """
        model = self.model_for(role)
        params = self._params()
        if temperature is not None:
            params["temperature"] = temperature
        key = request_key(model, messages, params, seed)
        tags: dict[str, Any] = {"role": role, "model": model, "stage": stage, "step": step, "thread": thread}
        kind = KIND_OFFLINE if is_offline(model) else KIND_LLM
        t_start = time.monotonic()
        cache = None if kind == KIND_OFFLINE else self.cache  # offline answers are recomputed exactly
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                self._check_cap()
                self._record(
                    LLMCallRow(
                        call_id=uuid.uuid4().hex,
                        started_at=utc_now(),
                        kind=kind,
                        cache_hit=True,
                        tokens_in=hit.tokens_in,
                        tokens_out=hit.tokens_out,
                        request_sha256=key,
                        response_chars=len(hit.text),
                        **tags,
                    )
                )
                return LLMResponse(
                    hit.text, role, model, hit.response_model, hit.tokens_in, hit.tokens_out, 0.0,
                    time.monotonic() - t_start, True, hit.offline, 1,
                )  # fmt: skip
        # The offline proposer is answered here, without importing litellm (~7 s per process),
        # unless a mock response is asked for (litellm answers those).
        direct = kind == KIND_OFFLINE and "mock_response" not in params
        litellm = None if direct else litellm_module()
        attempt = 0
        while True:
            self._check_cap()
            started, t0 = utc_now(), time.monotonic()
            failure: tuple[str, str, bool] | None = None
            try:
                if litellm is None:
                    resp: Any = offline_completion(model, messages, seed, params.get("temperature"))
                else:
                    resp = litellm.completion(
                        model=model,
                        messages=messages,
                        seed=seed,
                        timeout=self.settings.timeout_s,
                        num_retries=0,
                        drop_params=True,
                        **params,
                    )
            except Exception as exc:  # classified, masked and recorded below
                failure = (type(exc).__name__, redact(str(exc))[:_MAX_ERROR_CHARS], is_transient(exc))
            latency = time.monotonic() - t0
            if failure is not None:
                error_type, message, transient = failure
                self._record(
                    LLMCallRow(
                        call_id=uuid.uuid4().hex,
                        started_at=started,
                        kind=kind,
                        attempt=attempt,
                        ok=False,
                        latency_s=latency,
                        error_type=error_type,
                        error=message,
                        transient=transient,
                        request_sha256=key,
                        **tags,
                    )
                )
                log.warning("%s call to %s failed (%s): %s", role, model, error_type, message[:300])
                if transient and attempt < self.settings.max_retries:
                    self._sleep(self._delay(key, attempt))
                    attempt += 1
                    continue
                raise LLMCallFailed(role, model, error_type, message, transient)
            return self._success(resp, key, tags, kind, started, latency, attempt, t_start)

    def _success(
        self,
        resp: Any,
        key: str,
        tags: dict[str, Any],
        kind: str,
        started: str,
        latency: float,
        attempt: int,
        t_start: float,
    ) -> LLMResponse:
        hidden = getattr(resp, "_hidden_params", {}) or {}
        offline = bool(hidden.get("not_an_llm")) or kind == KIND_OFFLINE
        choice = resp.choices[0] if resp.choices else None
        text = (getattr(getattr(choice, "message", None), "content", None) or "") if choice else ""
        usage = getattr(resp, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        cost, known = self._cost(resp, hidden, offline)
        response_model = str(getattr(resp, "model", "") or tags["model"])
        if self.cache is not None and not offline:
            self.cache.put(key, CachedResponse(text, tokens_in, tokens_out, response_model, offline))
        self._record(
            LLMCallRow(
                call_id=uuid.uuid4().hex,
                started_at=started,
                kind=KIND_OFFLINE if offline else KIND_LLM,
                attempt=attempt,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=cost,
                cost_known=known,
                latency_s=latency,
                request_sha256=key,
                response_chars=len(text),
                **tags,
            )
        )
        return LLMResponse(
            text, tags["role"], tags["model"], response_model, tokens_in, tokens_out, cost,
            time.monotonic() - t_start, False, offline, attempt + 1,
        )  # fmt: skip

    @staticmethod
    def _cost(resp: Any, hidden: Mapping[str, Any], offline: bool) -> tuple[float, bool]:
        if offline:
            return 0.0, True
        cost = hidden.get("response_cost")
        if cost is None:
            try:
                cost = litellm_module().completion_cost(completion_response=resp)
            except Exception:  # not in the cost map
                return 0.0, False
        try:
            value = float(cost)
        except (TypeError, ValueError):
            return 0.0, False
        return (value, True) if value >= 0 else (0.0, False)
