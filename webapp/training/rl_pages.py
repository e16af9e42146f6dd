"""Reads behind a decoupled RL run's pages, its API and its CLI (issue 19): the launch form (its
fields, with the decoupled trainer's options and their help, and what it offers to pick), the
YAML preview, each option checked by name, and the run's page — samplers online (from their
jobs' heartbeats) with their episodes per minute, the queue of ready groups, the version
timeline, the staleness histogram, the reward curve whose every step links to the groups it
was trained on, and those groups with their episodes.

The figures come from :mod:`webapp.training.rl_selectors`; this module shapes them for the
page, the API and the CLI, and parses what a form or a command sends.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import Http404
from django.utils import timezone

from trainer_core.envs import list_envs
from trainer_core.training.config import config_help, config_to_yaml
from trainer_core.training.grpo import GRPOConfig
from webapp.common.errors import ApplicationError
from webapp.jobs.models import JobMetricPoint, JobStatus
from webapp.rewards.models import RewardModel
from webapp.rollouts.models import Policy
from webapp.tasks.models import TaskSet
from webapp.training import rl_selectors, rl_services, selectors
from webapp.training.models import RLRun, SampleGroup, TrainingRun
from webapp.training.services import base_model_dir

#: Series of the run's curve, each with the scale (and so the axis) it is drawn on.
CURVE_SERIES = (
    ("reward", "reward"),
    ("success_rate", "rate"),
    ("staleness_mean", "versions"),
    ("dropped", "groups"),
)

#: Steps listed under the curve (the newest first); the chart links every step.
CURVE_ROWS = 30

#: Versions listed in the timeline (the newest first).
TIMELINE_ROWS = 50

#: Launch fields that are not config options: (name, what it is).
RUN_FIELDS = {
    "name": "the run's name",
    "task_set": "the task set's id",
    "environment": "the environment (empty: the task set's)",
    "samplers": "sampler jobs to start",
    "sampler_policy": "an inference-server policy's id (empty: the run's own model)",
    "reward_model": "a reward-model version's id (empty: the environment's reward only)",
    "max_queue": "ready groups above which samplers wait (0: four steps' worth)",
}

MAX_SAMPLERS = 64


# --- the launch form -----------------------------------------------------------------------------


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return ""


def form_fields(*, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The DecoupledConfig options a run's form shows (those the run does not fill in itself),
    the decoupled trainer's own first: name, default, help, ``kind`` (bool, choice or text),
    choices, ``group`` (decoupled or grpo) and ``value`` (``values`` over the default)."""
    cls = rl_selectors.decoupled_config_class()
    helps = config_help(cls)
    inherited = {f.name for f in dataclasses.fields(GRPOConfig)}
    values = values or {}
    out = []
    for field in dataclasses.fields(cls):
        if field.name in rl_services.MANAGED:
            continue
        default = _default(field)
        choices = field.metadata.get("choices")
        kind = "bool" if isinstance(default, bool) else "choice" if choices else "text"
        value = values.get(field.name, default)
        if kind == "bool":
            value = _truthy(value)
        out.append(
            {
                "name": field.name,
                "default": default,
                "help": helps.get(field.name, ""),
                "kind": kind,
                "choices": choices,
                "group": "grpo" if field.name in inherited else "decoupled",
                "value": value,
            }
        )
    return sorted(out, key=lambda f: f["group"] != "decoupled")


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "on", "yes")


def form_values(*, data: Any) -> dict[str, str]:
    """The config values a form sent (text), by option name; a checkbox sends a hidden "false"
    before its "true", so the last value of a name is the one that counts."""
    names = {f["name"] for f in form_fields()}
    return {name: data.get(name) for name in names if name in data}


def _picked(model: type, value: Any, **where: Any) -> Any:
    if not str(value or "").strip().isdigit():
        return None
    return model.objects.filter(pk=int(value), **where).first()


