from django.urls import path

from webapp.evaluation import views

app_name = "evaluation"

urlpatterns = [
    path("", views.index, name="index"),
    path("evaluations/new/", views.evaluation_new, name="new"),
    path("evaluations/<int:pk>/", views.evaluation_detail, name="run"),
    path("sets/<int:task_set>/", views.leaderboard, name="leaderboard"),
    path("compare/", views.compare, name="compare"),
    path(
        "training/<int:training_run>/evaluate/",
        views.checkpoints_evaluate,
        name="checkpoints_evaluate",
    ),
    path("pipelines/", views.pipeline_list, name="pipelines"),
    path("pipelines/new/", views.pipeline_new, name="pipeline_new"),
    path("pipelines/<int:pk>/", views.pipeline_detail, name="pipeline"),
]
