"""A decoupled run whose samplers are an inference server (issue 19), against a loopback SGLang
that reproduces the real routes' shapes (tests/trainer_core/policies/fake_inference_servers.py):
the server is checked at launch, a vLLM server is refused for a full-weights run with the reason,
and a sampler syncs the server to the version it loads (``/update_weights_from_disk`` with the
version's checkpoint) and plays a group there, whose completions carry the server's log-probs."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.trainer_core.policies.fake_inference_servers import FakeSGLang, FakeVLLM
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.common.errors import ApplicationError
from webapp.rollouts.models import Policy
from webapp.tasks.services import task_set_import
from webapp.training import rl_selectors, rl_services
from webapp.training.rl_jobs import GroupSampler

pytestmark = [pytest.mark.django_db]

OPTIONS = {"group_size": 2, "max_new_tokens": 4, "max_episode_steps": 1, "temperature": 0.7}


@pytest.fixture(scope="module")
def model_dir():
    from trainer_core.training.tiny import build_tiny_model

    return build_tiny_model(
        settings.STEPLAB_DATA_DIR / "models" / "tiny-rl-server", hidden_size=16, num_layers=1
    )


def _launch(model_dir, server, engine: str, name: str):
    from transformers import AutoTokenizer

    tasks = arithmetic_tasks("train", n=2)
    task_set, _ = task_set_import(text=dump_tasks_jsonl(tasks), name=f"arith-served-{name}")
    policy = Policy.objects.create(
        name=f"served-{name}",
        kind="inference_server",
        model="tiny",
        parameters={"base_url": server.url, "engine": engine},
    )
    server.vocab = len(AutoTokenizer.from_pretrained(model_dir))
    return rl_services.rl_run_create(
        task_set=task_set,
        environment="steplab/arithmetic",
        base_model=str(model_dir),
        values=OPTIONS,
        sampler_policy=policy,
    )


def test_a_sampler_syncs_the_server_to_its_version_and_plays_a_group_there(model_dir):
    with FakeSGLang() as server:
        run = _launch(model_dir, server, "sglang", "sglang")
        config = rl_selectors.decoupled_config(run=run)
        sampler = GroupSampler(run, config)
        try:
            sampler.load(0, str(model_dir))
            assert server.model_path == str(model_dir) and server.weight_version == "0"
            row = rl_services.group_claim(run=run, job_id=run.job_id, version=0)
            group = sampler.play(row)
        finally:
            sampler.close()
    assert len(group.completions) == 2
    # each completion's behaviour log-probs on the tokens it sampled are the server's answer's
    answered = [[v for v, _, _ in a["meta_info"]["output_token_logprobs"]] for a in server.answers]
    for completion in group.completions:
        e = completion.encoded
        sampled = [
            logp
            for logp, label, step in zip(
                completion.behaviour_logprobs, e.labels, e.step_ids, strict=True
            )
            if label != -100 and step == 0
        ]
        assert len(completion.behaviour_logprobs) == len(e.input_ids)
        assert sampled and sampled in answered


def test_a_vllm_server_is_refused_for_a_full_weights_run_with_the_reason(model_dir):
    with FakeVLLM() as server, pytest.raises(ApplicationError, match="cannot sample this run") as e:
        _launch(model_dir, server, "vllm", "vllm")
    assert "full-weights" in e.value.message
