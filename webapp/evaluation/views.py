from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.evaluation import pipeline as pipelines
from webapp.evaluation import selectors, services
from webapp.evaluation.forms import CheckpointsEvaluationForm, EvaluationForm, PipelineForm
from webapp.evaluation.models import EvaluationRun, Pipeline

CORRECTIONS = ("holm", "bonferroni", "none")


def _ctx(**extra):
    return {"active_area": "leaderboards", **extra}


@requires(Need.READ)
def index(request):
    return render(
        request,
        "evaluation/index.html",
        _ctx(
            groups=selectors.leaderboard_index(),
            runs=EvaluationRun.objects.select_related("policy", "task_set", "job")[:50],
            pipelines=Pipeline.objects.select_related("job")[:20],
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
    run = get_object_or_404(
        EvaluationRun.objects.select_related("policy", "task_set", "job", "collect_run"), pk=pk
    )
    metrics = run.metrics or {}
    pass_rows = [
        {
            "k": k,
            "pass_at_k": (metrics.get("pass_at_k") or {}).get(k),
            "pass_hat_k": (metrics.get("pass_hat_k") or {}).get(k),
        }
        for k in sorted((metrics.get("pass_at_k") or {}), key=int)
    ]
    return render(
        request,
        "evaluation/evaluation_detail.html",
        _ctx(run=run, metrics=metrics, pass_rows=pass_rows),
    )


@requires(Need.READ)
def leaderboard(request, task_set: int):
    from webapp.tasks.models import TaskSet

    task_set_row = get_object_or_404(TaskSet, pk=task_set)
    metric = request.GET.get("metric", "success")
    metric = metric if metric in ("success", "reward") else "success"
    correction = request.GET.get("correction", "holm")
    correction = correction if correction in CORRECTIONS else "holm"
    every_run = request.GET.get("every_run") == "1"
    board = selectors.leaderboard(
        task_set_row, metric=metric, correction=correction, every_run=every_run
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
    correction = request.GET.get("correction", "holm")
    correction = correction if correction in CORRECTIONS else "holm"
    ids = [request.GET.get("a", ""), request.GET.get("b", "")]
    if not all(i.isdigit() for i in ids):
        raise Http404("Give two evaluation runs: ?a=<id>&b=<id>.")
    run_a = get_object_or_404(EvaluationRun.objects.select_related("policy", "task_set"), pk=ids[0])
    run_b = get_object_or_404(EvaluationRun.objects.select_related("policy", "task_set"), pk=ids[1])
    found = selectors.comparison(run_a, run_b, correction=correction)
    return render(
        request,
        "evaluation/compare.html",
        _ctx(a=run_a, b=run_b, correction=correction, corrections=CORRECTIONS, **found),
    )


@requires(Need.OPERATE)
@require_POST
def checkpoints_evaluate(request, training_run: int):
    from webapp.training.models import TrainingRun

    run = get_object_or_404(TrainingRun, pk=training_run)
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
    return render(
        request,
        "evaluation/pipelines.html",
        _ctx(pipelines=Pipeline.objects.select_related("job", "base_policy")[:200]),
    )


@requires(Need.OPERATE)
def pipeline_new(request):
    from webapp.evaluation.demo import DEFAULT_PIPELINE_YAML

    form = PipelineForm(request.POST or None, initial={"config": DEFAULT_PIPELINE_YAML})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            pipeline = pipelines.pipeline_launch(
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
    return render(request, "evaluation/pipeline_form.html", _ctx(form=form))


def _pipeline_context(pipeline: Pipeline) -> dict:
    config = pipelines.parse_config(pipeline.config)
    rows = {(s.iteration, s.name): s for s in pipeline.stages.select_related("job")}
    iterations = []
    steps = pipelines.plan(config)
    for it in sorted({it for it, _ in steps}):
        iterations.append(
            {
                "number": it,
                "stages": [
                    {"name": name, "row": rows.get((it, name))} for i, name in steps if i == it
                ],
            }
        )
    return {
        "pipeline": pipeline,
        "iterations": iterations,
        "curve": selectors.pipeline_curve(pipeline),
    }


@requires(Need.READ)
def pipeline_detail(request, pk: int):
    pipeline = get_object_or_404(
        Pipeline.objects.select_related("job", "base_policy", "train_task_set", "eval_task_set"),
        pk=pk,
    )
    context = _pipeline_context(pipeline)
    if request.htmx:
        response = render(request, "evaluation/pipeline_detail.html#stages", context)
        if pipeline.job is not None and pipeline.job.is_terminal:
            response.status_code = 286  # htmx: stop polling
        return response
    return render(request, "evaluation/pipeline_detail.html", _ctx(**context))
