"""What the API-backed policies (Anthropic, OpenAI-compatible) share: settings checks, the API
key read from an environment variable, the episode's prompt, and SDK errors turned into
:class:`~trainer_core.errors.PolicyError` messages that say what to do. :class:`ApiCaller` (all
but the episode) is shared with the LLM judge (:mod:`trainer_core.rewards.judge.client`).

Retries are the SDKs' own (``max_retries``): both retry 408/409/429/5xx and connection errors
with exponential backoff (0.5 s doubling to 8 s, with jitter) and wait what a ``Retry-After`` /
``retry-after-ms`` header asks for when it is above 0. The number of attempts comes from the
SDK too (``retries_taken`` of the raw response; the ``x-stainless-retry-count`` header of the
last request when the call failed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.policies.base import PROMPT_FORMATS, Turn
from trainer_core.policies.pricing import cost

#: The key sent to servers that need none (``api_key_env=None``); vLLM's documented placeholder.
PLACEHOLDER_KEY = "EMPTY"


def _check_model(model: object) -> None:
    if not isinstance(model, str) or not model.strip():
        raise ConfigError("model must be a non-empty model name, e.g. 'claude-sonnet-4-5'")


class ApiCaller:
    """What every caller of a hosted model API shares (the policies here, the LLM judge in
    :mod:`trainer_core.rewards.judge.client`): the settings' checks, the API key read from an
    environment variable, the cost of a call, and SDK errors as :class:`PolicyError` messages.
    Subclasses make their own SDK client with :meth:`_new_client` (kept in ``self._client``)."""

    provider = "the API"  # for messages, e.g. "the Anthropic API"
    caller = "the policy"  # what runs the calls, for the missing-key message
    settings_hint = "the policy's settings (model, max_tokens, temperature, tools)"

    def __init__(
        self,
        model: str,
        *,
        api_key_env: str | None,
        base_url: str | None,
        temperature: float | None,
        max_tokens: int,
        max_retries: int,
        timeout: float,
        price_in: float | None,
        price_out: float | None,
        name: str,
    ) -> None:
        _check_model(model)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(
                f"max_tokens must be a whole number of at least 1, not {max_tokens!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(
                f"max_retries must be a whole number of 0 or more, not {max_retries!r}"
            )
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"timeout must be a number of seconds above 0, not {timeout!r}")
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or temperature < 0
        ):
            raise ConfigError(
                f"temperature must be a number of 0 or more (None: the server's default), "
                f"not {temperature!r}"
            )
        for label, price in (("price_in", price_in), ("price_out", price_out)):
            if price is not None and (not isinstance(price, int | float) or price < 0):
                raise ConfigError(
                    f"{label} must be USD per million tokens (0 or more), not {price!r}"
                )
        if api_key_env is not None and (
            not isinstance(api_key_env, str) or not api_key_env.strip()
        ):
            raise ConfigError(
                "api_key_env must name the environment variable that holds the API key "
                "(e.g. 'ANTHROPIC_API_KEY'), or be None for a server that needs no key"
            )
        self.model = model.strip()
        self.api_key_env = api_key_env.strip() if api_key_env else None
        self.base_url = base_url
        self.temperature = None if temperature is None else float(temperature)
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.price_in = price_in
        self.price_out = price_out
        self.name = name
        self._client: Any = None  # the SDK client, made at the first call (it holds the key)

    # --- the key and the client -------------------------------------------------------------

    def _new_client(self, maker: Callable[..., Any]) -> Any:
        """An SDK client of these settings: ``maker`` is ``anthropic.Anthropic`` or
        ``openai.OpenAI``. Reads the key (PolicyError when it is missing)."""
        return maker(
            api_key=self._api_key(),
            base_url=self.base_url,
            max_retries=self.max_retries,
            timeout=self.timeout,
        )

    def _api_key(self) -> str:
        if self.api_key_env is None:
            return PLACEHOLDER_KEY
        value = os.environ.get(self.api_key_env, "").strip()
        if not value:
            raise PolicyError(
                f"{self.name}: the environment variable {self.api_key_env} is not set; set it to "
                f"the API key for {self.provider} in the environment of the process that runs "
                f"{self.caller} (the worker), or name another variable with api_key_env"
            )
        return value

    # --- usage ------------------------------------------------------------------------------

    def _cost(self, tokens_in: int, tokens_out: int) -> float:
        return cost(
            self.model, tokens_in, tokens_out, price_in=self.price_in, price_out=self.price_out
        )

    # --- errors -----------------------------------------------------------------------------

    def _where(self) -> str:
        return f" at {self.base_url}" if self.base_url else ""

    def _scrub(self, text: str) -> str:
        """``text`` without the API key (a server may echo it in an error message)."""
        key = getattr(self._client, "api_key", None)
        if isinstance(key, str) and key != PLACEHOLDER_KEY and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    def _policy_error(self, exc: Exception, sdk: Any) -> PolicyError:
        """An SDK exception as a PolicyError that says what happened and what to do."""
        attempts = _attempts(exc)
        tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else ""
        who = f"{self.name}: {self.provider}{self._where()}"
        detail = self._scrub(_server_message(exc))
        key_hint = (
            f"check that {self.api_key_env} holds a valid key for this server"
            if self.api_key_env
            else "this server wants a key: set api_key_env to the environment variable that "
            "holds it"
        )
        status = getattr(exc, "status_code", None)
        if isinstance(exc, sdk.AuthenticationError):
            message = f"{who} refused the API key (401 authentication failed): {detail}; {key_hint}"
        elif isinstance(exc, sdk.PermissionDeniedError):
            message = (
                f"{who} denied access (403 permission denied): {detail}; the key in "
                f"{self.api_key_env or '(none)'} may not have access to model {self.model!r}"
            )
        elif isinstance(exc, sdk.NotFoundError):
            message = (
                f"{who} answered 404 not found: {detail}; check the model name {self.model!r} "
                "and the base URL"
            )
        elif isinstance(exc, sdk.RateLimitError):
            message = (
                f"{who} is still rate limiting (429){tries}: {detail}; lower the run's "
                "concurrency, wait and retry, or raise max_retries"
            )
        elif isinstance(exc, sdk.APIStatusError) and status is not None and status >= 500:
            message = (
                f"{who} failed with server error {status}{tries}: {detail}; the service may be "
                "down or overloaded, try again later"
            )
        elif isinstance(exc, sdk.APIStatusError):
            message = f"{who} rejected the request ({status}): {detail}; check {self.settings_hint}"
            if self.temperature is not None and "temperature" in detail.lower():
                message += "; a model that refuses sampling parameters needs temperature=None"
        elif isinstance(exc, sdk.APITimeoutError):
            message = (
                f"{who} did not answer within {self.timeout:g} s{tries}; raise the timeout or "
                "check the server"
            )
        elif isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc
            message = (
                f"{who} could not be reached{tries}: {self._scrub(str(cause))[:300]}; check that "
                "the server is running and the base URL is right"
            )
        else:
            message = f"{who} returned an answer that could not be read: {detail}"
        error = PolicyError(message)
        error.status_code = status  # type: ignore[attr-defined]
        error.attempts = attempts  # type: ignore[attr-defined]
        return error


class ApiPolicy(ApiCaller):
    """Base of the API-backed policies (see :mod:`.anthropic_api`, :mod:`.openai_compat`).

    Settings (each backend adds its own and may change the defaults of ``api_key_env`` and
    ``name``): ``api_key_env`` (the environment variable holding the key; None: a placeholder
    key, for a server that checks none), ``base_url`` (None: the SDK's default), ``temperature``
    (None: the server's default), ``max_tokens``, ``system`` (instructions before the task),
    ``prompt_format`` (``native`` tool calls or ``react`` text), ``max_retries`` (the SDK's, of
    429/5xx and connection errors), ``timeout`` (seconds per request), ``price_in`` /
    ``price_out`` (USD per million tokens, over the price table), ``name`` (for messages).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key_env: str | None,
        base_url: str | None = None,
        temperature: float | None = 0.0,
        max_tokens: int = 1024,
        system: str | None = None,
        prompt_format: str = "native",
        max_retries: int = 4,
        timeout: float = 60.0,
        price_in: float | None = None,
        price_out: float | None = None,
        name: str,
    ) -> None:
        _check_model(model)
        if prompt_format not in PROMPT_FORMATS:
            raise ConfigError(
                f"unknown prompt_format {prompt_format!r}; use one of {', '.join(PROMPT_FORMATS)}"
            )
        super().__init__(
            model,
            api_key_env=api_key_env,
            base_url=base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            max_retries=max_retries,
            timeout=timeout,
            price_in=price_in,
            price_out=price_out,
            name=name,
        )
        self.system = system
        self.prompt_format = prompt_format
        self.task: Any = None
        self._prompt: str | None = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, prompt_format={self.prompt_format!r})"
        )

    # --- the episode ------------------------------------------------------------------------

    def reset(self, task: Any) -> None:
        """Start an episode; the next ``act`` with an empty history gives its prompt."""
        self.task = task
        self._prompt = None

    def _episode_prompt(self, observation: str, history: Sequence[Turn]) -> str:
        """The first observation of the episode: remembered when ``history`` is empty."""
        if not history:
            self._prompt = observation
            return observation
        if self._prompt is not None:
            return self._prompt
        prompt = getattr(self.task, "prompt", None) if self.task is not None else None
        if isinstance(prompt, str):
            return prompt
        raise PolicyError(
            f"{self.name}: act() was called with a history but the episode's first observation "
            "was never seen; call reset(task) and act() with an empty history first"
        )

    def _call(
        self, sdk: Any, create: Callable[..., Any], kwargs: dict[str, Any]
    ) -> tuple[Any, int, float]:
        """One request through the SDK's raw-response ``create``: (the parsed response, the
        attempts the SDK made, seconds taken). SDK errors raise PolicyError."""
        started = time.perf_counter()
        try:
            raw_response = create(**kwargs)
            response = raw_response.parse()
        except sdk.APIError as exc:
            raise self._policy_error(exc, sdk) from None
        return response, raw_response.retries_taken + 1, time.perf_counter() - started


def _attempts(exc: Exception) -> int | None:
    """How many requests the SDK made: its retry count on the last request, plus one."""
    response = getattr(exc, "response", None)
    request = getattr(response, "request", None) if response is not None else None
    if request is None:
        try:
            request = getattr(exc, "request", None)
        except RuntimeError:  # httpx raises when an exception has no request attached
            request = None
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    try:
        return int(headers.get("x-stainless-retry-count", "0")) + 1
    except (TypeError, ValueError):
        return None


def _server_message(exc: Exception) -> str:
    """The server's own error message (Anthropic and OpenAI both send ``{"error": {"message"}}``),
    clipped; model servers' text is untrusted, so it is only quoted, never interpreted."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
    if not isinstance(message, str) or not message.strip():
        message = getattr(exc, "message", None) or str(exc)
    message = " ".join(str(message).split())
    return message if len(message) <= 300 else message[:299] + "…"
