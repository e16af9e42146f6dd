"""Decoupled vs synchronous RL through the app's jobs: wall-clock to a fixed number of trained
samples with 1 and 2 sampler processes, the staleness of what was trained on, and validation
success of both at equal wall-clock time.

    OMP_NUM_THREADS=1 .venv/bin/python bench/async_rl.py [--suite lookup|arithmetic]
        [--samplers 1,2] [--seeds 0,1] [--eval-tasks 200] [--set OPTION=VALUE] [--json FILE]
        [--database-url postgres://...] [--broker-url redis://...]
    OMP_NUM_THREADS=1 .venv/bin/python bench/async_rl.py --quick    # the harness, ~1.5 min

What runs: the app's own decoupled RL runs (``rl_services.rl_run_create``: the parent job
``training.rl`` on the default queue, N sampler jobs on ``rollouts``, the trainer job on ``gpu``)
on real ``celery -A webapp.config worker`` processes started here, each in its own process group
and killed with it at the end: one worker on ``default`` (pool 1, the parent), one on ``gpu``
(pool 1: the trainer) and one on ``rollouts`` with a pool of N (N sampler processes).

- For N in ``--samplers``: fresh workers, warmed by a short run (every pool process imports the
  training stack before anything is timed); then per training seed (a round) a synchronous run
  (``synchronous: true``: samplers sample a step's groups only with the newest version and wait
  while the trainer trains) and a decoupled run (the same options otherwise), each with the same
  N sampler processes, so the speedup measures overlap, not extra cores. The order alternates
  between rounds (sync first, then decoupled first), so drift in the machine's load hits both.
- Both train to the same number of samples: ``max_steps × groups_per_step × group_size``.
- Wall-clock: from launch (``rl_run_create``) to the publication of the run's last version
  (``PolicyVersion.published_at``); trained samples/s is the samples over it.
- Speedup per N: sync wall / decoupled wall per round; mean and a 95% t interval over rounds.
- Staleness: of the groups trained on (consumed), pooled over rounds, and the dropped counts;
  the trainer's wait share is the time it spent blocked waiting for groups over its step time.
- Validation (after every run, workers stopped): greedy success on the same ``--eval-tasks``
  validation tasks of the start model, of each run's final version and of each run's version at
  equal wall-clock time — the newest version each run had published when the faster run of the
  round finished (``published_at``, both measured from their own launch). Pooled over (seed,
  task) pairs as the learning protocol does: Wilson 95% intervals, exact McNemar vs the start
  (``scipy.stats.binomtest`` on the discordant pairs; Holm over the equal-time comparisons), and
  the paired difference sync − decoupled at equal time with its 95% interval (Newcombe's hybrid
  score interval for paired proportions).

Suites: ``lookup`` takes its start model, GRPO options and validation from ``bench/rl_recipe.py``
(:func:`lookup_recipe` says what it reads); ``arithmetic`` is the demo's recipe (its SFT start,
built once into ``var/bench-cache``, then GRPO on ``practice`` tasks); ``--quick`` is a tiny
random model on arithmetic (its table is labelled QUICK: it checks the harness, not the claim).

Isolation: a PostgreSQL database the bench creates (refused if it exists) and drops at the end,
a Redis database flushed first and at the end, a temporary data directory removed at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/steplab_async_rl"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/13"
POLL = 0.05
MODES = ("sync", "decoupled")

# bench/load.py's: a database the bench creates (refused if it exists) and drops at the end
from load import BenchFailure, database_create, database_drop  # noqa: E402

# --- the environment, the database and the broker ------------------------------------------------


def configure(database_url: str, broker: str, var_dir: Path) -> None:
    """Settings for Django here and for the workers (they inherit the environment)."""
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "webapp.config.settings",
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker,
            "STEPLAB_VAR_DIR": str(var_dir),
            "STEPLAB_DATA_DIR": str(var_dir / "data"),
            "DEBUG": "0",  # no query log in memory: what a production worker pays
            "SECRET_KEY": secrets.token_urlsafe(48),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_OFFLINE": "1",
        }
    )


def broker_flush(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushdb()


# --- worker processes -----------------------------------------------------------------------------


class Worker:
    """A ``celery worker`` subprocess (the app's own command line) in its own process group."""

    def __init__(self, name: str, queue: str, pool: int, log_dir: Path) -> None:
        self.name, self.queue, self.pool = name, queue, pool
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Worker:
        from webapp.cli.serving import worker_argv

        argv = worker_argv([self.queue], self.pool, f"{self.name}@bench") + ["--without-heartbeat"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - the app's own worker command
                argv, cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise BenchFailure(f"worker {self.name} exited:\n{self.log_tail()}")
            if b" ready." in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise BenchFailure(
            f"worker {self.name} not ready after {timeout:.0f} s:\n{self.log_tail()}"
        )

    def log_tail(self, n: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"
        return "\n".join(text.splitlines()[-n:])

    def stop(self) -> None:
        """SIGTERM the process group (warm shutdown), then SIGKILL whatever is left of it."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue


#: Names the bench's workers (``async-rl-<TAG>-...@bench``): what it started, and nothing else.
TAG = uuid.uuid4().hex[:6]


def start_workers(samplers: int, log_dir: Path) -> list[Worker]:
    prefix = f"async-rl-{TAG}-n{samplers}"
    workers = [
        Worker(f"{prefix}-parent", "default", 1, log_dir),
        Worker(f"{prefix}-trainer", "gpu", 1, log_dir),
        Worker(f"{prefix}-samplers", "rollouts", samplers, log_dir),
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.wait_ready()
    except BaseException:
        stop_workers(workers)
        raise
    return workers


def stop_workers(workers: list[Worker]) -> None:
    for worker in workers:
        worker.stop()


# --- the recipe: start model, options, tasks, validation -----------------------------------------


@dataclass
class Recipe:
    """What the runs train (``values``: DecoupledConfig options shared by both modes) and how a
    model is judged (``validate(model_dir, tasks) -> {task id: solved}``)."""

    label: str
    env_id: str
    values: dict[str, Any]
    train_tasks: list[Any]
    validation_tasks: list[Any]
    start_model: Callable[[Path], Path]
    validate: Callable[[str, list[Any]], dict[str, bool]]
    warmup_values: dict[str, Any] = field(default_factory=dict)


def greedy_validation(env_id: str, *, system_prompt: bool, max_steps: int, max_new_tokens: int):
    """``validate`` by greedy decoding (``tiny.play_greedy``) with the runs' prompt."""

    def validate(model_dir: str, tasks: list[Any]) -> dict[str, bool]:
        from trainer_core.envs.registry import make
        from trainer_core.policies import chat_format
        from trainer_core.training.modelling import load_model_and_tokenizer
        from trainer_core.training.tiny import play_greedy

        system = None
        if system_prompt:
            with make(env_id) as env:
                system = chat_format.system_prompt(env.available_tools)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
        wins = play_greedy(
            model, tokenizer, tasks, system=system, max_steps=max_steps,
            max_new_tokens=max_new_tokens, env_id=env_id,
        )  # fmt: skip
        return {task.id: bool(won) for task, won in zip(tasks, wins, strict=True)}

    return validate


def quick_recipe(eval_tasks: int) -> Recipe:
    """Arithmetic, a random tiny model: the harness end to end in a couple of minutes."""
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from trainer_core.training.tiny import build_tiny_model

    values = {
        "batch_size": 2, "group_size": 4, "max_steps": 4, "max_new_tokens": 16,
        "max_episode_steps": 2, "max_length": 256, "system_prompt": False,
        "learning_rate": 1e-3, "temperature": 1.0, "device": "cpu", "wait_seconds": 300,
    }  # fmt: skip
    return Recipe(
        label="QUICK (steplab/arithmetic, tiny random model: checks the harness, not the claim)",
        env_id="steplab/arithmetic",
        values=values,
        train_tasks=arithmetic_tasks("train", n=16),
        validation_tasks=arithmetic_tasks("validation", n=eval_tasks),
        start_model=lambda d: build_tiny_model(d, hidden_size=32, num_layers=1, seed=0),
        validate=greedy_validation(
            "steplab/arithmetic", system_prompt=False, max_steps=2, max_new_tokens=16
        ),
        warmup_values={"max_steps": 1},
    )


#: Start models that take minutes to train are built once and kept here.
CACHE = ROOT / "var" / "bench-cache" / "async-rl"


def arithmetic_start(directory: Path) -> Path:
    """The demo's SFT start (``webapp/evaluation/demo.py``: a tiny model, 3,600 reference
    episodes of ``train_wide``, 900 steps), without a system prompt as the runs sample; built
    once into :data:`CACHE` (minutes), then copied."""
    cached = CACHE / "arithmetic-sft-900"
    if not (cached / "config.json").exists():
        from trainer_core.policies import chat_format
        from trainer_core.training.sft import SFTConfig, train
        from trainer_core.training.tiny import build_tiny_model, reference_trajectories

        print(f"building the SFT start model once into {cached} ...", flush=True)
        work = Path(tempfile.mkdtemp(prefix="async-rl-sft-"))
        with (work / "train.jsonl").open("w", encoding="utf-8") as fh:
            for trajectory in reference_trajectories("train_wide", 3600):
                messages = chat_format.trajectory_to_messages(trajectory, system=None)
                fh.write(json.dumps({"messages": messages}) + "\n")
        config = SFTConfig(
            model_dir=str(build_tiny_model(work / "base", seed=0)), output_dir=str(work / "run"),
            dataset=str(work / "train.jsonl"), max_steps=900, batch_size=8, learning_rate=2e-3,
            adam_beta2=0.95, warmup_steps=20, lr_schedule="cosine", max_length=256, device="cpu",
        )  # fmt: skip
        result = train(config)
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(result.checkpoint_dir, cached)
        shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(cached, directory)
    return directory


def arithmetic_recipe(eval_tasks: int) -> Recipe:
    """Arithmetic as the demo learns it: GRPO from the SFT start on ``practice`` tasks (values
    SFT never saw), outcome advantage, lr 5e-5, 8 groups of 8 per step, 16 steps."""
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    values = {
        "batch_size": 8, "group_size": 8, "max_steps": 16, "max_new_tokens": 64,
        "max_episode_steps": 3, "max_length": 256, "system_prompt": False, "beta": 0.0,
        "learning_rate": 5e-5, "temperature": 1.0, "device": "cpu", "wait_seconds": 900,
    }  # fmt: skip
    return Recipe(
        label="steplab/arithmetic: the demo's SFT start, GRPO on practice tasks",
        env_id="steplab/arithmetic",
        values=values,
        train_tasks=arithmetic_tasks("practice", n=64),
        validation_tasks=arithmetic_tasks("validation", n=eval_tasks),
        start_model=arithmetic_start,
        validate=greedy_validation(
            "steplab/arithmetic", system_prompt=False, max_steps=3, max_new_tokens=64
        ),
        warmup_values={"max_steps": 1, "batch_size": 2},
    )


def lookup_recipe(eval_tasks: int) -> Recipe:
    """The lookup suite from ``bench/rl_recipe.py``: ``GRPO_VALUES`` (the runs' options),
    ``start_model(directory) -> Path`` (the SFT'd start, made in ``directory``),
    ``validation_success(model_dir, n, seed)`` (each of the first ``n`` lookup-validation tasks'
    outcome, a list or {task id: solved}) and, optionally, ``train_tasks()`` (default: the first
    512 of the train split)."""
    from webapp.training import rl_services

    try:
        import rl_recipe
    except ImportError as exc:
        raise BenchFailure(
            f"the lookup recipe cannot be loaded ({exc}): bench/rl_recipe.py gives the start "
            "model and GRPO options; meanwhile --suite arithmetic measures the same on arithmetic"
        ) from None
    missing = [
        n for n in ("GRPO_VALUES", "start_model", "validation_success") if not hasattr(rl_recipe, n)
    ]
    if missing:
        raise BenchFailure(f"bench/rl_recipe.py lacks {', '.join(missing)} (see lookup_recipe)")
    from trainer_core.tasks.suites.lookup import lookup_tasks

    def validate(model_dir: str, tasks: list[Any]) -> dict[str, bool]:
        got = rl_recipe.validation_success(model_dir, len(tasks), 0)
        if isinstance(got, dict):
            return {str(k): bool(v) for k, v in got.items()}
        if isinstance(got, (list, tuple)) and len(got) == len(tasks):
            return {t.id: bool(won) for t, won in zip(tasks, got, strict=True)}
        raise BenchFailure("rl_recipe.validation_success must give each task's outcome")

    values = {k: v for k, v in rl_recipe.GRPO_VALUES.items() if k not in rl_services.MANAGED}
    make_tasks = getattr(rl_recipe, "train_tasks", lambda: lookup_tasks("train", n=512))
    return Recipe(
        label="steplab/lookup: bench/rl_recipe.py's SFT start and GRPO options",
        env_id="steplab/lookup", values={"device": "cpu", **values},
        train_tasks=list(make_tasks()), validation_tasks=lookup_tasks("validation", n=eval_tasks),
        start_model=rl_recipe.start_model, validate=validate,
        warmup_values={"max_steps": 1, "batch_size": 1},
    )  # fmt: skip


def recipe_for(args: argparse.Namespace) -> Recipe:
    if args.quick:
        return quick_recipe(args.eval_tasks)
    if args.suite == "arithmetic":
        return arithmetic_recipe(args.eval_tasks)
    return lookup_recipe(args.eval_tasks)


# --- one run ------------------------------------------------------------------------------------


@dataclass
class RunResult:
    mode: str
    samplers: int
    seed: int
    wall: float  # launch -> last version published, seconds
    samples: int  # trained samples: max_steps x groups_per_step x group_size
    versions: list[tuple[int, str, float]]  # (version, path, seconds after launch)
    staleness: Counter  # of the consumed groups
    dropped: int
    untrained: int  # groups sampled (ready or taken) that no step trained on or dropped
    group_seconds: float  # a sampler's mean time per group (claimed -> ready)
    train_seconds: float  # the trainer's mean time per step, waiting for groups left out
    wait_share: float  # trainer's time blocked waiting for groups / its step time
    steps: int

    @property
    def rate(self) -> float:
        return self.samples / self.wall

    @property
    def final(self) -> tuple[int, str, float]:
        return self.versions[-1]

    def version_at(self, seconds: float) -> tuple[int, str, float]:
        """The newest version published within ``seconds`` of launch."""
        return [v for v in self.versions if v[2] <= seconds + 1e-6][-1]


def task_set_for(recipe: Recipe, name: str):
    from trainer_core.tasks.files import dump_tasks_jsonl
    from webapp.tasks.services import task_set_import

    task_set, _ = task_set_import(text=dump_tasks_jsonl(recipe.train_tasks), name=name)
    task_set.environment = recipe.env_id
    task_set.save(update_fields=["environment"])
    return task_set


def launch_and_wait(task_set, model: Path, values: dict[str, Any], samplers: int, timeout: float):
    """Launch a run, wait for its parent job to end; (run, launch time)."""
    from django.utils import timezone

    from webapp.jobs.models import Job
    from webapp.training import rl_services

    started = timezone.now()
    run = rl_services.rl_run_create(
        task_set=task_set, base_model=str(model), values=values, samplers=samplers,
        name=f"bench-{'sync' if values.get('synchronous') else 'decoupled'}-{samplers}",
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        job = Job.objects.get(pk=run.job_id)
        if job.is_terminal:
            break
        if time.monotonic() > deadline:
            raise BenchFailure(f"RL run {run.pk} not done after {timeout:.0f} s: {job.message!r}")
        time.sleep(POLL)
    if job.status != "succeeded":
        raise BenchFailure(f"RL run {run.pk} ended {job.status}: {job.error}\n{job.log_tail}")
    run.refresh_from_db()
    return run, started


def measure(run, started, mode: str, samplers: int, seed: int, values: dict) -> RunResult:
    """The figures of a finished run from its rows (versions, groups, the trainer's metrics)."""
    from webapp.jobs.models import JobMetricPoint
    from webapp.training.models import SampleGroup

    versions = [
        (v.version, v.path, (v.published_at - started).total_seconds())
        for v in run.versions.order_by("version")
    ]
    groups = SampleGroup.objects.filter(run=run)
    staleness = Counter(
        groups.filter(status=SampleGroup.Status.CONSUMED).values_list("staleness", flat=True)
    )
    dropped = groups.filter(status=SampleGroup.Status.DROPPED).count()
    untrained = groups.filter(
        status__in=[SampleGroup.Status.READY, SampleGroup.Status.TAKEN]
    ).count()
    played = [
        (g.ready_at - g.created_at).total_seconds()
        for g in groups.exclude(ready_at=None).only("created_at", "ready_at")
    ]
    points = [p.values for p in JobMetricPoint.objects.filter(job=run.training_run.job)]
    waited = sum(float(p.get("wait_seconds", 0.0)) for p in points)
    busy = sum(float(p.get("seconds", 0.0)) for p in points)
    per_step = values["batch_size"] * values.get("grad_accum", 1) * values["group_size"]
    steps = values["max_steps"]
    if sum(staleness.values()) != steps * per_step // values["group_size"]:
        raise BenchFailure(
            f"RL run {run.pk} trained {sum(staleness.values())} groups, not "
            f"{steps * per_step // values['group_size']}"
        )
    return RunResult(
        mode=mode, samplers=samplers, seed=seed, wall=versions[-1][2], samples=steps * per_step,
        versions=versions, staleness=staleness, dropped=dropped, untrained=untrained,
        wait_share=waited / busy if busy else 0.0, steps=len(points),
        group_seconds=statistics.fmean(played), train_seconds=(busy - waited) / len(points),
    )  # fmt: skip


def scenario(
    samplers: int, recipe: Recipe, task_set, model: Path, args, log_dir: Path
) -> list[RunResult]:
    """Fresh workers with ``samplers`` sampler processes, warmed; then per seed the
    synchronous and the decoupled run, the order alternating between rounds."""
    workers = start_workers(samplers, log_dir)
    results = []
    try:
        warm = {**recipe.values, **recipe.warmup_values, "seed": 10_000}
        launch_and_wait(task_set, model, warm, samplers, args.timeout)
        for r, seed in enumerate(args.seed_list):
            order = MODES if r % 2 == 0 else MODES[::-1]
            for mode in order:
                values = {**recipe.values, "seed": seed, "synchronous": mode == "sync"}
                run, started = launch_and_wait(task_set, model, values, samplers, args.timeout)
                result = measure(run, started, mode, samplers, seed, values)
                results.append(result)
                print(
                    f"  {samplers} sampler(s), seed {seed}, {mode:>9}: {result.samples} samples "
                    f"in {result.wall:6.1f} s = {result.rate:6.2f} samples/s; staleness "
                    f"{dict(sorted(result.staleness.items()))}, dropped {result.dropped}, "
                    f"trainer waiting {result.wait_share:.0%}",
                    flush=True,
                )
    except Exception:
        for worker in workers:
            print(f"----- log of {worker.name} -----\n{worker.log_tail()}", file=sys.stderr)
        raise
    finally:
        stop_workers(workers)
    return results


# --- statistics -----------------------------------------------------------------------------------


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and its 95% t interval (nan bounds with one value)."""
    from scipy import stats

    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan, math.nan
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def mcnemar_p(before: list[bool], after: list[bool]) -> float:
    """Exact McNemar: a two-sided binomial test on the discordant pairs (1.0 with none)."""
    from scipy.stats import binomtest

    gains = sum(1 for x, y in zip(before, after, strict=True) if y and not x)
    losses = sum(1 for x, y in zip(before, after, strict=True) if x and not y)
    return binomtest(gains, gains + losses, 0.5).pvalue if gains + losses else 1.0


def paired_difference(a: list[bool], b: list[bool]) -> tuple[float, float, float]:
    """Success rate of ``a`` minus ``b`` over paired outcomes and its 95% interval: Newcombe's
    hybrid score interval for paired proportions (method 10, Newcombe 1998)."""
    from trainer_core.evaluation.stats import wilson_interval

    n = len(a)
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson_interval(both + only_a, n)
    l2, u2 = wilson_interval(both + only_b, n)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(
        max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    )
    return d, low, high


def speedups(results: list[RunResult], samplers: int) -> list[float]:
    """Sync wall-clock over decoupled wall-clock, per round (training seed)."""
    runs = {(r.seed, r.mode): r for r in results if r.samplers == samplers}
    return [runs[s, "sync"].wall / runs[s, "decoupled"].wall for s, m in runs if m == "sync"]


# --- validation -----------------------------------------------------------------------------------


@dataclass
class Judged:
    """Pooled validation outcomes (over (seed, task) pairs, in one order) of one column's runs."""

    final: list[bool] = field(default_factory=list)
    at_equal: list[bool] = field(default_factory=list)
    start: list[bool] = field(default_factory=list)
    equal_versions: list[int] = field(default_factory=list)


def judge(
    results: list[RunResult], recipe: Recipe, start_model: Path
) -> tuple[dict[tuple, Judged], list[bool]]:
    """Validate the start model and every run's final version and version at equal wall-clock
    time (each model once); pooled outcomes per (samplers, mode)."""
    cache: dict[str, dict[str, bool]] = {}
    tasks = recipe.validation_tasks
    order = [t.id for t in tasks]

    def outcomes(path: str) -> list[bool]:
        if path not in cache:
            began = time.perf_counter()
            cache[path] = recipe.validate(path, tasks)
            print(f"  validated {path} in {time.perf_counter() - began:.0f} s", flush=True)
        return [cache[path][t] for t in order]

    start = outcomes(str(start_model))
    judged: dict[tuple, Judged] = {}
    rounds: dict[tuple[int, int], dict[str, RunResult]] = {}
    for r in results:
        rounds.setdefault((r.samplers, r.seed), {})[r.mode] = r
    for (samplers, _seed), pair in sorted(rounds.items()):
        equal = min(r.wall for r in pair.values())
        for mode, r in pair.items():
            j = judged.setdefault((samplers, mode), Judged())
            version, path, _ = r.version_at(equal)
            j.final += outcomes(r.final[1])
            j.at_equal += outcomes(path)
            j.start += start
            j.equal_versions.append(version)
    return judged, start


# --- the figures (--json) and the report ---------------------------------------------------------


def figures(results: list[RunResult], judged: dict, samplers: list[int]) -> dict[str, Any]:
    """Every run's figures, the speedups and the validation, JSON-safe."""
    runs = []
    for r in results:
        row = dataclasses.asdict(r)
        row["staleness"] = {str(k): v for k, v in sorted(r.staleness.items())}
        row["versions"] = [[v, seconds] for v, _path, seconds in r.versions]
        runs.append(row)
    speedup, validation = {}, {}
    for n in samplers:
        ratios = speedups(results, n)
        speedup[str(n)] = dict(zip(("mean", "low", "high"), mean_interval(ratios), strict=True))
        speedup[str(n)]["rounds"] = ratios
        for mode in MODES:
            j = judged[n, mode]
            validation[f"{n}/{mode}"] = {
                "final": sum(j.final) / len(j.final),
                "at_equal": sum(j.at_equal) / len(j.at_equal),
                "start": sum(j.start) / len(j.start),
                "p_final": mcnemar_p(j.start, j.final),
                "p_equal": mcnemar_p(j.start, j.at_equal),
            }
        diff = paired_difference(judged[n, "sync"].at_equal, judged[n, "decoupled"].at_equal)
        validation[f"{n}/difference"] = dict(zip(("d", "low", "high"), diff, strict=True))
    return {"tag": TAG, "runs": runs, "speedup": speedup, "validation": validation}


# --- the report -----------------------------------------------------------------------------------


def _rate(outcomes: list[bool]) -> str:
    from trainer_core.evaluation.stats import wilson_interval

    k, n = sum(outcomes), len(outcomes)
    low, high = wilson_interval(k, n)
    return f"{k / n:.3f} [{low:.3f},{high:.3f}]"


def _interval(mean: float, low: float, high: float, digits: int = 2) -> str:
    if math.isnan(low):
        return f"{mean:.{digits}f} (1 round)"
    return f"{mean:.{digits}f} [{low:.{digits}f},{high:.{digits}f}]"


def _staleness(counter: Counter) -> str:
    """Groups trained on per staleness, ``staleness:count``."""
    return " ".join(f"{s}:{n}" for s, n in sorted(counter.items()))


def _cells(results: list[RunResult], judged, samplers: list[int], fn) -> list[str]:
    return [
        fn([r for r in results if r.samplers == n and r.mode == mode], judged.get((n, mode)))
        for n in samplers
        for mode in MODES
    ]


def _per_n_rows(results, judged, samplers: list[int]) -> list[tuple[str, list[str]]]:
    """Rows whose value belongs to an N (a pair of columns), not to one run."""
    speed, diff = [], []
    for n in samplers:
        speed.append(_interval(*mean_interval(speedups(results, n))) + "x")
        d, low, high = paired_difference(
            judged[n, "sync"].at_equal, judged[n, "decoupled"].at_equal
        )
        diff.append(f"{d * 100:+.1f} [{low * 100:+.1f},{high * 100:+.1f}] pts")
    return [
        ("speedup decoupled/sync (mean, 95% CI)", speed),
        ("sync − decoupled at equal time (95% CI)", diff),
    ]


def table_rows(results, judged, samplers: list[int], p_equal: dict) -> list[tuple[str, list[str]]]:
    mean = statistics.fmean

    def per_run(fn):
        return _cells(results, judged, samplers, fn)

    return [
        ("rounds (training seeds)", per_run(lambda rs, j: ",".join(str(r.seed) for r in rs))),
        ("trained samples per run", per_run(lambda rs, j: str(rs[0].samples))),
        ("wall-clock s, mean", per_run(lambda rs, j: f"{mean(r.wall for r in rs):.1f}")),
        ("wall-clock s, each round", per_run(lambda rs, j: " ".join(f"{r.wall:.0f}" for r in rs))),
        ("trained samples/s", per_run(lambda rs, j: f"{mean(r.rate for r in rs):.2f}")),
        ("trained groups by staleness", per_run(
            lambda rs, j: _staleness(sum((r.staleness for r in rs), Counter())))),
        ("staleness mean (max)", per_run(lambda rs, j: (
            f"{_mean_staleness(rs):.2f} ({max(s for r in rs for s in r.staleness)})"))),
        ("groups dropped (all rounds)", per_run(lambda rs, j: str(sum(r.dropped for r in rs)))),
        ("groups sampled, never trained", per_run(
            lambda rs, j: str(sum(r.untrained for r in rs)))),
        ("sampler s per group (mean)", per_run(
            lambda rs, j: f"{mean(r.group_seconds for r in rs):.2f}")),
        ("trainer s per step, not waiting", per_run(
            lambda rs, j: f"{mean(r.train_seconds for r in rs):.2f}")),
        ("trainer waiting for groups", per_run(lambda rs, j: f"{mean(r.wait_share for r in rs):.0%}")),
        ("validation: final version", per_run(lambda rs, j: _rate(j.final))),
        ("  McNemar p vs start", per_run(lambda rs, j: f"{mcnemar_p(j.start, j.final):.2g}")),
        ("version at equal time, each round", per_run(
            lambda rs, j: " ".join(f"v{v}" for v in j.equal_versions))),
        ("validation: at equal time", per_run(lambda rs, j: _rate(j.at_equal))),
        ("  McNemar p vs start (Holm)", per_run(lambda rs, j: "{:.2g} ({:.2g})".format(
            *p_equal[rs[0].samplers, rs[0].mode]))),
    ]  # fmt: skip


def _mean_staleness(rs: list[RunResult]) -> float:
    total = sum((r.staleness for r in rs), Counter())
    return sum(s * n for s, n in total.items()) / sum(total.values())


def format_table(results, judged, samplers: list[int], start: list[bool]) -> list[str]:
    from trainer_core.evaluation.compare import adjust

    keys = [(n, mode) for n in samplers for mode in MODES]
    raw = [mcnemar_p(judged[k].start, judged[k].at_equal) for k in keys]
    p_equal = dict(zip(keys, zip(raw, adjust(raw, "holm"), strict=True), strict=True))
    width, cell = 40, 26
    head = "".join(f"{f'{n} sampler(s): {mode}':<{cell}}" for n, mode in keys)
    lines = [f"{'':<{width}}{head}", "-" * (width + cell * len(keys))]
    for label, cells in table_rows(results, judged, samplers, p_equal):
        lines.append(f"{label:<{width}}" + "".join(f"{c:<{cell}}" for c in cells))
    for label, cells in _per_n_rows(results, judged, samplers):
        lines.append(f"{label:<{width}}" + "".join(f"{c:<{2 * cell}}" for c in cells))
    lines.append(f"{'validation: start model':<{width}}{_rate(start)} (every column's start)")
    lines.append("")
    lines += verdicts(results, judged, samplers, p_equal)
    return lines


def verdicts(results, judged, samplers: list[int], p_equal: dict) -> list[str]:
    """Plain sentences: the speedup (against the goal at 2 samplers), does each run beat its
    start at equal time, is the paired difference within ±10 points?"""
    out = []
    for n in samplers:
        speed = mean_interval(speedups(results, n))
        goal = f" (goal ≥ 1.5×: {'met' if speed[0] >= 1.5 else 'NOT met'})" if n == 2 else ""
        beats = []
        for mode in MODES:
            p, adjusted = p_equal[n, mode]
            j = judged[n, mode]
            gain = (sum(j.at_equal) - sum(j.start)) / len(j.start)
            ok = adjusted < 0.05 and gain > 0
            beats.append(
                f"{mode} {'beats' if ok else 'does NOT beat'} its start ({gain * 100:+.1f} points, "
                f"Holm p = {adjusted:.2g})"
            )
        d, low, high = paired_difference(
            judged[n, "sync"].at_equal, judged[n, "decoupled"].at_equal
        )
        within = -0.10 <= low and high <= 0.10
        out.append(
            f"{n} sampler(s): decoupled is {_interval(*speed)}× as fast as sync{goal}. "
            f"At equal wall-clock time: {'; '.join(beats)}; the paired difference "
            f"sync − decoupled, {d * 100:+.1f} points [{low * 100:+.1f}, {high * 100:+.1f}], "
            f"{'lies' if within else 'does NOT lie'} within ±10 points."
        )
    return out


def header(recipe: Recipe, seeds: list[int], samplers: list[int]) -> str:
    import celery
    import django
    import torch

    cores = os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    v = recipe.values
    options = " ".join(f"{k}={v[k]}" for k in sorted(v))
    return "\n".join(
        [
            "== Decoupled vs synchronous RL: wall-clock to a fixed number of trained samples ==",
            f"recipe: {recipe.label}",
            f"machine: {platform.node()} {platform.machine()}, {cores} cores, load average "
            f"{load} at start",
            f"software: Python {platform.python_version()}, torch {torch.__version__}, Django "
            f"{django.get_version()}, Celery {celery.__version__}",
            f"workers per N: default pool 1 (parent), gpu pool 1 (trainer), rollouts pool N "
            f"(samplers); N in {samplers}; training seeds (rounds) {seeds}, order alternating",
            f"options (both modes; sync adds synchronous=true): {options}",
            f"validation: {len(recipe.validation_tasks)} tasks, the same for every model",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="arithmetic, a tiny random model (~2 minutes)")
    add("--suite", default="lookup", choices=["lookup", "arithmetic"], help="what runs learn")
    add("--samplers", default="1,2", help="sampler processes of each scenario (default 1,2)")
    add("--seeds", default="0,1", help="training seeds, one round each (default 0,1)")
    add("--eval-tasks", type=int, default=None, help="validation tasks (default 200; quick 50)")
    add("--timeout", type=float, default=1800.0, help="seconds one run may take")
    add("--set", action="append", default=[], metavar="OPTION=VALUE",
        help="override a DecoupledConfig option of both modes (YAML value), e.g. max_staleness=1")  # fmt: skip
    add("--json", type=Path, help="also write the figures to this file")
    add(
        "--database-url",
        default=os.environ.get("STEPLAB_ASYNC_RL_DATABASE_URL", DEFAULT_DATABASE_URL),
        help="PostgreSQL database the bench creates and drops (refused if it exists; default "
        "$STEPLAB_ASYNC_RL_DATABASE_URL or steplab_async_rl on 127.0.0.1)",
    )
    add(
        "--broker-url",
        default=os.environ.get("STEPLAB_ASYNC_RL_BROKER_URL", DEFAULT_BROKER_URL),
        help="Redis database for the workers, flushed first and at the end (default "
        "$STEPLAB_ASYNC_RL_BROKER_URL or db 13)",
    )
    args = parser.parse_args(argv)
    try:
        args.overrides = {
            key.strip(): yaml.safe_load(value)
            for key, value in (item.split("=", 1) for item in args.set)
        }
    except ValueError:
        parser.error("--set takes OPTION=VALUE")
    args.sampler_counts = [int(x) for x in args.samplers.split(",") if x.strip()]
    args.seed_list = [int(x) for x in args.seeds.split(",") if x.strip()]
    args.eval_tasks = args.eval_tasks or (50 if args.quick else 200)
    if not args.sampler_counts or min(args.sampler_counts) < 1 or not args.seed_list:
        parser.error("--samplers and --seeds need at least one value each; samplers >= 1")
    if len(set(args.seed_list)) != len(args.seed_list) or args.eval_tasks < 1:
        parser.error("--seeds must not repeat a seed; --eval-tasks must be at least 1")
    return args


def bench(args: argparse.Namespace, var_dir: Path) -> list[str]:
    """Migrate, train every scenario, validate; the report's lines (and ``--json``'s file)."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    recipe = recipe_for(args)
    recipe.values.update(args.overrides)
    print(header(recipe, args.seed_list, args.sampler_counts), flush=True)
    model = recipe.start_model(var_dir / "data" / "models" / "start")
    task_set = task_set_for(recipe, "bench-async-rl")
    began = time.perf_counter()
    results: list[RunResult] = []
    for n in args.sampler_counts:
        results += scenario(n, recipe, task_set, model, args, var_dir)
    print(f"training done in {time.perf_counter() - began:.0f} s; validating ...", flush=True)
    judged, start = judge(results, recipe, model)
    lines = format_table(results, judged, args.sampler_counts, start)
    if args.json:
        args.json.write_text(json.dumps(figures(results, judged, args.sampler_counts), indent=1))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    # a SIGTERM (a timeout) still stops the workers and drops the database
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    var_dir = Path(tempfile.mkdtemp(prefix="steplab-bench-async-rl-"))
    configure(args.database_url, args.broker_url, var_dir)
    created = False
    try:
        database_create(args.database_url)
        created = True
        broker_flush(args.broker_url)
        lines = bench(args, var_dir)
    except BenchFailure as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        cleanups = [lambda: broker_flush(args.broker_url)]
        if created:
            cleanups.append(lambda: database_drop(args.database_url))
        for cleanup in cleanups:
            try:
                cleanup()
            except Exception as exc:
                print(f"cleanup failed: {exc}", file=sys.stderr)
        shutil.rmtree(var_dir, ignore_errors=True)
    print()
    print("\n".join(lines))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n(total {time.perf_counter() - began:.0f} s; load average {load} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
