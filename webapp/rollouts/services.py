"""Policies and collect runs: create, try, estimate, launch; and the writes of a running collect
job (claim an episode, stream its steps, finish it, close the run)."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from trainer_core.envs import make
from trainer_core.envs import spec as env_spec
from trainer_core.errors import ConfigError, SteplabError
from trainer_core.policies.base import decide, play_step
from trainer_core.policies.factory import build_policy, check_parameters
from trainer_core.policies.pricing import estimate_cost, known_price
from trainer_core.policies.scripted import ScriptedPolicy
from trainer_core.policies.secrets import check_no_secret
from trainer_core.policies.user import PolicyUser
from trainer_core.recording.schema import Outcome
from trainer_core.rollouts.collect import (
    EpisodeResult,
    EpisodeSpec,
    episode_seed,
    run_episode,
    stop_env,
)
from trainer_core.tasks.model import Task as TaskSpec
from trainer_core.tasks.model import ToolCall
from webapp.common.errors import ApplicationError
from webapp.common.paths import path_inside_roots
from webapp.jobs.names import Kinds, Queue
from webapp.jobs.services import job_enqueue
from webapp.rollouts.models import CollectRun, Episode, Policy
from webapp.tasks.models import Task as TaskRow
from webapp.tasks.models import TaskSet
from webapp.tasks.selectors import quarantined_task_ids, quarantined_task_ids_query
from webapp.trajectories import services as store
from webapp.trajectories.models import Trajectory

# What an average model call is assumed to cost in tokens, for the estimate before launch: the
# system prompt with the tool list, the task, and the history so far (which grows each step).
BASE_PROMPT_TOKENS = 900
HISTORY_TOKENS_PER_STEP = 250
OUTPUT_TOKENS_PER_CALL = 200


def environment_make(*, env_id: str, **overrides: Any) -> Any:
    """``make(env_id, **overrides)`` with what the app gives every environment that takes it:
    the data directory (``steplab/browser`` writes its screenshots under it, so the pages can
    show them after the episode) and whether to take screenshots at all."""
    parameters = inspect.signature(env_spec(env_id).load()).parameters
    if "data_dir" in parameters:
        overrides.setdefault("data_dir", settings.STEPLAB_DATA_DIR)
    if "screenshots" in parameters:  # STEPLAB_BROWSER_SCREENSHOTS=0 turns them off
        overrides.setdefault("screenshots", settings.STEPLAB_BROWSER_SCREENSHOTS)
    return make(env_id, **overrides)


def has_simulated_user(*, env_id: str) -> bool:
    """Whether the environment talks to a simulated user a policy can play (it takes ``user``)."""
    return "user" in inspect.signature(env_spec(env_id).load()).parameters


def simulated_user(*, policy: Policy, seed: int) -> Any:
    """A factory of the simulated user that ``policy`` plays (``trainer_core.policies.user``),
    built in the worker for each episode."""
    return lambda: PolicyUser(policy_build(policy=policy, seed=seed))


def _check(
    kind: str, model: str, prompt_format: str, parameters: dict[str, Any], text: str = ""
) -> None:
    """The policy's description, parameters included, holds no key (at any depth)."""
    try:
        check_parameters(kind, model, prompt_format, parameters)
        check_no_secret(text, "the name or description")
    except ConfigError as exc:
        raise ApplicationError(f"Invalid policy: {exc}.") from None


def policy_save(
    *,
    name: str,
    kind: str,
    model: str = "",
    prompt_format: str = "native",
    parameters: dict[str, Any] | None = None,
    description: str = "",
    user=None,
    instance: Policy | None = None,
) -> Policy:
    parameters = dict(parameters or {})
    _check(kind, model, prompt_format, parameters, f"{name}\n{description}")
    _check_policy_paths(kind, model, parameters)
    if Policy.objects.filter(name=name).exclude(pk=getattr(instance, "pk", None)).exists():
        raise ApplicationError(f"A policy named {name!r} exists already; choose another name.")
    policy = instance or Policy(
        created_by=user if getattr(user, "is_authenticated", False) else None
    )
    policy.name = name
    policy.kind = kind
    policy.model = model
    policy.prompt_format = prompt_format
    policy.parameters = parameters
    policy.description = description
    policy.save()
    return policy


