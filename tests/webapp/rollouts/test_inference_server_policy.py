"""The inference-server policy kind in the webapp: saved through the same service as the other
kinds, built into the sampler, an engine Steplab cannot update refused with the reason, its
tokenizer read only from the model roots, and no key stored."""

from __future__ import annotations

import pytest
from django.conf import settings

from trainer_core.policies.inference_server import InferenceServerSampler
from webapp.common.errors import ApplicationError
from webapp.rollouts.models import Policy
from webapp.rollouts.services import policy_build, policy_save

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

SERVER = {"base_url": "http://gpu1:8000", "engine": "vllm", "api_key_env": "VLLM_API_KEY"}


def test_an_inference_server_policy_is_saved_and_built_into_a_sampler():
    tokenizer_dir = str(settings.STEPLAB_MODEL_ROOTS[0])
    policy = policy_save(
        name="served",
        kind=Policy.Kind.INFERENCE_SERVER,
        model="Qwen/Qwen2.5-0.5B-Instruct",
        parameters={**SERVER, "tokenizer_dir": tokenizer_dir, "temperature": 0.7},
    )
    sampler = policy_build(policy=policy)
    assert isinstance(sampler, InferenceServerSampler)
    assert (sampler.engine, sampler.model, sampler.base_url, sampler.temperature) == (
        "vllm",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "http://gpu1:8000",
        0.7,
    )
    sampler.close()


def test_an_engine_steplab_cannot_update_is_refused_with_the_reason():
    with pytest.raises(ApplicationError, match="cannot update"):
        policy_save(
            name="ollama", kind="inference_server", parameters={**SERVER, "engine": "ollama"}
        )


def test_truncated_sampling_is_refused_when_built():
    row = Policy.objects.create(
        name="top-p", kind="inference_server", parameters={**SERVER, "top_p": 0.9}
    )
    with pytest.raises(ApplicationError, match="top_p=0.9 is refused"):
        policy_build(policy=row)


def test_the_tokenizer_is_read_only_from_the_model_roots():
    with pytest.raises(ApplicationError, match="outside the directories"):
        policy_save(
            name="peek", kind="inference_server", parameters={**SERVER, "tokenizer_dir": "/etc"}
        )
    row = Policy.objects.create(
        name="edited", kind="inference_server", parameters={**SERVER, "tokenizer_dir": "/etc"}
    )
    with pytest.raises(ApplicationError, match="outside the directories"):
        policy_build(policy=row)


def test_no_key_is_stored_in_an_inference_server_policy():
    with pytest.raises(ApplicationError, match="looks like a secret"):
        policy_save(
            name="keyed",
            kind="inference_server",
            parameters={**SERVER, "base_url": "http://user:sk-abcdefghijklmnop1234@gpu1:8000"},
        )
