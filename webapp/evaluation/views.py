from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.common.htmx import follow_job, stop_polling
from webapp.evaluation import selectors, services
from webapp.evaluation.ablation import presets as pipeline_presets
from webapp.evaluation.demo import DEFAULT_PIPELINE_YAML
from webapp.evaluation.flags import pipeline_flag_rows
from webapp.evaluation.forms import CheckpointsEvaluationForm, EvaluationForm, PipelineForm
from webapp.tasks.selectors import task_set_get
from webapp.training.selectors import run_get as training_run_get

CORRECTIONS = ("holm", "bonferroni", "none")


def _ctx(**extra):
    return {"active_area": "leaderboards", **extra}


def _correction(request) -> str:
    correction = request.GET.get("correction", "holm")
    return correction if correction in CORRECTIONS else "holm"


@requires(Need.READ)
def index(request):
    return render(
        request,
        "evaluation/index.html",
        _ctx(
            groups=selectors.leaderboard_index(),
            runs=selectors.evaluation_list(),
            pipelines=selectors.pipeline_list(limit=20),
        ),
    )


@requires(Need.OPERATE)
def evaluation_new(request):
    form = EvaluationForm(request.POST or None, initial=request.GET.dict() or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = services.evaluation_launch(
                policy=data["policy"],
                task_set=data["task_set"],
                samples_per_task=data["samples_per_task"],
                max_steps=data["max_steps"],
                concurrency=data["concurrency"],
                seed=data["seed"] or 0,
                name=data["name"] or "",
                user=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Evaluation {run.pk} launched.")
            return redirect("evaluation:run", pk=run.pk)
    return render(request, "evaluation/evaluation_form.html", _ctx(form=form))


@requires(Need.READ)
def evaluation_detail(request, pk: int):
    """The run's page; its status and results part follows the job live (polled by htmx)."""
    run = selectors.evaluation_get(id=pk)
    metrics = run.metrics or {}
    context = _ctx(run=run, metrics=metrics, pass_rows=selectors.pass_rows(metrics=metrics))
    if request.htmx and request.htmx.target == "evaluation-live":
        response = render(request, "evaluation/evaluation_detail.html#live", context)
        return follow_job(response, job=run.job)
    return render(request, "evaluation/evaluation_detail.html", context)


@requires(Need.READ)
def leaderboard(request, task_set: int):
    task_set_row = task_set_get(id=task_set)
    metric = request.GET.get("metric", "success")
    metric = metric if metric in ("success", "reward") else "success"
    correction = _correction(request)
    every_run = request.GET.get("every_run") == "1"
    board = selectors.leaderboard(
        task_set=task_set_row, metric=metric, correction=correction, every_run=every_run
    )
    return render(
        request,
        "evaluation/leaderboard.html",
        _ctx(
            task_set=task_set_row,
            board=board,
            metric=metric,
            correction=correction,
            corrections=CORRECTIONS,
            every_run=every_run,
        ),
    )


@requires(Need.READ)
def compare(request):
    correction = _correction(request)
    ids = [request.GET.get("a", ""), request.GET.get("b", "")]
    if not all(i.isdigit() for i in ids):
        raise Http404("Give two evaluation runs: ?a=<id>&b=<id>.")
    run_a = selectors.evaluation_get(id=ids[0])
    run_b = selectors.evaluation_get(id=ids[1])
    found = selectors.comparison(run_a=run_a, run_b=run_b, correction=correction)
    return render(
        request,
        "evaluation/compare.html",
        _ctx(a=run_a, b=run_b, correction=correction, corrections=CORRECTIONS, **found),
    )


@requires(Need.OPERATE)
@require_POST
def checkpoints_evaluate(request, training_run: int):
    run = training_run_get(id=training_run)
    form = CheckpointsEvaluationForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a task set and k for the checkpoint evaluations.")
        return redirect("training:detail", pk=run.pk)
    data = form.cleaned_data
    try:
        launched = services.checkpoints_evaluate(
            training_run=run,
            task_set=data["task_set"],
            samples_per_task=data["samples_per_task"],
            max_steps=data["max_steps"],
            seed=data["seed"] or 0,
            user=request.user,
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{len(launched)} checkpoint evaluation(s) launched."
            if launched
            else "Every checkpoint is evaluated on this task set already.",
        )
    return redirect("training:detail", pk=run.pk)


@requires(Need.READ)
def pipeline_list(request):
    return render(request, "evaluation/pipelines.html", _ctx(pipelines=selectors.pipeline_list()))


@requires(Need.OPERATE)
def pipeline_new(request):
    presets = pipeline_presets()
    chosen = request.GET.get("preset", "")
    config = presets[chosen][1] if chosen in presets else DEFAULT_PIPELINE_YAML
    form = PipelineForm(request.POST or None, initial={"config": config})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            pipeline = services.pipeline_launch(
                name=data["name"],
                base_policy=data["base_policy"],
                train_task_set=data["train_task_set"],
                eval_task_set=data["eval_task_set"],
                reward_model=data["reward_model"],
                config=data["config"],
                user=request.user,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Pipeline {pipeline.name} launched.")
            return redirect("evaluation:pipeline", pk=pipeline.pk)
    choices = [(key, label) for key, (label, _) in presets.items()]
    return render(
        request,
        "evaluation/pipeline_form.html",
        _ctx(form=form, presets=choices, preset=chosen if chosen in presets else ""),
    )


@requires(Need.READ)
def pipeline_detail(request, pk: int):
    pipeline = selectors.pipeline_get(id=pk)
    context = selectors.pipeline_context(pipeline=pipeline)
    if request.htmx:
        response = render(request, "evaluation/pipeline_detail.html#stages", context)
        if pipeline.job is not None and pipeline.job.is_terminal:
            return stop_polling(response)
        return response
    # the reward-hacking flags of its evaluation rounds and of its GRPO runs
    flags = pipeline_flag_rows(pipeline_id=pipeline.pk, limit=100)
    return render(request, "evaluation/pipeline_detail.html", _ctx(**context, flags=flags))