def _check_model_dir(model_dir: str, what: str = "local model directory") -> None:
    """A local policy reads its model only from the model roots (its directory is checked
    when it is saved and again when it is built)."""
    path_inside_roots(
        path=model_dir,
        roots=settings.STEPLAB_MODEL_ROOTS,
        what=what,
        setting="STEPLAB_MODEL_ROOTS",
    )


def _check_policy_paths(kind: str, model: str, parameters: dict[str, Any]) -> None:
    """The directories a policy reads on a worker: a local model's, an inference server's
    tokenizer (the served model's, for prompts and the stop id)."""
    if kind == Policy.Kind.LOCAL:
        _check_model_dir(parameters.get("model_dir") or model)
    if kind == Policy.Kind.INFERENCE_SERVER and parameters.get("tokenizer_dir"):
        _check_model_dir(parameters["tokenizer_dir"], "inference server's tokenizer directory")


def policy_build(*, policy: Policy, seed: int = 0) -> Any:
    """The policy object that acts (ApplicationError when it cannot be built)."""
    _check_policy_paths(policy.kind, policy.model, policy.parameters or {})
    try:
        return build_policy(
            policy.kind,
            model=policy.model,
            prompt_format=policy.prompt_format,
            parameters=policy.parameters,
            seed=seed,
            name=policy.name,
            # a local model records the ids it was prompted with and sampled (the drift check)
            return_logprobs=policy.kind == Policy.Kind.LOCAL,
        )
    except ConfigError as exc:
        raise ApplicationError(f"Policy {policy.name!r} cannot be built: {exc}.") from None


@dataclass
class TryResult:
    task: str
    observation: str
    action: dict[str, Any] | None
    error: str | None
    raw: str
    usage: dict[str, Any]
    result: str  # the environment's answer to the action
    seconds: float


def policy_try_launch(*, policy: Policy, task: TaskRow, user=None):
    """Launch "Try it" as a job: one step of ``policy`` on ``task``, played where collect runs
    (a rollouts worker; the gpu queue for a local model), never in the web process."""
    queue = Queue.GPU if policy.kind == Policy.Kind.LOCAL else None
    return job_enqueue(
        kind=Kinds.TRY_POLICY,
        params={"policy_id": policy.pk, "task_id": task.pk},
        user=user,
        queue=queue,
        message=f"Waiting for a worker to try {policy.name}.",
    )


def policy_try(*, policy: Policy, task: TaskRow) -> TryResult:
    """One step of ``policy`` on ``task``: the action it chose, its usage, and what the
    environment answered. Failures of the backend (no key, server down) become a clear error.
    Runs in a worker (``jobs.try_run``): the environment seeds its sandbox there."""
    spec = TaskSpec.model_validate(task.data)
    env_id = task.environment or task.task_set.environment
    if not env_id:
        raise ApplicationError(f"Task {task} names no environment; set one on its task set.")
    started = time.monotonic()
    try:
        env = environment_make(env_id=env_id)
    except SteplabError as exc:
        raise ApplicationError(f"The environment {env_id!r} cannot start: {exc}") from None
    try:
        ts = env.reset(task=spec, seed=0)
        agent = policy_build(policy=policy)
        agent.reset(env.task or spec)
        decision = decide(agent, ts.observation, [], env.available_tools)
        answer = play_step(env, decision)
    except SteplabError as exc:
        raise ApplicationError(f"Trying {policy.name!r} failed: {exc}") from None
    finally:
        env.close()
    return TryResult(
        task=str(task),
        observation=ts.observation,
        action=decision.action,
        error=decision.error,
        raw=decision.raw,
        usage=decision.usage.as_dict(),
        result=answer.observation,
        seconds=time.monotonic() - started,
    )


@dataclass
class Estimate:
    episodes: int
    expected_steps: float  # per episode, from the tasks' reference solutions (capped)
    calls_expected: int
    calls_max: int
    cost_expected: float | None  # None: no known price for the model
    cost_max: float | None
    priced: bool
    llm: bool

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _call_tokens(steps: float) -> tuple[int, int]:
    """Average input and output tokens per call over an episode of ``steps`` steps."""
    return int(BASE_PROMPT_TOKENS + HISTORY_TOKENS_PER_STEP * max(steps - 1, 0) / 2), (
        OUTPUT_TOKENS_PER_CALL
    )


