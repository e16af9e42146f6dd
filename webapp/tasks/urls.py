from django.urls import path

from webapp.tasks import views

app_name = "tasks"

urlpatterns = [
    path("", views.task_sets, name="sets"),
    path("import/", views.task_import, name="import"),
    path("sets/<int:pk>/", views.task_set_detail, name="set"),
    path("<int:pk>/", views.task_detail, name="detail"),
    path("<int:pk>/edit/", views.task_edit, name="edit"),
    path("<int:pk>/quarantine/", views.task_quarantine, name="quarantine"),
    path("<int:pk>/release/", views.task_release, name="release"),
]
