from django.urls import path

from webapp.trajectories import views

app_name = "trajectories"

urlpatterns = [
    path("", views.trajectory_list, name="list"),
    path("import/", views.trajectory_import, name="import"),
    path("tag/", views.trajectory_tag, name="tag"),
    path("export/", views.trajectory_export_selection, name="export_selection"),
    path("diff/", views.trajectory_diff, name="diff"),
    path("diff/rows/", views.trajectory_diff_rows, name="diff_rows"),
    path("diff/step/", views.trajectory_diff_step, name="diff_step"),
    path("<int:pk>/", views.trajectory_detail, name="detail"),
    path("<int:pk>/steps/", views.trajectory_steps, name="steps"),
    path("<int:pk>/download.json", views.trajectory_download, name="download"),
    path("<int:pk>/raw/", views.trajectory_raw, name="raw"),
    path("<int:pk>/steps/<int:index>/observation/", views.step_observation, name="observation"),
    path("<int:pk>/steps/<int:index>/screenshot/", views.step_screenshot, name="screenshot"),
]