def form_choices(*, data: Any) -> dict[str, Any]:
    """What a run's form names (each None when absent or unknown) and offers to pick: the base
    model or checkpoint (as on the training form), the task set, the environment, the sampler
    policy (inference servers only), the reward-model version; and the run's own numbers as
    sent (text)."""
    training = selectors.form_choices(data=data)
    return {
        "base_model": training["base_model"],
        "base_models": training["base_models"],
        "base_model_listed": training["base_model_listed"],
        "checkpoint": training["checkpoint"],
        "checkpoints": training["checkpoints"],
        "task_set": _picked(TaskSet, data.get("task_set")),
        "task_sets": TaskSet.objects.order_by("name")[:500],
        "environment": str(data.get("environment") or "").strip(),
        "environments": list_envs(),
        "sampler_policy": _picked(
            Policy, data.get("sampler_policy"), kind=Policy.Kind.INFERENCE_SERVER
        ),
        "sampler_policies": Policy.objects.filter(kind=Policy.Kind.INFERENCE_SERVER).order_by(
            "name"
        ),
        "reward_model": _picked(RewardModel, data.get("reward_model")),
        "reward_models": RewardModel.objects.order_by("domain", "-version")[:500],
        "samplers": str(data.get("samplers") or "2").strip(),
        "max_queue": str(data.get("max_queue") or "0").strip(),
        "name": str(data.get("name") or "").strip()[:120],
    }


