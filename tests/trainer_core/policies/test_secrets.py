"""Keys are found wherever they hide in a policy description (issue 17, problem 6 and point 5):
nested objects, headers, URLs with credentials, known token prefixes as values and as names,
a key used as the model name, a token given as api_key_env; the message says where the key
was and where keys belong, and never repeats the key. Ordinary parameters pass."""

from __future__ import annotations

import pytest

from trainer_core.errors import ConfigError
from trainer_core.policies.factory import build_policy, check_parameters
from trainer_core.policies.secrets import check_env_name, find_secret

pytestmark = pytest.mark.sqlite

URL = "https://llm.example.com/v1"
# Fake credentials in the shapes the providers issue (none is a real key).
OPENAI = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 2
ANTHROPIC = "sk-ant-api03-" + "x9Y8w7V6u5T4s3R2" * 2
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWx"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop"
SLACK = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"

# (kind, model, parameters, where the message says the key is)
SHAPES = [
    # the five shapes the issue found stored and shown to a viewer
    (
        "openai",
        "gpt-4o",
        {"base_url": f"https://user:{OPENAI}@llm.example.com/v1"},
        "parameters.base_url",
    ),  # fmt: skip
    (
        "openai",
        "gpt-4o",
        {"base_url": URL, "extra_body": {"api_key": "plain-looking"}},
        "parameters.extra_body.api_key",
    ),  # fmt: skip
    (
        "openai",
        "gpt-4o",
        {"base_url": URL, "extra_body": {"headers": {"Authorization": "Bearer abcdefgh12345"}}},
        "parameters.extra_body.headers.Authorization",
    ),  # fmt: skip
    ("anthropic", ANTHROPIC, {}, "model"),
    ("anthropic", "claude-sonnet-4-5", {"api_key_env": HF}, "api_key_env"),
    # and their relatives
    (
        "openai",
        "gpt-4o",
        {"base_url": f"https://{OPENAI}@llm.example.com/v1"},
        "parameters.base_url",
    ),  # fmt: skip
    ("openai", "gpt-4o", {"base_url": URL + "?api_key=abc123"}, "parameters.base_url"),
    (
        "openai",
        "gpt-4o",
        {"base_url": URL, "extra_body": {"headers": {"X-Api-Key": "abc"}}},
        "parameters.extra_body.headers.X-Api-Key",
    ),  # fmt: skip
    (
        "openai",
        "gpt-4o",
        {"base_url": URL, "extra_body": {"headers": {"X-Custom": "Bearer abcdefgh12345"}}},
        "parameters.extra_body.headers.X-Custom",
    ),  # fmt: skip
    (
        "openai",
        "gpt-4o",
        {"base_url": URL, "extra_body": {"options": [{"note": GITHUB}]}},
        "parameters.extra_body.options[0].note",
    ),  # fmt: skip
    (
        "openai",
        "gpt-4o",
        {"base_url": URL, "extra_body": {"auth": {"token": "t"}}},
        "parameters.extra_body.auth",
    ),  # fmt: skip
    ("openai", "gpt-4o", {"base_url": URL, "extra_body": {SLACK: True}}, "parameters.extra_body"),
    (
        "anthropic",
        "claude-sonnet-4-5",
        {"system": f"Use the key {AWS} when asked."},
        "parameters.system",
    ),  # fmt: skip
    (
        "anthropic",
        "claude-sonnet-4-5",
        {"system": f"clone with {GITHUB_PAT}"},
        "parameters.system",
    ),  # fmt: skip
    ("openai", OPENAI, {"base_url": URL}, "model"),
    ("anthropic", "claude-sonnet-4-5", {"api_key_env": "sk-ant-123"}, "api_key_env"),
    (
        "anthropic",
        "claude-sonnet-4-5",
        {"api_key_env": "a8F3kd93JdkE02kdLmQ93kdfjQ"},
        "api_key_env",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("kind", "model", "parameters", "where"), SHAPES)
def test_every_shape_of_a_stored_key_is_refused(kind, model, parameters, where):
    with pytest.raises(ConfigError) as caught:
        check_parameters(kind, model, "native", parameters)
    message = str(caught.value)
    assert message.startswith(where), message
    assert "environment variable" in message and "api_key_env" in message
    for secret in (OPENAI, ANTHROPIC, HF, GITHUB, GITHUB_PAT, SLACK, AWS, "abcdefgh12345"):
        assert secret not in message


def test_a_policy_holding_a_key_is_not_built_either():
    with pytest.raises(ConfigError, match="looks like a secret"):
        build_policy("openai", model="gpt-4o", parameters={"base_url": URL, "extra_body": {"api_key": "k"}})  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "model", "parameters"),
    [
        (
            "anthropic",
            "claude-sonnet-4-5",
            {"api_key_env": "ANTHROPIC_API_KEY", "max_tokens": 512},
        ),  # fmt: skip
        (
            "openai",
            "Qwen/Qwen2.5-7B-Instruct",
            {"base_url": "http://localhost:8000/v1", "api_key_env": "hf_token"},
        ),  # fmt: skip
        (
            "openai",
            "gpt-4o",
            {
                "base_url": "https://llm.example.com/v1?api-version=2024-06-01",
                "extra_body": {
                    "max_completion_tokens": 64,
                    "skip_special_tokens": True,
                    "stop_token_ids": [2],
                    "prompt_cache_key": "arith",
                    "author": "me",
                    "headers": {"X-Request-Source": "steplab"},
                },
                "system": "Use basic arithmetic. Ask-questions. See https://docs.example.com/?page=2 "
                "and task-abcdefghijklmnopqrstuvwxyz.",
            },
        ),
        ("local", "", {"model_dir": "/models/hf_cache/qwen", "max_new_tokens": 24}),
    ],
)
def test_ordinary_parameters_pass(kind, model, parameters):
    check_parameters(kind, model, "native", parameters)


def test_find_secret_reports_the_path_and_never_the_value():
    found = find_secret({"a": [{"b": {"c": f"x {HF} y"}}]})
    assert found == ("parameters.a[0].b.c", "its value is a Hugging Face token (hf_…)")
    assert find_secret({"api_key": ""}) is None  # an empty value holds nothing


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "hf_token", "K"])
def test_an_environment_variable_name_is_accepted(name):
    check_env_name(name)


@pytest.mark.parametrize("value", [HF, GITHUB, "sk-abc", "", 5, "MY KEY", OPENAI])
def test_anything_else_as_api_key_env_is_refused(value):
    with pytest.raises(ConfigError, match="api_key_env"):
        check_env_name(value)