def collect_estimate(
    *, policy: Policy, task_set: TaskSet, episodes_per_task: int, max_steps: int
) -> Estimate:
    playable = task_set.tasks.exclude(pk__in=quarantined_task_ids_query())  # as collect_launch
    tasks = list(playable.values_list("data", flat=True))
    episodes = len(tasks) * episodes_per_task
    lengths = [
        min(
            max_steps,
            (data.get("reference_steps") or len(data.get("reference_solution") or []) or max_steps)
            + 1,
        )
        for data in tasks
    ]
    expected = sum(lengths) / len(lengths) if lengths else 0.0
    calls_expected = math.ceil(expected * episodes)
    calls_max = episodes * max_steps
    llm = policy.is_llm
    prices = {k: policy.parameters.get(k) for k in ("price_in", "price_out")}
    priced = llm and (known_price(policy.model) or all(v is not None for v in prices.values()))
    cost_expected = cost_max = None
    if not llm:
        cost_expected = cost_max = 0.0
    elif priced:
        tin, tout = _call_tokens(expected)
        cost_expected = estimate_cost(policy.model, calls_expected, tin, tout, **prices)
        tin, tout = _call_tokens(max_steps)
        cost_max = estimate_cost(policy.model, calls_max, tin, tout, **prices)
    return Estimate(
        episodes, expected, calls_expected, calls_max, cost_expected, cost_max, priced, llm
    )


