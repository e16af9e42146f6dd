"""Reads for the token view of a training sample (issue 21): a decoupled RL run's stored
completion and the run's tokenizer (``token_pages`` renders them)."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from trainer_core.errors import SteplabError
from webapp.common.errors import ApplicationError
from webapp.training.models import RLRun, SampleGroup

TOKENS_PER_PAGE = 1000


def sample_tokens(*, run: RLRun, group_id: int, index: int, start: int = 0) -> dict[str, Any]:
    """The page's data: the group, the sample and a page of its tokens from ``start``
    (Http404: no such group in this run, or no such sample in the group)."""
    from trainer_core.training import drift
    from trainer_core.training.token_view import sequence_view

    group = SampleGroup.objects.filter(run=run, pk=group_id).select_related("task").first()
    completions = (group.payload or {}).get("completions") if group is not None else None
    if not isinstance(completions, list) or not 0 <= index < len(completions):
        raise Http404("No such sample in this run.")
    sample = completions[index]
    ids = sample.get("input_ids") or []
    try:
        tokenizer = drift.load_tokenizer(run.training_run.base_model)
    except SteplabError as exc:
        raise ApplicationError(f"The run's tokenizer cannot be loaded: {exc}") from None
    view = sequence_view(
        f"sample {index}",
        tokenizer,
        input_ids=ids,
        labels=sample.get("labels") or [],
        step_ids=sample.get("step_ids") or [],
        logprobs=sample.get("behaviour_logprobs"),
        start=start,
        limit=TOKENS_PER_PAGE,
    )
    view.notes.append(
        "The ids the sampler recorded and the trainer consumed as they are (never re-tokenised); "
        "hover a token for its id, step and behaviour log-prob."
    )
    trajectories = (group.payload or {}).get("trajectory_ids") or []
    return {
        "run": run,
        "group": group,
        "index": index,
        "sample": {k: sample.get(k) for k in ("reward", "success", "step_rewards")},
        "turns": (sample.get("turns") or [])[:200],
        "trajectory_id": trajectories[index] if index < len(trajectories) else None,
        "samples": range(len(completions)),
        "view": view,
    }


def rl_probe(*, run: RLRun) -> tuple[str, str, list[dict[str, Any]]] | None:
    """What the drift check compares before a decoupled run samples, when its samplers tokenise
    with their own tokenizer (an inference server's ``tokenizer_dir``, not the base model's):
    the trainer's and the sampler's tokenizer directories and a probe conversation (the first
    task's prompt and a short answer). None when the samplers use the trainer's tokenizer."""
    from trainer_core.tasks.model import Task as TaskSpec
    from webapp.tasks.models import Task

    policy = run.sampler_policy
    sampler_dir = str(((policy.parameters or {}) if policy else {}).get("tokenizer_dir") or "")
    trainer_dir = run.training_run.base_model
    if not sampler_dir or sampler_dir == trainer_dir:
        return None
    task = Task.objects.filter(pk__in=[int(t) for t in run.task_ids[:1]]).first()
    prompt = TaskSpec.model_validate(task.data).prompt if task is not None else "What is 1 + 1?"
    probe = [{"role": "user", "content": prompt}, {"role": "assistant", "content": "OK."}]
    return trainer_dir, sampler_dir, probe
