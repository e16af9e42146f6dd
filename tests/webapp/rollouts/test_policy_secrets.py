"""No key is stored in a policy (issue 17, problem 6 and point 5): each shape the issue found
stored and shown to a viewer is refused through the policy form, the service and the CLI, with
a message saying where keys belong; a reward model's judge is held to the same rule."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.test_cli import _run
from tests.trainer_core.policies.test_secrets import ANTHROPIC, HF, OPENAI, URL
from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError
from webapp.rewards import services as reward_services
from webapp.rewards.models import RewardModel
from webapp.rollouts.models import Policy
from webapp.rollouts.services import policy_save

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

# (form fields, where the message says the key is): the five shapes of problem 6
SHAPES = [
    pytest.param(
        {
            "kind": "openai",
            "model": "gpt-4o",
            "parameters": {"base_url": f"https://user:{OPENAI}@llm.example.com/v1"},
        },  # fmt: skip
        "parameters.base_url",
        id="url-with-credentials",
    ),
    pytest.param(
        {
            "kind": "openai",
            "model": "gpt-4o",
            "parameters": {"base_url": URL, "extra_body": {"api_key": "k-123"}},
        },  # fmt: skip
        "parameters.extra_body.api_key",
        id="nested-api-key",
    ),
    pytest.param(
        {
            "kind": "openai",
            "model": "gpt-4o",
            "parameters": {
                "base_url": URL,
                "extra_body": {"headers": {"Authorization": "Bearer abcdefgh12345"}},
            },
        },  # fmt: skip
        "parameters.extra_body.headers.Authorization",
        id="authorization-header",
    ),
    pytest.param(
        {"kind": "anthropic", "model": ANTHROPIC, "parameters": {}},
        "model",
        id="key-as-model-name",
    ),
    pytest.param(
        {"kind": "anthropic", "model": "claude-sonnet-4-5", "parameters": {"api_key_env": HF}},
        "api_key_env",
        id="token-as-api-key-env",
    ),
]
SECRETS = (OPENAI, ANTHROPIC, HF, "k-123", "abcdefgh12345")


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user(Role.ADMIN))
    return client


def _post(client, fields: dict) -> str:
    data = {
        "name": "p",
        "prompt_format": "native",
        "description": "",
        **fields,
        "parameters": json.dumps(fields["parameters"]),
    }
    response = client.post(reverse("rollouts:policy_new"), data)
    assert response.status_code == 200, "the form should have been refused"
    return response.content.decode()


@pytest.mark.parametrize(("fields", "where"), SHAPES)
def test_the_policy_form_refuses_each_shape(admin_client, fields, where):
    body = _post(admin_client, fields)
    assert f"Invalid policy: {where} looks like" in body
    assert "put the key in an environment variable" in body and "api_key_env" in body
    assert not Policy.objects.exists()


@pytest.mark.parametrize(("fields", "where"), SHAPES)
def test_the_service_refuses_each_shape(fields, where):
    with pytest.raises(ApplicationError) as caught:
        policy_save(name="p", prompt_format="native", **fields)
    assert caught.value.message.startswith(f"Invalid policy: {where} looks like")
    assert not any(secret in caught.value.message for secret in SECRETS)
    assert not Policy.objects.exists()


def test_a_key_in_the_description_is_refused_too():
    with pytest.raises(ApplicationError, match="the name or description looks like a secret"):
        policy_save(name="p", kind="scripted", description=f"key: {OPENAI}")


def test_an_ordinary_policy_is_stored_and_shown(admin_client):
    parameters = {"api_key_env": "OPENAI_API_KEY", "base_url": URL, "extra_body": {"max_completion_tokens": 64}}  # fmt: skip
    response = admin_client.post(
        reverse("rollouts:policy_new"),
        {"name": "p", "kind": "openai", "model": "gpt-4o", "prompt_format": "native",
         "parameters": json.dumps(parameters), "description": ""},
    )  # fmt: skip
    assert response.status_code == 302
    assert Policy.objects.get(name="p").parameters == parameters


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(
            ["base_url=" + json.dumps(f"https://u:{OPENAI}@h.example/v1")],
            id="url-with-credentials",
        ),  # fmt: skip
        pytest.param(
            ["base_url=" + json.dumps(URL), 'extra_body={"api_key": "k-123"}'], id="nested-api-key"
        ),  # fmt: skip
        pytest.param(
            [
                "base_url=" + json.dumps(URL),
                'extra_body={"headers": {"Authorization": "Bearer abcdefgh12345"}}',
            ],
            id="authorization-header",
        ),  # fmt: skip
        pytest.param(
            ["base_url=" + json.dumps(URL), "api_key_env=" + json.dumps(HF)],
            id="token-as-api-key-env",
        ),  # fmt: skip
    ],
)
def test_steplab_collect_refuses_each_shape(tmp_path, params):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"id": "a", "prompt": "2+2?", "expected_answer": 4, "checker": "number"}\n')
    output = tmp_path / "out.jsonl"
    args = [f"--param={p}" for p in params]
    proc = _run("collect", str(tasks), "--env", "steplab/arithmetic", "--policy", "openai",
                "--model", "gpt-4o", *args, "-o", str(output))  # fmt: skip
    assert proc.returncode != 0 and "looks like" in proc.stderr
    assert "put the key in an environment variable" in proc.stderr
    assert not any(secret in proc.stderr for secret in SECRETS)
    assert not output.exists() or output.read_text() == ""


def test_steplab_collect_refuses_a_key_as_the_model_name(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"id": "a", "prompt": "2+2?", "expected_answer": 4, "checker": "number"}\n')
    proc = _run("collect", str(tasks), "--env", "steplab/arithmetic", "--policy", "anthropic",
                "--model", ANTHROPIC, "-o", str(tmp_path / "out.jsonl"))  # fmt: skip
    assert proc.returncode != 0 and "model looks like a secret" in proc.stderr
    assert ANTHROPIC not in proc.stderr


@pytest.mark.parametrize(
    "judge",
    [
        {
            "kind": "openai",
            "model": "gpt-4o",
            "base_url": f"https://user:{OPENAI}@llm.example.com/v1",
        },  # fmt: skip
        {"kind": "anthropic", "model": ANTHROPIC},
        {"kind": "anthropic", "model": "claude-haiku-4-5", "api_key_env": HF},
    ],
)
def test_a_reward_models_judge_is_held_to_the_same_rule(judge):
    reward_services.rubrics_seed(domain="coding")
    with pytest.raises(ApplicationError, match="Invalid reward-model settings: judge") as caught:
        reward_services.reward_model_create(domain="coding", judge=judge)
    assert "environment variable" in caught.value.message
    assert not RewardModel.objects.exists()
