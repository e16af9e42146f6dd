"""The judge's API calls: one SDK client (``anthropic`` or ``openai``, imported at the first
call) shared by the judge's threads, one text answer per call with its tokens, cost and whether
it was cut off at ``max_tokens``. Settings checks, the key, costs and error messages are
:class:`~trainer_core.policies._api.ApiCaller`'s, shared with the API-backed policies.

Retries of 408/409/429/5xx and connection errors are the SDKs' own (``max_retries``, backoff
honouring ``Retry-After``); a call that still fails raises PolicyError with ``transient`` set
when another try later may succeed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from trainer_core.policies._api import ApiCaller
from trainer_core.rewards.judge.config import PROVIDERS, JudgeConfig


@dataclass
class JudgeReply:
    """One answer: its text, tokens in and out, cost (USD) and whether it hit ``max_tokens``."""

    text: str
    tokens_in: int
    tokens_out: int
    cost: float
    cut_off: bool


class JudgeClient(ApiCaller):
    """One SDK client for the judge's calls (shared by its threads)."""

    caller = "the LLM judge"
    settings_hint = "the judge's settings (model, max_tokens, temperature, base_url)"

    def __init__(self, config: JudgeConfig) -> None:
        self.kind = config.kind
        self.provider = PROVIDERS[config.kind]
        super().__init__(
            config.model,
            api_key_env=config.key_env,
            base_url=config.base_url.strip() if config.base_url else None,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            max_retries=config.max_retries,
            timeout=config.timeout,
            price_in=config.price_in,
            price_out=config.price_out,
            name=f"llm judge ({config.kind}, {config.model})",
        )
        self._lock = threading.Lock()

    def sdk(self) -> Any:
        """The SDK module of this kind (imported here, at the first call)."""
        if self.kind == "anthropic":
            import anthropic

            return anthropic
        import openai

        return openai

    def client(self) -> Any:
        """The SDK client, made once (it reads the key)."""
        with self._lock:
            if self._client is None:
                sdk = self.sdk()
                self._client = self._new_client(
                    sdk.Anthropic if self.kind == "anthropic" else sdk.OpenAI
                )
            return self._client

    def complete(self, system: str, user: str) -> JudgeReply:
        """One call; SDK errors become PolicyError (``transient`` set on it)."""
        sdk = self.sdk()
        client = self.client()
        try:
            if self.kind == "anthropic":
                text, tokens_in, tokens_out, cut_off = self._anthropic(client, system, user)
            else:
                text, tokens_in, tokens_out, cut_off = self._openai(client, system, user)
        except sdk.APIError as exc:
            error = self._policy_error(exc, sdk)
            error.transient = _transient(exc, sdk)  # type: ignore[attr-defined]
            raise error from None
        return JudgeReply(text, tokens_in, tokens_out, self._cost(tokens_in, tokens_out), cut_off)

    def _anthropic(self, client: Any, system: str, user: str) -> tuple[str, int, int, bool]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }
        if self.temperature is not None:
            kwargs["extra_body"] = {"temperature": self.temperature}
        message = client.messages.create(**kwargs)
        text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        usage = message.usage
        tokens_in = int(getattr(usage, "input_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "output_tokens", 0) or 0)
        return text, tokens_in, tokens_out, message.stop_reason == "max_tokens"

    def _openai(self, client: Any, system: str, user: str) -> tuple[str, int, int, bool]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        completion = client.chat.completions.create(**kwargs)
        choices = completion.choices or []
        text = (choices[0].message.content or "") if choices else ""
        usage = getattr(completion, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        return text, tokens_in, tokens_out, bool(choices) and choices[0].finish_reason == "length"


def _transient(exc: Exception, sdk: Any) -> bool:
    """A failure that another try later may not have (the SDK retried it already)."""
    if isinstance(exc, sdk.APIConnectionError):  # timeouts included
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)
