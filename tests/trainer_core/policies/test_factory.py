"""Policy descriptions: secrets refused, the accepted parameters accepted."""

from __future__ import annotations

import pytest

from trainer_core.errors import ConfigError
from trainer_core.policies.factory import check_parameters


def test_token_limits_are_parameters_not_secrets():
    check_parameters("local", "", "native", {"model_dir": "/m", "max_new_tokens": 24})
    check_parameters("anthropic", "claude-x", "native", {"max_tokens": 512})


@pytest.mark.parametrize("name", ["api_key", "auth_token", "password", "client_secret", "ApiKey"])
def test_anything_that_looks_like_a_secret_is_refused(name):
    with pytest.raises(ConfigError, match="looks like a secret"):
        check_parameters("anthropic", "claude-x", "native", {name: "sk-123"})


def test_api_key_env_must_name_a_variable():
    check_parameters("anthropic", "claude-x", "native", {"api_key_env": "ANTHROPIC_API_KEY"})
    with pytest.raises(ConfigError, match="NAME of an environment variable"):
        check_parameters("anthropic", "claude-x", "native", {"api_key_env": "sk-ant-123"})


def test_a_local_policy_can_prompt_with_its_instructions_only():
    from trainer_core.policies.factory import build_policy
    from trainer_core.training.tiny import arithmetic_tools

    tools = arithmetic_tools()
    listed = build_policy("local", parameters={"model_dir": "/m", "system": "Use the calculator."})
    short = build_policy(
        "local",
        parameters={"model_dir": "/m", "system": "Use the calculator.", "list_tools": False},
    )
    assert short.system_text(tools) == "Use the calculator."
    full = listed.system_text(tools)
    assert full.startswith("Use the calculator.") and "calculator" in full[20:]
    assert len(full) > 4 * len(short.system_text(tools))