def _whole(text: str, *, name: str, low: int, high: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ApplicationError(f"{name} must be a whole number (got {text!r}).") from None
    if not low <= value <= high:
        raise ApplicationError(f"{name} must be between {low} and {high} (got {value}).")
    return value


def launch_inputs(*, choices: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``rl_run_create`` (but the config values and the user) from a
    form's choices; ApplicationError naming what is missing or wrong."""
    if choices["task_set"] is None:
        raise ApplicationError("Pick the task set the samplers play.")
    return {
        "task_set": choices["task_set"],
        "environment": choices["environment"],
        "base_model": choices["base_model"],
        "checkpoint": choices["checkpoint"],
        "samplers": _whole(choices["samplers"], name="samplers", low=1, high=MAX_SAMPLERS),
        "sampler_policy": choices["sampler_policy"],
        "reward_model": choices["reward_model"],
        "max_queue": _whole(choices["max_queue"], name="max_queue", low=0, high=1_000_000),
        "name": choices["name"],
    }


def preview(*, values: dict[str, Any], choices: dict[str, Any]) -> str:
    """The trainer's configuration the run would get, as YAML (a comment saying what is wrong
    when it would be refused)."""
    checkpoint, task_set = choices["checkpoint"], choices["task_set"]
    environment = choices["environment"] or (task_set.environment if task_set else "")
    try:
        config = rl_services.decoupled_config_build(
            values=values,
            model_dir=checkpoint.path if checkpoint else choices["base_model"] or "(base model)",
            output_dir=str(Path(settings.STEPLAB_DATA_DIR) / "training" / "<run>"),
            environment=environment or "(the task set's environment)",
            num_tasks=task_set.tasks.count() if task_set else 0,
        )
    except ApplicationError as exc:
        return f"# {exc.message}"
    return config_to_yaml(config)


def config_problems(*, values: dict[str, Any]) -> list[dict[str, str]]:
    """Each config value a run would refuse, by its name (``config.<name>``): names that are not
    an option (or that the run fills in itself) and values that do not parse or are not
    allowed — every one, where a launch stops at the first."""
    known = {f["name"] for f in form_fields()}
    problems, checked = [], {}
    placeholders = {
        "model_dir": "-",
        "output_dir": "-",
        "environment": "steplab/arithmetic",
        "num_tasks": 0,
    }
    for name, value in values.items():
        if name not in known:
            why = (
                "is set by the run itself (the base model, the task set and the environment)"
                if name in rl_services.MANAGED
                else "is not a decoupled RL option (the form lists them)"
            )
            problems.append({"field": f"config.{name}", "problem": f"{name} {why}."})
            continue
        try:
            rl_services.decoupled_config_build(values={name: value}, **placeholders)
        except ApplicationError as exc:
            problems.append({"field": f"config.{name}", "problem": exc.message})
        else:
            checked[name] = value
    if not problems and checked:
        try:
            rl_services.decoupled_config_build(values=checked, **placeholders)
        except ApplicationError as exc:
            problems.append({"field": "config", "problem": exc.message})
    return problems


def _unknown(data: Any, choices: dict[str, Any], name: str, what: str) -> list[dict[str, str]]:
    given = str(data.get(name) or "").strip()
    if given and choices[name] is None:
        return [{"field": name, "problem": f"there is no {what} {given}."}]
    return []


def launch_problems(*, data: Any, values: dict[str, Any]) -> tuple[dict[str, Any], list]:
    """A launch's choices (:func:`form_choices` of ``data``: ids as text) and every problem of
    them and of the config ``values``, each by its field (``config.<name>`` for an option) —
    what the API and the CLI check before they launch (the form shows the first)."""
    choices = form_choices(data=data)
    problems: list[dict[str, str]] = []
    if not str(data.get("task_set") or "").strip():
        problems.append({"field": "task_set", "problem": "pick the task set the samplers play."})
    problems += _unknown(data, choices, "task_set", "task set")
    problems += _unknown(data, choices, "checkpoint", "checkpoint")
    problems += _unknown(data, choices, "sampler_policy", "inference-server policy")
    problems += _unknown(data, choices, "reward_model", "reward-model version")
    environment = choices["environment"]
    if environment and environment not in choices["environments"]:
        problems.append(
            {
                "field": "environment",
                "problem": f"{environment!r} is not an environment; use one of "
                f"{', '.join(choices['environments'])} (or leave it empty).",
            }
        )
    if choices["checkpoint"] is None:
        try:
            base_model_dir(base_model=choices["base_model"])
        except ApplicationError as exc:
            problems.append({"field": "base_model", "problem": exc.message})
    for name, high in (("samplers", MAX_SAMPLERS), ("max_queue", 1_000_000)):
        try:
            _whole(choices[name], name=name, low=1 if name == "samplers" else 0, high=high)
        except ApplicationError as exc:
            problems.append({"field": name, "problem": exc.message})
    return choices, problems + config_problems(values=values)


# --- the run -----------------------------------------------------------------------------------


def rl_run_page_get(*, id: int) -> RLRun:
    """The run with its training run, job and pickings; Http404 when there is none."""
    run = rl_selectors.rl_run_get(id=id)
    if run is None:
        raise Http404(f"There is no RL run {id}.")
    return run


def rl_run_keyset(*, before_id: int | None, limit: int) -> list[RLRun]:
    """Up to ``limit`` RL runs, newest (highest id) first, before ``before_id``."""
    runs = RLRun.objects.select_related("training_run", "job", "task_set").order_by("-pk")
    if before_id is not None:
        runs = runs.filter(pk__lt=before_id)
    return list(runs[:limit])


def training_runs(*, limit: int = 200) -> list[TrainingRun]:
    """The training run list, each with its RL run where it has one (``run.rl``)."""
    return list(TrainingRun.objects.select_related("dataset", "job", "rl")[:limit])


def job_state(*, job: Any, now: Any, queue: str = "rollouts") -> tuple[bool, str]:
    """(online, what the page says) of a sampler or trainer job: online while running with a
    heartbeat younger than the limit after which its worker counts as dead (the reaper then
    re-queues it, and it resumes on the next worker)."""
    if job.status == JobStatus.QUEUED:
        if job.attempts:
            return False, (
                f"re-queued after attempt {job.attempts} (its worker stopped); waiting for a "
                f"{queue} worker to resume it"
            )
        return False, f"waiting for a {queue} worker"
    if job.is_terminal:
        return False, f"ended ({job.status})"
    last = job.heartbeat_at or job.started_at
    silent = (now - last).total_seconds() if last else None
    if silent is None or silent > settings.STEPLAB_JOB_DEAD_AFTER_SECONDS:
        since = f" for {int(silent)} s" if silent is not None else ""
        return False, f"offline: no heartbeat{since}; it is resumed when a worker reaps it"
    return True, "online"


def samplers(*, run: RLRun, now: Any = None) -> list[dict[str, Any]]:
    """The run's sampler jobs: online or not (their heartbeats), what the page says of them,
    groups made and episodes per minute (over the last two minutes)."""
    now = now or timezone.now()
    rows = []
    for row in rl_selectors.samplers_overview(run=run, now=now):
        online, state = job_state(job=row["job"], now=now)
        rows.append({**row, "online": online, "state": state})
    return rows


def curve_points(*, run: RLRun) -> list[dict[str, Any]]:
    """One point per step the trainer reported, by step: its ``metrics`` (the last report of
    the step: a resumed trainer reports again the steps after its checkpoint) and the ids of
    the groups it trained on (``consumed_ids``) and dropped (``dropped_ids``)."""
    job = run.training_run.job
    if job is None:
        return []
    ids: dict[int, dict[str, list[int]]] = {}
    settled = run.groups.filter(step__isnull=False).order_by("pk")
    for pk, step, status in settled.values_list("pk", "step", "status"):
        ids.setdefault(step, {"consumed_ids": [], "dropped_ids": []})[f"{status}_ids"].append(pk)
    metrics = dict(
        JobMetricPoint.objects.filter(job=job).order_by("step", "pk").values_list("step", "values")
    )
    return [
        {
            "step": step,
            "metrics": dict(values or {}),
            **ids.get(step, {"consumed_ids": [], "dropped_ids": []}),
        }
        for step, values in sorted(metrics.items())
    ]


def curve_chart(*, points: list[dict[str, Any]]) -> dict[str, Any]:
    """The curve as the chart reads it: steps, and each series with its scale."""
    return {
        "steps": [p["step"] for p in points],
        "series": {
            name: {"scale": scale, "values": [p["metrics"].get(name) for p in points]}
            for name, scale in CURVE_SERIES
            if any(p["metrics"].get(name) is not None for p in points)
        },
    }


def staleness_rows(*, histogram: list[dict[str, int]], bound: int) -> list[dict[str, Any]]:
    """The staleness histogram with bar widths (percent of the largest count) and whether each
    staleness is beyond the bound."""
    top = max([max(r["consumed"], r["dropped"]) for r in histogram] or [0]) or 1
    return [
        {
            **row,
            "beyond": row["staleness"] > bound,
            "consumed_width": round(100 * row["consumed"] / top),
            "dropped_width": round(100 * row["dropped"] / top),
        }
        for row in histogram
    ]


def _options(config: dict[str, Any]) -> dict[str, Any]:
    names = (
        "max_steps", "batch_size", "grad_accum", "group_size", "max_staleness", "stale_groups",
        "stale_weight", "importance_cap", "publish_every", "synchronous", "temperature",
    )  # fmt: skip
    return {name: config[name] for name in names if name in config}


def _staleness_figures(histogram: list[dict[str, int]]) -> tuple[float | None, int | None]:
    """(mean, max) staleness of the groups the trainer took, from the histogram."""
    total = sum(r["consumed"] + r["dropped"] for r in histogram)
    if not total:
        return None, None
    weighted = sum(r["staleness"] * (r["consumed"] + r["dropped"]) for r in histogram)
    return weighted / total, max(r["staleness"] for r in histogram)


def run_page(*, run: RLRun, now: Any = None) -> dict[str, Any]:
    """What the run's page (and its polled live part), the API's overview and the CLI's status
    show."""
    now = now or timezone.now()
    config = dict(run.training_run.config or {})
    counts = rl_selectors.group_counts(run=run)
    histogram = rl_selectors.staleness_histogram(run=run)
    staleness_mean, staleness_max = _staleness_figures(histogram)
    versions = rl_selectors.version_timeline(run=run)
    points = curve_points(run=run)
    parent = run.job
    live = parent is not None and not parent.is_terminal
    sampler_rows = samplers(run=run, now=now)
    trainer = rl_selectors.trainer_job(run=run)
    return {
        "run": run,
        "job": parent,
        "counts": counts,
        "queue_depth": counts[SampleGroup.Status.READY],
        "dropped_total": counts[SampleGroup.Status.DROPPED],
        "staleness_mean": staleness_mean,
        "staleness_max": staleness_max,
        "trainer": trainer,
        "trainer_state": job_state(job=trainer, now=now, queue="gpu")[1]
        if trainer is not None
        else "not started yet",
        "samplers": sampler_rows,
        "samplers_online": sum(1 for s in sampler_rows if s["online"]),
        "options": _options(config),
        "staleness": staleness_rows(histogram=histogram, bound=int(config.get("max_staleness", 0))),
        "chart": curve_chart(points=points),
        "curve": points,
        "steps": list(reversed(points[-CURVE_ROWS:])),
        "steps_total": len(points),
        "versions": versions,
        "timeline": list(reversed(versions[-TIMELINE_ROWS:])),
        "versions_total": len(versions),
        "live": live,
        "can_add_sampler": live and not run.stopping and bool(parent and parent.awaiting_children),
    }


def _episodes(group: SampleGroup) -> list[dict[str, Any]]:
    """Each episode of a group: its trajectory id, reward and success (from the payload)."""
    payload = group.payload if isinstance(group.payload, dict) else {}
    ids = payload.get("trajectory_ids") or []
    completions = payload.get("completions") or []
    out = []
    for number in range(max(len(ids), len(completions))):
        completion = completions[number] if number < len(completions) else {}
        completion = completion if isinstance(completion, dict) else {}
        trajectory = ids[number] if number < len(ids) else None
        out.append(
            {
                "episode": number,
                "trajectory_id": trajectory if isinstance(trajectory, int) else None,
                "reward": completion.get("reward"),
                "success": completion.get("success"),
            }
        )
    return out


def step_groups(*, run: RLRun, step: int, after_id: int | None = None, limit: int = 500):
    """The groups optimizer ``step`` settled (trained on or dropped), by id (after ``after_id``),
    each with its episodes (``group.episode_rows``)."""
    rows = (
        SampleGroup.objects.filter(run=run, step=step)
        .select_related("task", "sampler_job")
        .order_by("pk")
    )
    if after_id is not None:
        rows = rows.filter(pk__gt=after_id)
    groups = list(rows[:limit])
    for group in groups:
        group.episode_rows = _episodes(group)
    return groups


def step_page(*, run: RLRun, step: int) -> dict[str, Any]:
    """A step of the run's curve: its metrics (the trainer's) and the groups it trained on and
    dropped."""
    trainer = run.training_run.job
    point = None
    if trainer is not None:
        point = JobMetricPoint.objects.filter(job=trainer, step=step).order_by("-pk").first()
    groups = step_groups(run=run, step=step)
    return {
        "run": run,
        "step": step,
        "metrics": point.values if point is not None else {},
        "consumed": [g for g in groups if g.status == SampleGroup.Status.CONSUMED],
        "dropped": [g for g in groups if g.status == SampleGroup.Status.DROPPED],
    }


def status_text(*, run: RLRun, now: Any = None) -> list[str]:
    """The run as the CLI prints it, line by line."""
    page = run_page(run=run, now=now)
    job, counts = page["job"], page["counts"]
    lines = [
        f"RL run {run.pk} ({run.training_run.name or 'unnamed'}): "
        f"{job.status if job else 'no job'}"
        + (f"; stopping: {run.stop_reason}" if run.stopping else ""),
        f"  job {run.job_id}, training run {run.training_run_id}",
        f"  trainer job {page['trainer'].pk if page['trainer'] else '—'}: {page['trainer_state']}",
        f"  groups: {counts['ready']} ready (queue depth), {counts['sampling']} sampling, "
        f"{counts['taken']} taken, {counts['consumed']} trained on, {counts['dropped']} dropped",
        f"  versions: {page['versions_total']} (newest "
        f"{page['timeline'][0]['version'] if page['timeline'] else '—'})",
    ]
    for row in page["samplers"]:
        lines.append(
            f"  sampler job {row['job'].pk}: {row['state']}, {row['groups']} groups, "
            f"{row['episodes_per_min']:.1f} episodes/min"
        )
    for row in page["staleness"]:
        lines.append(
            f"  staleness {row['staleness']}: {row['consumed']} trained on, "
            f"{row['dropped']} dropped"
        )
    for point in page["steps"][:5]:
        reward = point["metrics"].get("reward")
        lines.append(
            f"  step {point['step']}: reward "
            f"{'—' if reward is None else format(reward, '.3f')}, "
            f"{len(point['consumed_ids'])} groups trained on, "
            f"{len(point['dropped_ids'])} dropped"
        )
    return lines
