"""The judge's settings and results: :class:`JudgeConfig` (which model judges, and how; also read
from the ``STEPLAB_JUDGE_*`` environment variables by :func:`judge_config_from_env`),
:class:`StepJudgement` (the verdict on one step) and :class:`JudgeUsage` (what judging cost).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.rewards.judge.prompts import PROMPT_VERSION

KINDS: tuple[str, ...] = ("anthropic", "openai")
DEFAULT_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
PROVIDERS = {"anthropic": "the Anthropic API", "openai": "the OpenAI-compatible server"}

ENV_KIND = "STEPLAB_JUDGE_KIND"
ENV_MODEL = "STEPLAB_JUDGE_MODEL"
ENV_BASE_URL = "STEPLAB_JUDGE_BASE_URL"
ENV_API_KEY_ENV = "STEPLAB_JUDGE_API_KEY_ENV"


@dataclass
class JudgeConfig:
    """Which model judges, and how.

    kind: ``anthropic`` (Messages API) or ``openai`` (any OpenAI-compatible chat-completions
        server: OpenAI, vLLM, SGLang, Ollama).
    model: the model id, e.g. ``claude-haiku-4-5`` or ``gpt-4.1-mini``.
    base_url: the server's root (None: the SDK's default, api.anthropic.com / api.openai.com);
        for ``openai`` the OpenAI-compatible root, e.g. ``http://localhost:8000/v1``.
    api_key_env: the environment variable holding the API key (None: ``ANTHROPIC_API_KEY`` or
        ``OPENAI_API_KEY`` by kind; ``""``: no key, for an ``openai`` server that checks none).
    temperature: sampling temperature (None: the server's default).
    max_tokens: the most tokens of one answer.
    window: how many earlier steps the judge sees before the step it scores.
    max_judged_steps: the most steps judged per trajectory (at least 2); beyond it an evenly
        spaced sample is judged and the rest interpolated. None: judge every step.
    concurrency: calls in flight at once.
    price_in / price_out: USD per million tokens, over the built-in price table.
    max_retries: the SDK's retries of 408/409/429/5xx and connection errors.
    timeout: seconds one request may take.
    """

    kind: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.0
    max_tokens: int = 512
    window: int = 3
    max_judged_steps: int | None = 40
    concurrency: int = 4
    price_in: float | None = None
    price_out: float | None = None
    max_retries: int = 4
    timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(
                f"judge kind must be one of {', '.join(KINDS)}, not {self.kind!r}"
                f"{_did_you_mean(str(self.kind), KINDS)}"
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(
                "the judge needs a model: set model to a model id, e.g. 'claude-haiku-4-5'"
            )
        if self.base_url is not None and (
            not isinstance(self.base_url, str) or not self.base_url.strip()
        ):
            raise ConfigError("base_url must be the server's root URL, or None for the default")
        if self.api_key_env is not None and not isinstance(self.api_key_env, str):
            raise ConfigError("api_key_env must name an environment variable (or be None)")
        if self.kind == "anthropic" and self.api_key_env is not None and not self.api_key_env:
            raise ConfigError(
                "the Anthropic API needs a key: api_key_env must name the environment variable "
                "that holds it (None: ANTHROPIC_API_KEY)"
            )
        _whole(self.window, "window", minimum=0)
        _whole(self.concurrency, "concurrency", minimum=1)
        if self.max_judged_steps is not None:
            _whole(self.max_judged_steps, "max_judged_steps", minimum=2)

    @property
    def key_env(self) -> str | None:
        """The environment variable actually read (None: no key is sent)."""
        if self.api_key_env is None:
            return DEFAULT_KEY_ENV[self.kind]
        return self.api_key_env.strip() or None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeConfig:
        """A config from a dict (a task's ``metadata["judge"]``, a reward-model version's
        judge config); unknown keys raise ConfigError naming the known ones."""
        if isinstance(data, JudgeConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"a judge config is a dict with at least kind and model, not {type(data).__name__}"
            )
        known = [f.name for f in fields(cls)]
        unknown = [k for k in data if k not in known]
        if unknown:
            hints = "".join(_did_you_mean(str(k), known) for k in unknown)
            raise ConfigError(
                f"unknown judge setting(s) {', '.join(map(repr, unknown))}{hints}; "
                f"known: {', '.join(known)}"
            )
        missing = [k for k in ("kind", "model") if not data.get(k)]
        if missing:
            raise ConfigError(
                f"a judge config needs {' and '.join(missing)} "
                "(e.g. {'kind': 'anthropic', 'model': 'claude-haiku-4-5'})"
            )
        return cls(**dict(data))

    def fingerprint(self) -> str:
        """A stable hash of what changes the judge's answers (kind, model, server, sampling,
        answer length, window and the prompt's version); not of concurrency, timeouts, retries,
        prices, the key's variable or how many steps are sampled."""
        payload = {
            "prompt_version": PROMPT_VERSION,
            "kind": self.kind,
            "model": self.model.strip(),
            "base_url": self.base_url.strip().rstrip("/") if self.base_url else None,
            "temperature": None if self.temperature is None else float(self.temperature),
            "max_tokens": self.max_tokens,
            "window": self.window,
        }
        return sha256_json(payload)[:16]


def judge_config_from_env(environ: Mapping[str, str] | None = None) -> JudgeConfig | None:
    """The judge of ``STEPLAB_JUDGE_KIND`` / ``STEPLAB_JUDGE_MODEL`` (with optional
    ``STEPLAB_JUDGE_BASE_URL`` / ``STEPLAB_JUDGE_API_KEY_ENV``), or None when neither is set."""
    env = os.environ if environ is None else environ
    kind = env.get(ENV_KIND, "").strip()
    model = env.get(ENV_MODEL, "").strip()
    if not kind and not model:
        return None
    if not kind or not model:
        absent = ENV_KIND if not kind else ENV_MODEL
        raise ConfigError(
            f"the LLM judge is half configured: set {absent} too ({ENV_KIND}: "
            f"{' or '.join(KINDS)}; {ENV_MODEL}: a model id)"
        )
    data: dict[str, Any] = {"kind": kind, "model": model}
    if env.get(ENV_BASE_URL, "").strip():
        data["base_url"] = env[ENV_BASE_URL].strip()
    if ENV_API_KEY_ENV in env:
        data["api_key_env"] = env[ENV_API_KEY_ENV].strip()
    return JudgeConfig.from_dict(data)


@dataclass
class StepJudgement:
    """The judge's verdict on one step.

    index: the step's index. scores: rubric id -> 0..1, None = unscored. rationale: the judge's
    words (or how an interpolated value was made). interpolated: the step was not judged; its
    scores are interpolated. cached: the verdict came from the cache (no call). error: why some
    or all rubrics are unscored (None when nothing went wrong).
    """

    index: int
    scores: dict[str, float | None]
    rationale: str
    interpolated: bool = False
    cached: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class JudgeUsage:
    """What judging cost: API calls made (failed ones included), cache hits, tokens, USD."""

    calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        if not isinstance(other, JudgeUsage):
            return NotImplemented
        return JudgeUsage(
            calls=self.calls + other.calls,
            cache_hits=self.cache_hits + other.cache_hits,
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            cost=self.cost + other.cost,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sha256_json(payload: Any) -> str:
    """The SHA-256 (hex) of ``payload`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _whole(value: Any, name: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be a whole number of at least {minimum}, not {value!r}")


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