def collect_launch(
    *,
    task_set: TaskSet,
    policy: Policy,
    environment: str = "",
    episodes_per_task: int = 1,
    max_steps: int = 30,
    step_timeout: float | None = None,
    concurrency: int = 2,
    seed: int = 0,
    spend_cap_usd: float | None = None,
    user=None,
    parent_job=None,
    task_offset: int = 0,
    num_tasks: int = 0,
    user_policy: Policy | None = None,
    include_quarantined: bool = False,
) -> CollectRun:
    """Create the run, one Episode row per (task, episode), and the job that plays them (a child
    of ``parent_job`` when an evaluation run or a pipeline launches it). ``user_policy`` plays
    the simulated user of an environment that has one (``steplab/customer-service``).
    Quarantined tasks are left out (after the ``task_offset``/``num_tasks`` slice, so a
    pipeline's slices stay put) unless ``include_quarantined`` (one chosen task's episode)."""
    environment = environment or task_set.environment
    if not environment:
        raise ApplicationError(
            f"Task set {task_set.name!r} names no environment; choose one in the form."
        )
    try:
        env_spec(environment)
    except ConfigError as exc:
        raise ApplicationError(str(exc)) from None
    tasks = list(task_set.tasks.order_by("external_id"))
    if task_offset or num_tasks:  # a slice of the set (a pipeline's iterations take turns)
        tasks = tasks[task_offset : task_offset + num_tasks if num_tasks else None]
    if tasks and not include_quarantined:
        held = quarantined_task_ids(task_ids=[t.pk for t in tasks])
        if held and len(held) == len(tasks):
            raise ApplicationError(
                f"Every task of {task_set.name!r} to play is quarantined; release some on the "
                "task set's health page."
            )
        tasks = [t for t in tasks if t.pk not in held]
    if not tasks:
        raise ApplicationError(
            f"Task set {task_set.name!r} has no tasks"
            + (f" from position {task_offset}." if task_offset else ".")
        )
    if episodes_per_task < 1 or max_steps < 1 or concurrency < 1:
        raise ApplicationError("Episodes per task, max steps and concurrency must be at least 1.")
    if spend_cap_usd is not None and spend_cap_usd <= 0:
        raise ApplicationError("The spend cap must be above 0 (leave it empty for no cap).")
    policy_build(policy=policy)  # fail now, in the form, when the policy cannot be built
    if user_policy is not None:
        if not has_simulated_user(env_id=environment):
            raise ApplicationError(
                f"The environment {environment!r} has no simulated user for a policy to play; "
                "leave the user policy empty."
            )
        policy_build(policy=user_policy)
    with transaction.atomic():
        run = CollectRun.objects.create(
            task_set=task_set,
            policy=policy,
            user_policy=user_policy,
            environment=environment,
            episodes_per_task=episodes_per_task,
            max_steps=max_steps,
            step_timeout=step_timeout,
            concurrency=concurrency,
            seed=seed,
            spend_cap_usd=spend_cap_usd,
            episodes_total=len(tasks) * episodes_per_task,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        Episode.objects.bulk_create(
            [
                Episode(
                    run=run,
                    task=task,
                    index=index,
                    seed=episode_seed(seed, task.external_id, index),
                )
                for task in tasks
                for index in range(episodes_per_task)
            ]
        )
        run.job = job_enqueue(
            kind=Kinds.COLLECT,
            params={"run_id": run.pk},
            user=user,
            parent=parent_job,
            message=f"Waiting for a worker to start {run.episodes_total} episodes.",
        )
        run.save(update_fields=["job"])
    return run


BUILTIN_POLICIES = [
    {
        "name": "scripted",
        "kind": "scripted",
        "description": "Plays each task's reference solution: every episode succeeds.",
        "parameters": {},
    },
    {
        "name": "scripted-noisy",
        "kind": "scripted",
        "description": "The reference solution with mistakes: wrong tools, missing parameters, "
        "repeats, and a wrong final answer in about a third of the episodes.",
        "parameters": {
            "mistakes": {
                "wrong_tool": 0.15,
                "bad_params": 0.1,
                "repeat_step": 0.1,
                "wrong_answer": 0.3,
            }
        },
    },
]


def policies_seed_builtin() -> str:
    created = 0
    for data in BUILTIN_POLICIES:
        _, made = Policy.objects.get_or_create(
            name=data["name"],
            defaults={
                "kind": data["kind"],
                "description": data["description"],
                "parameters": data["parameters"],
            },
        )
        created += made
    return f"{created} created, {len(BUILTIN_POLICIES) - created} already there"


# --- a running collect job's writes ------------------------------------------------------------


def episodes_release(*, run: CollectRun, job_id: int) -> int:
    """A resumed child: the episodes it had claimed go back to pending (to be played over)."""
    orphans = run.episodes.filter(claimed_by=job_id, status=Episode.Status.RUNNING)
    return orphans.update(status=Episode.Status.PENDING, claimed_by=None)


def episode_claim(*, run: CollectRun, job_id: int) -> Episode | None:
    """Claim the next pending episode for the child job ``job_id`` (row lock; SKIP LOCKED on
    PostgreSQL, so children never wait on each other). None: nothing is left."""
    skip = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        episode = (
            Episode.objects.select_for_update(skip_locked=skip)
            .filter(run=run, status=Episode.Status.PENDING)
            .order_by("task_id", "index")
            .first()
        )
        if episode is None:
            return None
        episode.status = Episode.Status.RUNNING
        episode.claimed_by = job_id
        episode.attempts += 1
        episode.started_at = timezone.now()
        episode.save(update_fields=["status", "claimed_by", "attempts", "started_at", "updated_at"])
    return episode


def collect_run_stop(*, run: CollectRun, reason: str) -> None:
    """Record why the run stops early (spend cap, cancel); the first reason stays."""
    CollectRun.objects.filter(pk=run.pk, stop_reason="").update(stop_reason=reason)


def episodes_cancel(*, run: CollectRun, job_id: int) -> None:
    """The run was cancelled: the child's running episode ends failed (its trajectory truncated)
    and skipped, and every pending episode is skipped. The reason is recorded first, so whoever
    sees no episode left running or pending also sees why."""
    collect_run_stop(run=run, reason="cancelled")
    interrupted = run.episodes.filter(
        claimed_by=job_id, status=Episode.Status.RUNNING
    ).select_related("trajectory")
    for episode in interrupted:
        if episode.trajectory is not None:
            store.trajectory_finish(
                trajectory=episode.trajectory,
                outcome={"truncated": True, "metadata": {"stopped": "cancelled"}},
                failed=True,
                error="the run was cancelled during this episode",
            )
        episode.status = Episode.Status.SKIPPED
        episode.error = "cancelled while running"
        episode.finished_at = timezone.now()
        episode.save(update_fields=["status", "error", "finished_at", "updated_at"])
    run.episodes.filter(status=Episode.Status.PENDING).update(
        status=Episode.Status.SKIPPED, error="the run was cancelled"
    )


def episode_begin(*, run: CollectRun, episode: Episode, task: TaskSpec) -> Trajectory:
    """The episode's trajectory, begun under its idempotency key (a re-played episode starts its
    trajectory over, so each step is stored once), and the episode's counters reset."""
    task_row = episode.task
    policy = run.policy
    trajectory = store.trajectory_begin(
        key=episode.idempotency_key,
        prompt=task.prompt,
        task=task_row,
        task_ref=task_row.external_id,
        domain=task_row.domain,
        agent="steplab",
        model=policy.model or policy.kind,
        policy=policy.name,
        environment=run.environment,
        metadata={"collect_run": run.pk, "episode": episode.index, "seed": episode.seed},
    )
    if trajectory.step_count or trajectory.steps.exists():
        trajectory = store.trajectory_restart(trajectory=trajectory)
    episode.trajectory = trajectory
    episode.steps = episode.tokens_in = episode.tokens_out = 0
    episode.cost_usd = 0.0
    episode.save(
        update_fields=["trajectory", "steps", "tokens_in", "tokens_out", "cost_usd", "updated_at"]
    )
    return trajectory


def episode_record_step(*, run: CollectRun, episode: Episode, trajectory: Trajectory, step) -> None:
    """Store one step as it happens, and add its tokens and cost to the episode and the run."""
    episode_record_steps(run=run, episode=episode, trajectory=trajectory, steps=[step])


def episode_record_steps(
    *, run: CollectRun, episode: Episode, trajectory: Trajectory, steps: Sequence[Any]
) -> None:
    """Store an episode's next steps (in one transaction), and add their tokens and cost to the
    episode and the run."""
    if not steps:
        return
    store.trajectory_append_steps(trajectory=trajectory, steps=steps)
    # the policy's cost and a simulated user's model's (``user_cost``) both count for the run
    cost = sum(
        float(step.metadata.get("cost") or 0.0) + float(step.metadata.get("user_cost") or 0.0)
        for step in steps
    )
    tokens_in = sum(step.tokens_in or 0 for step in steps)
    tokens_out = sum(step.tokens_out or 0 for step in steps)
    Episode.objects.filter(pk=episode.pk).update(
        steps=max(step.index for step in steps) + 1,
        tokens_in=F("tokens_in") + tokens_in,
        tokens_out=F("tokens_out") + tokens_out,
        cost_usd=F("cost_usd") + cost,
    )
    if cost or tokens_in or tokens_out:
        CollectRun.objects.filter(pk=run.pk).update(
            tokens_in=F("tokens_in") + tokens_in,
            tokens_out=F("tokens_out") + tokens_out,
            cost_usd=F("cost_usd") + cost,
        )


def episode_finish(
    *,
    run: CollectRun,
    episode: Episode,
    trajectory: Trajectory,
    outcome: Outcome,
    error: str,
    stopped: str,
    cost_usd: float,
) -> None:
    """The episode ended: its trajectory gets the outcome; the episode and the run's counters are
    updated in one transaction. An ``error`` (the policy or environment broke) fails it."""
    failed = bool(error)
    trajectory = store.trajectory_finish(
        trajectory=trajectory, outcome=outcome, failed=failed, error=error, cost_usd=cost_usd
    )
    with transaction.atomic():
        Episode.objects.filter(pk=episode.pk).update(
            status=Episode.Status.FAILED if failed else Episode.Status.FINISHED,
            success=None if failed else outcome.success,
            reward=trajectory.reward,
            steps=trajectory.step_count,
            error=error or stopped,
            finished_at=timezone.now(),
        )
        CollectRun.objects.filter(pk=run.pk).update(
            episodes_done=F("episodes_done") + (0 if failed else 1),
            episodes_failed=F("episodes_failed") + (1 if failed else 0),
            successes=F("successes") + (1 if (not failed and outcome.success) else 0),
        )


def collect_run_close(*, run: CollectRun) -> dict[str, int]:
    """The run's last stage: episodes left pending are skipped (with the run's stop reason),
    episodes left running (their worker died for good) fail; returns the count per status."""
    with transaction.atomic():
        reason = run.stop_reason or "not played (the run stopped)"
        run.episodes.filter(status=Episode.Status.PENDING).update(
            status=Episode.Status.SKIPPED, error=reason
        )
        lost = run.episodes.filter(status=Episode.Status.RUNNING)
        lost_count = lost.update(
            status=Episode.Status.FAILED,
            error="its worker stopped and the episode could not be resumed",
            finished_at=timezone.now(),
        )
        if lost_count:
            CollectRun.objects.filter(pk=run.pk).update(
                episodes_failed=F("episodes_failed") + lost_count
            )
    run.refresh_from_db()
    return {status: run.episodes.filter(status=status).count() for status in Episode.Status.values}


def policy_with_temperature(*, policy: Policy, temperature: float | None) -> Policy:
    """``policy`` itself, or a sibling of a local policy that samples at ``temperature`` (made
    once, reused after): GRPO groups need sampled, not greedy, episodes."""
    if temperature is None or policy.kind != Policy.Kind.LOCAL:
        return policy
    if float((policy.parameters or {}).get("temperature", 0.0)) == float(temperature):
        return policy
    name = f"{policy.name}@t{temperature:g}"[:120]
    sibling, _ = Policy.objects.get_or_create(
        name=name,
        defaults={
            "kind": policy.kind,
            "model": policy.model,
            "prompt_format": policy.prompt_format,
            "parameters": {**(policy.parameters or {}), "temperature": float(temperature)},
            "description": f"{policy.name} sampling at temperature {temperature:g}.",
        },
    )
    return sibling


def policy_add_parameters(*, policy: Policy, parameters: dict[str, Any]) -> Policy:
    """Add (or replace) some of a policy's parameters, e.g. the prompt a registered checkpoint
    inherits from the policy it was trained from."""
    if parameters:
        policy.parameters = {**policy.parameters, **parameters}
        policy.save(update_fields=["parameters"])
    return policy


# --- one episode on one task ----------------------------------------------------------------------


def episode_launch(
    *, task: TaskRow, policy: Policy, max_steps: int = 20, seed: int = 0, user=None
) -> CollectRun:
    """One episode of ``policy`` on one task, played by a worker: a collect run of the task's set
    narrowed to that task (its trajectory is stored like any collected one)."""
    position = task.task_set.tasks.filter(external_id__lt=task.external_id).count()
    return collect_launch(
        task_set=task.task_set,
        policy=policy,
        environment=task.environment,
        max_steps=max_steps,
        concurrency=1,
        seed=seed,
        user=user,
        task_offset=position,
        num_tasks=1,
        include_quarantined=True,
    )


def episode_play(
    *,
    task: TaskRow,
    policy: Policy | None = None,
    actions: list[dict[str, Any]] | None = None,
    max_steps: int = 20,
    seed: int = 0,
) -> EpisodeResult:
    """One episode played here, in this process, and not stored (``steplab mcp`` over stdio: it
    runs on the server like the other commands; the web process never plays episodes). The
    policy plays, or, given ``actions`` (tool calls), a scripted policy plays exactly those; no
    policy and no actions: the task's reference solution."""
    spec = TaskSpec.model_validate(task.data)
    if actions is not None:
        try:
            calls = [ToolCall.model_validate(action) for action in actions]
        except ValueError as exc:
            raise ApplicationError(
                f"The actions are not tool calls ({exc}): give a list of {{tool, params}}."
            ) from None
        spec = spec.model_copy(update={"reference_solution": calls})
    env_id = task.environment or task.task_set.environment
    if not env_id:
        raise ApplicationError(f"Task {task} names no environment; set one on its task set.")
    agent = ScriptedPolicy(seed=seed)
    if policy is not None and actions is None:
        agent = policy_build(policy=policy, seed=seed)
    try:
        env = environment_make(env_id=env_id, max_steps=None)
    except SteplabError as exc:
        raise ApplicationError(f"The environment {env_id!r} cannot start: {exc}") from None
    try:
        return run_episode(
            env,
            agent,
            EpisodeSpec(task=spec, episode=0, seed=seed),
            max_steps=max_steps,
            environment=env_id,
            policy_name=policy.name if policy is not None and actions is None else "scripted",
            model=policy.model if policy is not None and actions is None else "",
        )
    finally:
        stop_env(env)
