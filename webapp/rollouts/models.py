"""Policies and collect runs. (Celery code never lives here: see workers/rollouts.py.)"""

from __future__ import annotations

from django.db import models

from webapp.common.models import CreatedModel


class Policy(CreatedModel):
    """A way to choose actions: an LLM endpoint, a local model directory, an inference server
    Steplab updates with each RL policy version (vLLM, SGLang), or the scripted policy.

    Secrets are never stored: ``parameters["api_key_env"]`` names the environment variable the
    worker reads the key from.
    """

    class Kind(models.TextChoices):
        SCRIPTED = "scripted", "Scripted (reference solution, optional mistakes)"
        ANTHROPIC = "anthropic", "Anthropic Messages API"
        OPENAI = "openai", "OpenAI-compatible server (vLLM, SGLang, Ollama...)"
        LOCAL = "local", "Local Hugging Face model directory"
        INFERENCE_SERVER = (
            "inference_server",
            "Inference server Steplab updates (vLLM LoRA adapters, SGLang weights)",
        )

    class PromptFormat(models.TextChoices):
        NATIVE = "native", "Native tool calling"
        REACT = "react", "ReAct text (Thought / Action / Action Input)"

    name = models.CharField(max_length=120, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    model = models.CharField(max_length=300, blank=True)
    prompt_format = models.CharField(
        max_length=16, choices=PromptFormat.choices, default=PromptFormat.NATIVE
    )
    parameters = models.JSONField(default=dict, blank=True)
    description = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return self.name

    @property
    def is_llm(self) -> bool:
        return self.kind in (self.Kind.ANTHROPIC, self.Kind.OPENAI)


class CollectRun(CreatedModel):
    """Episodes of one policy on a task set, run as a job fanned out over the rollouts queue."""

    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="collect_run"
    )
    task_set = models.ForeignKey("tasks.TaskSet", on_delete=models.PROTECT)
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="runs")
    user_policy = models.ForeignKey(
        Policy,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="user_runs",
        help_text="The policy that plays the simulated user of a conversation environment "
        "(steplab/customer-service); empty: its scripted user.",
    )
    environment = models.CharField(max_length=120)
    episodes_per_task = models.PositiveIntegerField(default=1)
    max_steps = models.PositiveIntegerField(default=30)
    step_timeout = models.FloatField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(default=2)
    seed = models.BigIntegerField(default=0)
    spend_cap_usd = models.FloatField(null=True, blank=True)
    # running totals, updated as episodes end (and cost/tokens as steps happen)
    episodes_total = models.PositiveIntegerField(default=0)
    episodes_done = models.PositiveIntegerField(default=0)
    episodes_failed = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    stop_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"collect run {self.pk}"

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.episodes_done if self.episodes_done else None

    @property
    def finished_episodes(self) -> int:
        return self.episodes_done + self.episodes_failed


class Episode(models.Model):
    """One (task, episode index) of a collect run; its steps stream into a Trajectory."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped"

    run = models.ForeignKey(CollectRun, on_delete=models.CASCADE, related_name="episodes")
    task = models.ForeignKey("tasks.Task", on_delete=models.PROTECT)
    index = models.PositiveIntegerField()  # episode number within the task
    seed = models.BigIntegerField()
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    claimed_by = models.BigIntegerField(null=True, blank=True)  # the child Job running it
    attempts = models.PositiveIntegerField(default=0)
    trajectory = models.ForeignKey(
        "trajectories.Trajectory", null=True, blank=True, on_delete=models.SET_NULL
    )
    success = models.BooleanField(null=True)
    reward = models.FloatField(null=True, blank=True)
    steps = models.PositiveIntegerField(default=0)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "task_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "task", "index"], name="episode_run_task_index")
        ]
        indexes = [models.Index(fields=["run", "status"], name="episode_run_status")]

    def __str__(self) -> str:
        return f"run {self.run_id} task {self.task_id} episode {self.index}"

    @property
    def idempotency_key(self) -> str:
        return f"collect-{self.run_id}:{self.task_id}:{self.index}:{self.seed}"


class BranchSet(CreatedModel):
    """Continuations of one policy sampled from step ``step_index`` of a stored trajectory (the
    parent), whose environment state was restored there (docs/branching.md): the Monte-Carlo
    value of that step and the step-level preference pairs where continuations differ."""

    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="branch_set"
    )
    parent = models.ForeignKey(
        "trajectories.Trajectory", on_delete=models.CASCADE, related_name="branch_sets"
    )
    step_index = models.PositiveIntegerField()
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="branch_sets")
    samples = models.PositiveIntegerField()
    seed = models.BigIntegerField(default=0)
    max_steps = models.PositiveIntegerField(default=20)
    # how the state was restored: {"method", "replayed", "snapshots"} or {"mismatch": {...}}
    restore = models.JSONField(default=dict, blank=True)
    tools = models.JSONField(default=list, blank=True)  # the environment's tools (for exports)
    successes = models.PositiveIntegerField(default=0)
    known = models.PositiveIntegerField(default=0)  # continuations with a known outcome
    value = models.FloatField(null=True, blank=True)
    value_low = models.FloatField(null=True, blank=True)
    value_high = models.FloatField(null=True, blank=True)
    confidence = models.FloatField(default=0.95)
    # [{"chosen": trajectory id, "rejected": trajectory id, "divergent_step": index}]
    pairs = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["parent", "step_index"], name="branchset_parent_step")]

    def __str__(self) -> str:
        return f"branch set {self.pk} (trajectory {self.parent_id}, step {self.step_index})"


class BranchContinuation(models.Model):
    """One continuation of a branch set; its steps stream into a Trajectory whose first steps
    are the parent's before the branch step (``metadata.branch_prefix``)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    branch_set = models.ForeignKey(
        BranchSet, on_delete=models.CASCADE, related_name="continuations"
    )
    number = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    trajectory = models.ForeignKey(
        "trajectories.Trajectory",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="branch_continuations",
    )
    success = models.BooleanField(null=True)
    restored_by = models.CharField(max_length=16, blank=True)  # replay | snapshot
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["branch_set", "number"]
        constraints = [
            models.UniqueConstraint(fields=["branch_set", "number"], name="branch_continuation_no")
        ]

    def __str__(self) -> str:
        return f"continuation {self.number} of branch set {self.branch_set_id}"

    @property
    def idempotency_key(self) -> str:
        return f"branch-{self.branch_set_id}:{self.number}:{self.seed}"
