"""Build a policy object from its stored description (kind, model, prompt format, parameters).

The webapp stores policies as rows, the CLI reads them from flags; both build the object here,
so a policy behaves the same wherever it runs. Backends are imported lazily (the local model
imports torch only when it is built).
"""

from __future__ import annotations

from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.policies._server_protocols import SAMPLER_PARAMETERS, check_engine_name
from trainer_core.policies.base import PROMPT_FORMATS
from trainer_core.policies.secrets import check_env_name, check_no_secret

KINDS: tuple[str, ...] = ("scripted", "anthropic", "openai", "local", "inference_server")

#: the parameters each kind accepts (beyond model and prompt format)
PARAMETERS: dict[str, tuple[str, ...]] = {
    "scripted": ("mistakes", "delay"),
    "anthropic": (
        "api_key_env",
        "base_url",
        "temperature",
        "max_tokens",
        "system",
        "max_retries",
        "timeout",
        "price_in",
        "price_out",
    ),
    "openai": (
        "api_key_env",
        "base_url",
        "temperature",
        "max_tokens",
        "system",
        "max_retries",
        "timeout",
        "price_in",
        "price_out",
        "extra_body",
    ),
    "local": (
        "model_dir",
        "device",
        "temperature",
        "max_new_tokens",
        "top_p",
        "system",
        "list_tools",
    ),
    # a vLLM or SGLang server Steplab also updates with each policy version (decoupled RL):
    # see trainer_core.policies.inference_server; model is the served base model's name
    "inference_server": SAMPLER_PARAMETERS,
}


def check_parameters(kind: str, model: str, prompt_format: str, parameters: dict[str, Any]) -> None:
    """Raise ConfigError saying what is wrong with a policy description."""
    if kind not in KINDS:
        raise ConfigError(f"unknown policy kind {kind!r}; use one of {', '.join(KINDS)}")
    if prompt_format not in PROMPT_FORMATS:
        raise ConfigError(
            f"unknown prompt format {prompt_format!r}; use one of {', '.join(PROMPT_FORMATS)}"
        )
    if not isinstance(parameters, dict):
        raise ConfigError("parameters must be a JSON object")
    # keys at any depth, as names or values (headers, URLs with user:key@, sk-…, hf_…)
    check_no_secret(parameters, "parameters", allowed=frozenset({"api_key_env"}))
    check_no_secret(model, "model")
    unknown = sorted(set(parameters) - set(PARAMETERS[kind]))
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) for a {kind} policy: {', '.join(unknown)}; "
            f"accepted: {', '.join(PARAMETERS[kind])}"
        )
    if parameters.get("api_key_env") is not None:
        check_env_name(parameters["api_key_env"])
    if kind in ("anthropic", "openai") and not model:
        raise ConfigError(f"a {kind} policy needs a model name")
    if kind == "openai" and not parameters.get("base_url"):
        raise ConfigError("an OpenAI-compatible policy needs base_url (e.g. http://host:8000/v1)")
    if kind == "local" and not (parameters.get("model_dir") or model):
        raise ConfigError("a local policy needs model_dir: the directory of the model")
    if kind == "inference_server":
        _check_inference_server(parameters)
    if kind == "scripted":
        from trainer_core.policies.scripted import ScriptedPolicy

        # raises ConfigError with the reason
        ScriptedPolicy(mistakes=parameters.get("mistakes"), delay=parameters.get("delay", 0.0))


def _check_inference_server(parameters: dict[str, Any]) -> None:
    check_engine_name(parameters.get("engine"))  # vllm or sglang, else the reason
    if not parameters.get("base_url"):
        raise ConfigError(
            "an inference-server policy needs base_url: the server's root, e.g. http://gpu1:8000"
        )


def build_policy(
    kind: str,
    *,
    model: str = "",
    prompt_format: str = "native",
    parameters: dict[str, Any] | None = None,
    seed: int = 0,
    name: str = "",
    return_logprobs: bool = False,
) -> Any:
    """A fresh policy object (one per episode: policies keep per-episode state)."""
    params = dict(parameters or {})
    check_parameters(kind, model, prompt_format, params)
    label = name or kind
    if kind == "scripted":
        from trainer_core.policies.scripted import ScriptedPolicy

        policy = ScriptedPolicy(
            mistakes=params.get("mistakes") or {}, seed=seed, delay=params.get("delay", 0.0)
        )
        policy.name = label
        return policy
    if kind == "anthropic":
        from trainer_core.policies.anthropic_api import AnthropicPolicy

        return AnthropicPolicy(model, prompt_format=prompt_format, name=label, **params)
    if kind == "openai":
        from trainer_core.policies.openai_compat import OpenAICompatPolicy

        return OpenAICompatPolicy(model, prompt_format=prompt_format, name=label, **params)
    if kind == "inference_server":
        from trainer_core.policies.inference_server import sampler_from_parameters

        return sampler_from_parameters(model, params, name=label)
    from trainer_core.policies.local_hf import LocalHFPolicy

    model_dir = params.pop("model_dir", None) or model
    return LocalHFPolicy(
        model_dir, seed=seed, name=label, return_logprobs=return_logprobs, **params
    )


def estimate_calls(*, episodes: int, max_steps: int) -> int:
    """At most one model call per step."""
    return episodes * max_steps
